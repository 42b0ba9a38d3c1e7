"""``bench/hostile.py`` (issue 35's replay and latency modes) runs end to end.

A few cheap checks of the replay against a real ``mxc serve`` subprocess, and a
one-second latency pairing, each in a child process (KServe's gRPC protos, which
the replay imports, and tritonclient's cannot share this one).  No timing is
asserted here: the latency figures are the benchmark's to report, not a test's.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    # looked up, never imported here: kserve's gRPC protos and tritonclient's (imported by
    # other tests of this process) register the same names in protobuf's one pool
    if importlib.util.find_spec("kserve") is None:
        pytest.skip("mxc serve needs KServe (mxc[serve])")
    pytest.importorskip("tvm")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "bench.hostile", *args,
                           "--workdir", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_replay_prints_its_table_and_passes_where_the_server_is_hardened(tmp_path):
    done = _run(tmp_path, "replay", "-k", "openapi,symlink,datatype,nan")
    lines = done.stdout.splitlines()
    assert lines and lines[0].split(" | ")[0].strip() == "finding", done.stdout + done.stderr
    assert done.stdout.count(" | ") >= 4 * 3
    assert done.returncode == 0, done.stdout


def test_latency_mode_pairs_a_hostile_run_with_a_quiet_one(tmp_path):
    done = _run(tmp_path, "latency", "--seconds", "1", "--clients", "4", "--phases", "malformed")
    assert "CPU:" in done.stdout, done.stdout + done.stderr
    row = [line for line in done.stdout.splitlines() if line.startswith("malformed")]
    assert row, done.stdout + done.stderr
    assert row[0].split()[7] == "0", row[0]   # no valid request failed
