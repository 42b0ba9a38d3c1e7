"""``mxc run ART.mxc --shape ...`` (issue 22, item 6).

Original failure: ``--shape data=2,784`` on an artifact compiled for (4, 784) was
ignored and the run went ahead with batch 4 (exit 0).  A shape the artifact cannot
take, or one for an input it does not have, is now a usage error naming what it
takes; a shape it takes sizes the generated inputs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mxc.cli import main

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    pytest.importorskip("tvm")
    out = tmp_path_factory.mktemp("art") / "mlp.mxc"
    assert main(["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--shape", "data=4,784", "-q", "-o", str(out)]) == 0
    return out


def run(*args):
    return subprocess.run([sys.executable, "-m", "mxc.cli", "run", *args], capture_output=True,
                          text=True, cwd=REPO)


def test_a_shape_the_artifact_cannot_take_is_refused(artifact):
    for flag in (["--shape", "data=2,784"], ["--input-shapes", "data:[4,785]"]):
        r = run(str(artifact), "--fill-mode", "ones", *flag)
        assert r.returncode == 64, (r.returncode, r.stdout, r.stderr)
        assert r.stderr.startswith("usage: mxc run ") and "Traceback" not in r.stderr
        assert "mlp.mxc takes data=4,784" in r.stderr.splitlines()[-1]
        assert r.stdout == ""                        # nothing ran


def test_a_shape_for_an_input_the_artifact_lacks_is_refused(artifact):
    r = run(str(artifact), "--fill-mode", "ones", "--shape", "dat=4,784")
    assert r.returncode == 64
    assert "the model has no input 'dat' (did you mean 'data'?); its data inputs are data" in \
        r.stderr.splitlines()[-1]


def test_the_shape_it_takes_runs(artifact):
    r = run(str(artifact), "--fill-mode", "ones", "--shape", "data=4,784")
    assert r.returncode == 0 and "shape (4, 10)" in r.stdout, r.stderr


def test_the_runtime_helper_is_the_sessions_own_check(artifact):
    """:func:`mxc.runtime.shapes.accepts` agrees with what ``Session.run`` accepts."""
    import numpy as np
    import mxc.runtime
    from mxc.errors import ExecutionError
    from mxc.runtime.shapes import accepts, shape_text
    sess = mxc.runtime.load(str(artifact))
    (info,) = sess.inputs
    assert shape_text(info) == "data=4,784"
    for shape in ((4, 784), (2, 784), (4, 785), (4, 784, 1)):
        try:
            sess.run({"data": np.zeros(shape, np.float32)})
            ran = True
        except ExecutionError:
            ran = False
        assert accepts(info, shape) == ran, shape
