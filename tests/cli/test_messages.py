"""Messages and exit codes a new user meets (issue 22, item 13), each reproduced.

A misnamed array in ``--inputs`` is named; a binary file given as the model says
what it is; a closed pipe ends ``mxc`` quietly; an unknown flag prints the verb's
usage; a ``--shape`` naming no input, or a missing one, is a usage error (64); the
small texts read right.  The MLP of ``examples/mlp`` is the model throughout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mxc.cli import main
USAGE_EXIT_CODE = 64   # mxc.errors.USAGE_EXIT_CODE

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
SYMBOL, PARAMS = str(MLP / "mlp-symbol.json"), str(MLP / "mlp-0000.params")


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mxc.cli", *args], capture_output=True,
                          text=True, cwd=REPO, **kwargs)


def last_line(r, code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    pytest.importorskip("tvm")
    out = tmp_path_factory.mktemp("art") / "mlp.mxc"
    assert main(["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "-q",
                 "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def misnamed(tmp_path_factory):
    """The MLP's input saved under the wrong key ('input' instead of 'data')."""
    path = tmp_path_factory.mktemp("in") / "misnamed.npz"
    np.savez(path, input=np.load(MLP / "input.npz")["data"])
    return path


def test_a_misnamed_input_array_is_named(artifact, misnamed):
    """Was: "no value for input(s) data: give --inputs ... or --fill-mode" (exit 4), the
    array 'input' never mentioned; the Python API names it."""
    for model in ([str(artifact)], [SYMBOL, "--params", PARAMS]):
        line = last_line(cli("run", *model, "--inputs", str(misnamed)), 4)
        assert line.endswith("misnamed.npz: unknown input(s) 'input'; the model's inputs are "
                             "data"), line


def test_a_binary_file_given_as_the_model_says_what_it_is(tmp_path, artifact, misnamed):
    """Was: "x.npz:1:16: invalid UTF-8 byte 0x8a" (the lexer's view of a zip)."""
    (tmp_path / "lib.so").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(64))
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes(16))
    for path, what in ((misnamed, "an .npz file"), (artifact, "an .mxc artifact"),
                       (tmp_path / "x.npy", "an .npy file"),
                       (tmp_path / "lib.so", "a compiled library")):
        for verb in (["compile", "--shape", "data=4,784"], ["opt", "--passes", "dce"]):
            line = last_line(cli(verb[0], str(path), *verb[1:]), 2)
            assert f"{path.name}: this is {what}" in line and "not a symbol JSON" in line, line
            assert "UTF-8" not in line
    # a text file with one bad byte still gets the byte's position
    (tmp_path / "latin1.json").write_bytes(b'{"nodes": [\n  "caf\xe9"]}')
    assert "latin1.json:2:7: invalid UTF-8 byte 0xe9" in last_line(
        cli("inspect", str(tmp_path / "latin1.json")), 2)


def test_a_closed_pipe_ends_quietly():
    """``mxc inspect ... | head -1``: was "error: [Errno 32] Broken pipe" (exit 1) and
    Python's "Exception ignored ... BrokenPipeError" at exit.  Now 141 (128 + SIGPIPE,
    what the shell reports for coreutils there) and nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "mxc.cli", "inspect", PARAMS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()          # the reader is gone before mxc writes its first line
    err = proc.stderr.read().decode()
    from mxc.errors import BROKEN_PIPE_EXIT_CODE
    assert proc.wait(timeout=120) == 141 == BROKEN_PIPE_EXIT_CODE, err
    assert err == ""


def test_an_unknown_flag_prints_the_verbs_usage():
    """Was the top-level "usage: mxc [-h] [-v] [--version] COMMAND ..."."""
    r = cli("inspect", SYMBOL, "--no-such-flag")
    assert r.returncode == USAGE_EXIT_CODE
    assert r.stderr.startswith("usage: mxc inspect ") and "COMMAND" not in r.stderr
    assert r.stderr.strip().endswith("unrecognized arguments: --no-such-flag")


def test_a_shape_for_no_input_is_a_usage_error(tmp_path):
    """Was exit 7 from compile ("shapes/dtypes given for 'dta' ..."), 5 from partition and
    silently ignored (exit 0) by inspect."""
    verbs = (["compile", "--params", PARAMS, "-o", str(tmp_path / "m.mxc")],
             ["inspect"], ["partition", "--backend", "default", "-o", str(tmp_path / "p.json")],
             ["run", "--params", PARAMS, "--fill-mode", "ones"])
    for verb in verbs:
        r = cli(verb[0], SYMBOL, "--shape", "dta=4,784", *verb[1:])
        line = last_line(r, USAGE_EXIT_CODE)
        assert r.stderr.startswith(f"usage: mxc {verb[0]} "), r.stderr
        assert "--shape dta=...: the model has no input 'dta' (did you mean 'data'?)" in line
    assert not (tmp_path / "m.mxc").exists()


def test_a_missing_shape_is_a_usage_error(tmp_path):
    """Was exit 7 after the first compile stage ("input(s) without a complete static
    shape/dtype: data (shape None ...), softmax_label ...")."""
    pytest.importorskip("tvm")
    for verb in (["compile", "-o", str(tmp_path / "m.mxc")],
                 ["tune", "--db", str(tmp_path / "db"), "--trials", "1"]):
        r = cli(verb[0], SYMBOL, "--params", PARAMS, *verb[1:])
        line = last_line(r, USAGE_EXIT_CODE)
        assert "no shape for input(s) data: give --shape data=D1,D2,..." in line, line
        assert "[1/5]" not in r.stderr            # refused before any work
    r = cli("run", SYMBOL, "--params", PARAMS, "--fill-mode", "ones")
    assert "--fill-mode needs the shape of 'data'" in last_line(r, USAGE_EXIT_CODE)


def test_small_texts_read_right(tmp_path, artifact):
    from mxc.errors import FrontendError, ExecutionError
    from mxc.compiler.weights import check_params
    # "— is it this model's file?. Missing:" had a stray period after the question
    with pytest.raises(FrontendError) as info:
        check_params(["data", "w"], {"other": np.zeros(1)}, {"data"}, source="o.params")
    assert "is it this model's file? Missing: w." in str(info.value)
    assert "?." not in str(info.value)
    # one output: "(or out0..out0)"
    import mxc.runtime
    sess = mxc.runtime.load(str(artifact))
    with pytest.raises(ExecutionError) as info:
        sess.run(["prob"], {"data": np.zeros((4, 784), np.float32)})
    assert str(info.value).endswith("outputs are softmax_output (or out0)")
    # an empty pipeline: ": 14 -> 14 nodes"
    r = cli("opt", SYMBOL, "--passes", "", "-o", str(tmp_path / "o.json"))
    assert r.returncode == 0 and r.stdout.startswith("no passes: 14 -> 14 nodes;"), r.stdout
