"""Peer engines (MXNet 1.9.1, ONNX Runtime) measured beside mxc.

They live in their own virtualenv (``bench/.venv-peers``, see :mod:`bench.peers.venv`)
and run as subprocesses: :mod:`bench.peers.mxnet_runner` and
:mod:`bench.peers.ort_runner` are scripts for that venv's python that print one
JSON object (timings in seconds, versions, settings) and save their outputs to
an ``.npz`` so the harness checks every engine against the same reference.
"""
