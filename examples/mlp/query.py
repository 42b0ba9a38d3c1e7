"""Ask a running ``mxc serve mlp.mxc`` which class each row of the example input is.

The README's serving command starts the server in the background and runs this
at once, so this waits (up to ``--wait`` seconds) until the server says the
model is ready: it may still be importing KServe or loading the artifact.  It
then sends ``examples/mlp/input.npz`` over KServe's V2 REST protocol with
NVIDIA's ``tritonclient`` (a client that is not mxc's) and prints the arg-max of
each row of ``softmax_output``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient


def wait_until_ready(client: httpclient.InferenceServerClient, model: str, seconds: float) -> bool:
    """True once *model* is ready; False when *seconds* pass first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if client.is_model_ready(model):
                return True
        except Exception:  # noqa: BLE001 - not listening yet: connection refused, reset, ...
            pass
        time.sleep(0.5)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="127.0.0.1:8080", help="the server's REST host:port")
    ap.add_argument("--model", default="mlp", help="the served model's name")
    ap.add_argument("--wait", type=float, default=180.0, help="seconds to wait for readiness")
    args = ap.parse_args(argv)
    client = httpclient.InferenceServerClient(args.url)
    if not wait_until_ready(client, args.model, args.wait):
        print(f"query.py: model {args.model!r} not ready at {args.url} after {args.wait:.0f} s",
              file=sys.stderr)
        return 1
    data = np.load(Path(__file__).with_name("input.npz"))["data"]
    request = httpclient.InferInput("data", list(data.shape), "FP32")
    request.set_data_from_numpy(data)
    probabilities = client.infer(args.model, [request]).as_numpy("softmax_output")
    print(probabilities.argmax(axis=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
