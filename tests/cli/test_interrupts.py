"""Ctrl-C ends ``mxc compile`` and ``mxc tune`` as "interrupted" with exit code 130.

Original failures: a SIGINT during the TVM build printed ``TVM compilation
for llvm failed: RuntimeError:`` (TVM's FFI turns the interrupt into an empty
error) and exited 7; during ``mxc tune`` every worker process printed a
``KeyboardInterrupt`` traceback and the run logged "failed" (or carried on and
logged "done").  The subprocess tests are bounded in time; the SIGINT reaches
TVM's C++ code either from a pass instrument (deterministic) or from outside,
to the whole process group, as a terminal sends it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mxc.interrupts import check, interrupted, watch_interrupts

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
BOUND_S = 300


@pytest.fixture(autouse=True)
def default_sigint():
    """Python's own SIGINT handler for each test, as a terminal gives it.  A suite started
    under ``nohup`` or as a shell's background job inherits SIGINT ignored, and
    ``watch_interrupts`` rightly leaves an ignoring application alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _default_sigint_in_child():
    signal.signal(signal.SIGINT, signal.SIG_DFL)   # Python then installs its own handler


def _sigint_self():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)     # the handler runs (and raises) before this returns


def test_an_error_raised_after_a_sigint_becomes_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt) as info:
        with watch_interrupts():
            try:
                _sigint_self()
            except KeyboardInterrupt:
                raise RuntimeError("") from None    # what TVM's FFI makes of it
    assert isinstance(info.value.__cause__, RuntimeError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_swallowed_sigint_still_ends_the_block_and_check_stops_at_once():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with watch_interrupts():
            try:
                _sigint_self()
            except KeyboardInterrupt:
                pass                                 # swallowed by the library
            assert interrupted()
            with pytest.raises(KeyboardInterrupt):
                check()
            reached.append(True)
    assert reached and not interrupted()


def test_deferred_the_first_sigint_is_noted_and_a_second_raises_at_once():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with watch_interrupts():                     # the command line's watch
            with watch_interrupts(defer=True):       # mxc tune's: stop at a batch boundary
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
                steps.append(interrupted())          # noted, nothing raised
                with pytest.raises(KeyboardInterrupt):
                    _sigint_self()                   # the impatient second Ctrl-C
                steps.append("second raised")
    assert steps == [True, "second raised"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_errors_without_a_sigint_pass_through_unchanged():
    with pytest.raises(ValueError, match="real"):
        with watch_interrupts():
            raise ValueError("real")
    with watch_interrupts():
        check()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


_INJECT = textwrap.dedent("""
    import os, signal, sys
    import tvm
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class InterruptAt:   # SIGINT to this process as the N-th pass inside tvm.compile starts
        def __init__(self, n):
            self.n, self.seen = n, 0
        def run_before_pass(self, mod, info):
            self.seen += 1
            if self.seen == self.n:
                os.kill(os.getpid(), signal.SIGINT)

    with tvm.transform.PassContext(instruments=[InterruptAt(40)]):
        {body}
""")


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=BOUND_S, preexec_fn=_default_sigint_in_child)


def test_sigint_inside_the_tvm_build_is_interrupted_130(tmp_path):
    pytest.importorskip("tvm")
    out = tmp_path / "m.mxc"
    args = ["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
            "--shape", "data=4,784", "-q", "-o", str(out)]
    r = _run_python(_INJECT.format(body=f"from mxc.cli import main; sys.exit(main({args!r}))"))
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip().splitlines() == ["mxc compile: interrupted"], r.stderr
    assert not out.exists()


def test_sigint_inside_the_tvm_build_is_keyboard_interrupt_from_python():
    pytest.importorskip("tvm")
    body = textwrap.indent(textwrap.dedent(f"""
        import mxc
        sym, arg, aux = mxc.load_checkpoint({str(MLP / 'mlp')!r}, 0)
        try:
            mxc.compile(sym, (arg, aux), shapes={{"data": (4, 784)}})
        except BaseException as exc:
            print(type(exc).__name__)
    """), "    ").strip()
    r = _run_python(_INJECT.format(body=body))
    assert r.stdout.split() == ["KeyboardInterrupt"], r.stdout + r.stderr


def test_ctrl_c_to_the_process_group_mid_tune(tmp_path):
    """As a terminal does: SIGINT to mxc tune and its worker processes, just after a
    measured batch (where TVM's task scheduler crashed on an exception from its signal
    check: the first Ctrl-C now ends the task after its batch)."""
    pytest.importorskip("tvm")
    for name in ("psutil", "cloudpickle"):
        pytest.importorskip(name)
    sys.path.insert(0, str(Path(__file__).parent))
    from test_cli_tuning import write_tiny_model
    symbol, params, _ = write_tiny_model(tmp_path)
    db = tmp_path / "db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mxc.cli", "tune", str(symbol), "--params", str(params),
         "--shape", "data=1,4,8,8", "--trials", "400", "--batch", "2", "--search", "random",
         "--no-default-record", "--db", str(db)],
        stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
        preexec_fn=_default_sigint_in_child)
    lines = []
    try:
        deadline = time.time() + BOUND_S
        for line in proc.stderr:             # until the first measured batch
            lines.append(line)
            if "trials, best" in line or time.time() > deadline:
                break
        assert any("trials, best" in line for line in lines), "".join(lines)
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stderr.read()
        rc = proc.wait(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 130, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert rest.strip().splitlines()[-1] == "mxc tune: interrupted", rest
    log = [json.loads(line) for line in (db / "mxc-tune-log.jsonl").read_text().splitlines()]
    assert log[-1]["status"] == "interrupted"
