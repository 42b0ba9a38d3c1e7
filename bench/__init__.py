"""mxc's benchmarks (run as scripts: ``python bench/<name>.py``; never timed unit tests).

The helper modules here (:mod:`bench.timing`, :mod:`bench.memory`,
:mod:`bench.machine`, :mod:`bench.flops`, :mod:`bench.ceiling`,
:mod:`bench.peers`) are importable as the ``bench`` package from the
repository root; ``bench.timing``, ``bench.memory`` and the peer runners use
the standard library (and the peers' own packages) only, so they also run
under the peers' virtualenv, which has no mxc.  ``bench/mxc_runner.py``
compiles or runs one mxc model in a process of its own for
``bench_models.py``.
"""
