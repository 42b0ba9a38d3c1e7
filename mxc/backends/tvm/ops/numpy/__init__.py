"""TVM converters of the DeepNumpy ops (file names mirror ``mxc/compiler/ops/numpy/``).

Ops with a legacy twin (``OpDef.twin``) reuse the twin's converter through
:mod:`.twins`, after casting their operands to the dtype the twin must run in
(NumPy-mode promotion); the others have converters here or stay on the host
with the reason recorded by ``register_host_only``.  The converter registry
imports every public module here (:func:`mxc.registry.builtin_modules`).
"""
