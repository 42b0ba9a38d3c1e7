"""Peer engines (MXNet 1.9.1, ONNX Runtime, OpenVINO) measured beside mxc.

They live in their own virtualenv (``bench/.venv-peers``, see :mod:`bench.peers.venv`)
and run as subprocesses: :mod:`bench.peers.mxnet_runner` and
:mod:`bench.peers.ort_runner` (and :mod:`bench.peers.openvino_runner`) are scripts for that venv's python that print one
JSON object (timings in seconds, versions, settings) and save their outputs to
an ``.npz`` so the harness checks every engine against the same reference.
"""

import argparse
import os


def onnx_runner_arguments() -> argparse.ArgumentParser:
    """The command line every ONNX runner takes: the model, its inputs, threads, calls."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True, help="npz keyed by input name")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--outputs", help="save the outputs (out0, out1, ...) here")
    return ap
