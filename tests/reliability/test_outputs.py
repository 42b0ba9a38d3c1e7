"""Issue 14 item 6 (outputs written as a set, temporaries cleaned) and issue 12 item 3
(``-o -``, ``-o /dev/stdout``, a missing output directory)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import skip_where_simulated  # noqa: E402

from mxc import atomic_files, output_paths
from mxc.cli import main
from mxc.errors import OutputError
from reliability_helpers import REPO, run_cli

MLP_JSON = str(REPO / "examples" / "mlp" / "mlp-symbol.json")
MLP_PARAMS = str(REPO / "examples" / "mlp" / "mlp-0000.params")


def dead_pid() -> int:
    """The pid of a process that has exited (so a temporary named after it is stale)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def age(path: Path, seconds: float = 3600) -> Path:
    """Make *path* look *seconds* old (fresh leftovers are kept: their owner may be alive
    in another PID namespace)."""
    t = time.time() - seconds
    os.utime(path, (t, t))
    return path


# ---------------------------------------------------------------------------------------
# output sets
# ---------------------------------------------------------------------------------------
def test_output_set_renames_only_after_every_file_is_written_with_signals_held(
        tmp_path, monkeypatch):
    """Failure 9: `opt -o J --params-out P` wrote one file after the other, so a Ctrl-C
    between them left new params beside the old JSON."""
    a, b = tmp_path / "a.json", tmp_path / "b.params"
    a.write_text("old a")
    b.write_text("old b")
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        staged = sorted(p.name for p in tmp_path.glob(".*.tmp"))
        blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        seen.append((Path(dst).name, staged, blocked))
        real_replace(src, dst)
    monkeypatch.setattr(atomic_files.os, "replace", replace)
    out = atomic_files.OutputSet()
    out.add(b, b"new b")
    out.add(a, "new a")
    out.commit()
    assert a.read_text() == "new a" and b.read_text() == "new b"
    first_dst, staged, blocked = seen[0]
    assert len(staged) == 2 and blocked  # both written before the first rename, SIGINT held
    assert all(s[2] for s in seen)
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # restored


def test_output_set_failing_midway_leaves_every_old_file_and_no_temporary(tmp_path,
                                                                          monkeypatch):
    a, b = tmp_path / "a.json", tmp_path / "b.params"
    a.write_text("old a")
    b.write_text("old b")
    real_fdopen = os.fdopen
    calls = []

    def failing_fdopen(fd, *args, **kw):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise KeyboardInterrupt  # Ctrl-C while the second file is being written
        return real_fdopen(fd, *args, **kw)
    monkeypatch.setattr(atomic_files.os, "fdopen", failing_fdopen)
    out = atomic_files.OutputSet()
    out.add(b, b"new b")
    out.add(a, "new a")
    with pytest.raises(KeyboardInterrupt):
        out.commit()
    assert a.read_text() == "old a" and b.read_text() == "old b"
    assert not list(tmp_path.glob(".*.tmp"))


def test_stale_temporaries_of_a_killed_run_are_removed_by_the_next(tmp_path):
    """Failure 9: SIGKILL left .NAME.PID.HEX.tmp files that nothing cleaned."""
    out = tmp_path / "model.json"
    stale = tmp_path / f".model.json.{dead_pid()}.0a1b2c3d.tmp"
    stale.write_text("half written")
    age(stale)
    fresh = tmp_path / f".model.json.{dead_pid()}.0f0f0f0f.tmp"  # just written: kept
    fresh.write_text("half written")
    live = tmp_path / f".model.json.{os.getpid()}.deadbeef.tmp"  # a writer still running
    live.write_text("in progress")
    age(live)
    atomic_files.atomic_write_text(out, "new")
    assert out.read_text() == "new" and not stale.exists() and live.exists()
    assert fresh.exists()


def test_library_left_by_a_crash_inside_dlopen_is_removed_by_the_next_load(tmp_path,
                                                                           monkeypatch):
    """Failure 9: a crash inside dlopen left mxc-lib-*/lib.so behind."""
    from mxc.runtime.artifact import extract_library
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    crashed = tmp_path / f"mxc-lib-{dead_pid()}-abc123"
    crashed.mkdir()
    (crashed / "lib.so").write_bytes(b"\x7fELF")
    age(crashed)
    export = tmp_path / f"mxc-export-{dead_pid()}-x1y2"
    export.mkdir()
    age(export)
    d, lib = extract_library(b"library bytes")
    assert not crashed.exists()
    assert Path(d).name.startswith(f"mxc-lib-{os.getpid()}-") and Path(lib).is_file()
    atomic_files.clean_stale(tmp_path, "mxc-export-*")
    assert not export.exists() and Path(d).exists()  # our own is kept


# ---------------------------------------------------------------------------------------
# output paths (issue 12 item 3)
# ---------------------------------------------------------------------------------------
def test_opt_writes_json_to_stdout_without_o_and_with_o_dash(capsys):
    for extra in ([], ["-o", "-"]):
        assert main(["opt", MLP_JSON, "--passes", "dce", *extra]) == 0
        cap = capsys.readouterr()
        assert cap.out.lstrip().startswith("{") and '"nodes"' in cap.out
        assert "dce:" in cap.err and "dce:" not in cap.out  # the summary goes to stderr
    assert not Path("-").exists()


def test_output_to_a_fifo_or_device_is_written_in_place_not_replaced(tmp_path):
    """Issue 12 item 3: `-o /dev/stdout` replaced the device node (the atomic rename landed
    on it); a FIFO stands in for the device here."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["opt", MLP_JSON, "--passes", "dce", "-o", str(fifo)]) == 0
    reader.join(10)
    assert got and got[0].lstrip().startswith(b"{")
    import stat
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    r = run_cli("opt", MLP_JSON, "--passes", "dce", "-o", "/dev/stdout")
    assert r.returncode == 0 and r.stdout.lstrip().startswith(b"{")
    # stdout redirected to a regular file: /dev/stdout then resolves to that file, and an
    # atomic rename would replace the /dev/stdout link itself
    redirected = tmp_path / "redirected.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(redirected, "wb") as out:
        rc = subprocess.run([sys.executable, "-m", "mxc", "opt", MLP_JSON, "--passes", "dce",
                             "-o", "/dev/stdout"], stdout=out, stderr=subprocess.DEVNULL,
                            env=env, cwd=REPO, timeout=120).returncode
    assert rc == 0 and redirected.read_bytes().lstrip().startswith(b"{")
    assert os.path.islink("/dev/stdout") or stat.S_ISCHR(os.stat("/dev/stdout").st_mode)
    assert not list(Path("/dev").glob(".stdout.*"))


@pytest.mark.parametrize("verb", [
    ["opt", MLP_JSON, "--passes", "dce", "-o", "{d}/sub/out.json"],
    ["opt", MLP_JSON, "--passes", "dce", "-o", "{d}/out.json", "--params-out",
     "{d}/nope/out.params"],
    ["compile", MLP_JSON, "--params", MLP_PARAMS, "--shape", "data=4,784", "-o",
     "{d}/sub/out.mxc"],
])
def test_missing_output_directory_is_reported_before_work_naming_it(tmp_path, verb):
    """Issue 12 item 3: a missing directory surfaced (after the work) as an internal
    temporary's name."""
    args = [a.format(d=tmp_path) for a in verb]
    r = run_cli(*args, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == OutputError.exit_code, err
    missing = "nope" if "nope" in " ".join(args) else "sub"
    assert f"directory '{tmp_path / missing}' does not exist" in err
    assert ".tmp" not in err and "Traceback" not in err


def test_output_errors_are_typed():
    with pytest.raises(OutputError, match="is a directory"):
        output_paths.check_output_path(tempfile.gettempdir())


def test_compile_dash_o_writes_the_artifact_to_stdout(tmp_path, simulated_host):
    """Issue 12 item 3: `-o -` wrote a file named '-'."""
    skip_where_simulated(simulated_host, "`mxc compile`")
    pytest.importorskip("tvm")
    import numpy as np

    import mxc.runtime as rt
    r = run_cli("compile", MLP_JSON, "--params", MLP_PARAMS, "--shape", "data=4,784", "-o", "-",
                "-q")
    assert r.returncode == 0, r.stderr
    assert b"wrote standard output" in r.stderr and not (REPO / "-").exists()
    path = tmp_path / "from-stdout.mxc"
    path.write_bytes(r.stdout)
    x = np.load(REPO / "examples" / "mlp" / "input.npz")["data"]
    assert rt.load(path).run({"data": x})[0].shape == (4, 10)


def test_sigint_during_opt_leaves_both_old_or_both_new_files(tmp_path):
    """Failure 9, end to end: Ctrl-C at many points of `mxc opt -o J --params-out P`."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    json_out, params_out = tmp_path / "o-symbol.json", tmp_path / "o-0000.params"
    cmd = [sys.executable, "-m", "mxc", "opt", MLP_JSON, "--params", MLP_PARAMS, "--passes",
           "dce", "-o", str(json_out), "--params-out", str(params_out)]
    t0 = time.monotonic()
    assert subprocess.run(cmd, env=env, cwd=REPO, capture_output=True).returncode == 0
    full = time.monotonic() - t0
    new = (json_out.read_bytes(), params_out.read_bytes())
    old = (b"old json", b"old params")
    for k in range(8):
        json_out.write_bytes(old[0])
        params_out.write_bytes(old[1])
        p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(full * (0.5 + 0.1 * k))
        p.send_signal(signal.SIGINT)
        p.wait(60)
        got = (json_out.read_bytes(), params_out.read_bytes())
        assert got in (old, new), f"mixed outputs after SIGINT at {0.5 + 0.1 * k:.1f} of the run"
        assert not list(tmp_path.glob(".*.tmp"))
