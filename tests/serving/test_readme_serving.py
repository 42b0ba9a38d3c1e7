"""The README's serving command: ``mxc serve mlp.mxc`` in the background and
``examples/mlp/query.py`` at once, which must wait for readiness and print the
classes the runtime computes.  Oracle: ``Session.run`` of the same artifact.
Skipped, with the reason, without the ``[serve]`` extra."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("kserve") is None or importlib.util.find_spec("tritonclient") is None:
    pytest.skip("the README's serving command needs the [serve] extra (pip install 'mxc[serve]')",
                allow_module_level=True)

import mxc.runtime as rt  # noqa: E402
from serve_helpers import MLP, REPO, Server, compiled_mlp  # noqa: E402

QUERY = MLP / "query.py"


def _readme_serving_block() -> str:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return next(b for b in blocks if "mxc serve" in b)


def test_the_readme_serving_command_runs_the_query_script_against_mxc_serve():
    block = _readme_serving_block()
    assert "mxc serve mlp.mxc &" in block and "python examples/mlp/query.py" in block
    assert "sleep" not in block   # readiness is the script's job, not a fixed pause


def test_query_waits_for_a_server_started_after_it_and_prints_the_runtime_classes(
        tmp_path_factory):
    artifact = compiled_mlp(tmp_path_factory, batch=4)
    data = np.load(MLP / "input.npz")["data"]
    want = rt.load(artifact).run({"data": data})[0].argmax(axis=1)
    server = Server(artifact)   # started, not yet ready: the script must wait for it
    try:
        out = subprocess.run([sys.executable, str(QUERY), "--url", f"127.0.0.1:{server.port}",
                              "--wait", "120"], capture_output=True, text=True, timeout=180,
                             env=dict(os.environ), cwd=REPO)
        assert out.returncode == 0, out.stderr + server.output()
        got = np.array([int(v) for v in re.findall(r"\d+", out.stdout.strip().splitlines()[-1])])
        np.testing.assert_array_equal(got, want)
        # KServe's deprecation warnings are not the user's to act on
        assert "ORJSONResponse is deprecated" not in server.output()
    finally:
        server.stop()


def test_query_gives_up_with_a_message_when_no_server_answers():
    from serve_helpers import free_port
    out = subprocess.run([sys.executable, str(QUERY), "--url", f"127.0.0.1:{free_port()}",
                          "--wait", "1.5"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "not ready" in out.stderr and "after 2 s" in out.stderr
