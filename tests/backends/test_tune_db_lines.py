"""Issue 28, item 2: a tuning database survives a cut-short last line.

JSONDatabase appends one JSON line per record; a line cut by SIGKILL or a full
disk made the whole database unusable (compile: TVM's "Unexpected end of
string"; tune: an untyped internal error).  Now the damaged last line is
skipped and reported naming file and line, the complete records are used,
and a damaged line elsewhere is a BackendError naming file and line.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from mxc.backends.tvm import build_module
from mxc.backends.tvm.tune.database import RECORD_FILE, WORKLOAD_FILE, check_lines
from mxc.errors import BackendError


def _tune_in_a_fresh_process(db: Path, trials: int) -> subprocess.CompletedProcess:
    """Tune conftest's tiny conv into *db* in another process (MetaSchedule's loggers break
    a second tuning run in one process), whose stderr the tests read."""
    code = ("import sys; sys.path.insert(0, '.')\n"
            "from tests.conftest import tiny_conv\n"
            "from mxc.backends.tvm.tune import tune\n"
            f"tune(tiny_conv()[2], 'llvm', {trials}, {str(db)!r}, search='random', "
            f"progress=False, verify=False)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900, cwd=Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def tuned(tiny_conv_tuned):
    """(module, database): conftest's tiny conv tuned to 2 trials (random search: quick),
    the session's tune that test_tvm_tuning.py checks too; each test changes a copy."""
    _, _, mod, db, _ = tiny_conv_tuned
    return mod, db


def _copy(db: Path, tmp_path: Path) -> Path:
    out = tmp_path / "db"
    shutil.copytree(db, out)
    return out


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def test_a_cut_short_last_record_is_skipped_and_reported(tuned, tmp_path, caplog):
    mod, db = tuned
    db = _copy(db, tmp_path)
    records = db / RECORD_FILE
    good = _lines(records)
    assert len(good) == 3
    cut = good[-1][: len(good[-1]) // 2]                  # SIGKILL half-way through a write
    records.write_bytes(b"\n".join(good[:-1]) + b"\n" + cut)
    with caplog.at_level(logging.WARNING):
        build_module(mod, "llvm", db=db)                  # was TVM's "Unexpected end of string"
    assert any(f"{records}:3: skipped the last tuning record" in r.getMessage()
               for r in caplog.records)
    assert _lines(records) == good[:-1]                   # the complete records are kept
    assert (db / (RECORD_FILE + ".damaged")).read_bytes() == cut + b"\n"


def test_tuning_again_after_a_cut_appends_clean_lines(tuned, tmp_path):
    """The cut is removed before TVM appends: no record is glued onto a broken one."""
    mod, db = tuned
    db = _copy(db, tmp_path)
    records = db / RECORD_FILE
    good = _lines(records)
    records.write_bytes(b"\n".join(good) + b"\n" + good[0][:100])
    r = _tune_in_a_fresh_process(db, 5)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{records}:4: skipped the last tuning record" in r.stderr
    lines = _lines(records)
    assert lines[:3] == good and len(lines) > 3
    check_lines(db)                                        # every line is whole
    build_module(mod, "llvm", db=db)


def test_a_damaged_record_in_the_middle_is_a_backend_error_naming_file_and_line(tuned,
                                                                               tmp_path):
    mod, db = tuned
    db = _copy(db, tmp_path)
    records = db / RECORD_FILE
    good = _lines(records)
    records.write_bytes(b"\n".join([good[0], good[1][:50], good[2]]) + b"\n")
    with pytest.raises(BackendError, match=f"{RECORD_FILE}:2: a damaged tuning record"):
        build_module(mod, "llvm", db=db)
    r = _tune_in_a_fresh_process(db, 5)                   # was an untyped internal error
    assert r.returncode != 0 and "BackendError" in r.stderr
    assert f"{RECORD_FILE}:2: a damaged tuning record" in r.stderr
    assert _lines(records)[1] == good[1][:50]             # nothing is changed


def test_a_record_naming_a_missing_workload_is_refused(tuned, tmp_path):
    _, db = tuned
    db = _copy(db, tmp_path)
    records = db / RECORD_FILE
    good = _lines(records)
    records.write_bytes(b"\n".join([b"[7" + good[0][2:], *good[1:]]) + b"\n")
    with pytest.raises(BackendError, match=f"{RECORD_FILE}:1: .*workload index 7 is not one of "
                                           f"the 1 workload"):
        check_lines(db)


def test_a_complete_last_line_without_its_newline_gets_one(tuned, tmp_path):
    _, db = tuned
    db = _copy(db, tmp_path)
    workloads = db / WORKLOAD_FILE
    data = workloads.read_bytes()
    workloads.write_bytes(data.rstrip(b"\n"))
    check_lines(db)
    assert workloads.read_bytes() == data
