"""The tuning database of ``mxc tune``: MetaSchedule's JSONDatabase in a directory.

What is in a database directory (records, the CPU they were tuned for, the
log of the tuning runs) and whether ``mxc compile --db`` can use it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import BackendError

#: file names of MetaSchedule's JSONDatabase inside a database directory
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
#: mxc's log of the tuning runs into a database directory: JSON lines, one per tune()
TUNE_LOG = "mxc-tune-log.jsonl"


def check_database(db: str | os.PathLike) -> str:
    """*db* as a path string; refuse a directory without a tuning database."""
    path = Path(db)
    if not path.is_dir():
        raise BackendError(f"tuning database {str(path)!r} is not a directory "
                           f"(create one with `mxc tune ... --db {path}`)")
    if not (path / WORKLOAD_FILE).is_file():
        raise BackendError(f"{str(path)!r} holds no tuning database ({WORKLOAD_FILE} missing; "
                           f"create one with `mxc tune ... --db {path}`)")
    if not sum(record_cpus(path).values()):
        runs = read_tune_log(path)
        last = f" (the last mxc tune there: {runs[-1].get('status')})" if runs else ""
        raise BackendError(f"tuning database {str(path)!r} holds no successful measurement"
                           f"{last}: nothing to compile with; run `mxc tune ... --db {path}` "
                           f"again (see {path / TUNE_LOG} and {path / 'logs'})")
    return os.fspath(path)


#: MetaSchedule's run time of a candidate that failed to build or run
_FAILED_RUN_SECS = 1e9


def record_cpus(db: str | os.PathLike) -> dict[str, int]:
    """``{CPU the records were tuned for: number of successful records}`` of database *db*
    (``generic`` for a target without ``mcpu``; GPU targets by their ``arch``)."""
    path = Path(db) / RECORD_FILE
    out: dict[str, int] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            _, rec = json.loads(line)
            secs, target = rec[1], rec[2]
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if not secs or min(float(x) for x in secs) >= _FAILED_RUN_SECS:
            continue
        cpu = _target_cpu(target)
        out[cpu] = out.get(cpu, 0) + 1
    return out


def _target_cpu(target) -> str:
    if not isinstance(target, dict):
        return "?"
    if target.get("kind") == "llvm":
        return str(target.get("mcpu") or "generic")
    return str(target.get("arch") or target.get("kind"))


def foreign_records_message(db: str | os.PathLike, target) -> str | None:
    """A warning when *db*'s records were tuned for other CPUs than *target*'s (its
    schedules still apply -- MetaSchedule matches kernels, not CPUs -- but were measured
    elsewhere), else None."""
    cpus = record_cpus(db)
    if not cpus:
        return None
    spec = dict(target.export()) if hasattr(target, "export") else dict(target)
    want = _target_cpu(spec)
    if want in cpus:
        return None
    found = ", ".join(f"{cpu} ({n} record(s))" for cpu, n in sorted(cpus.items()))
    return (f"tuning database {os.fspath(db)!r} was tuned for {found}, not for {want}: its "
            f"schedules are applied but were measured on another CPU; tune for this target "
            f"(mxc tune --target ... --db DIR) for schedules measured here")


# ---------------------------------------------------------------------------
# the tuning log
# ---------------------------------------------------------------------------
def append_tune_log(db_dir: str | os.PathLike, entry: Mapping[str, Any]) -> None:
    """Append *entry* as one JSON line to ``DB_DIR/`` :data:`TUNE_LOG`."""
    path = Path(db_dir) / TUNE_LOG
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(dict(entry), default=str) + "\n")
    except OSError as exc:  # the records are what matters; the log is informational
        logging.getLogger(__name__).warning("cannot append to %s: %s", path, exc)


def read_tune_log(db_dir: str | os.PathLike) -> list[dict]:
    """The entries of ``DB_DIR/`` :data:`TUNE_LOG`, oldest first ([] when none).

    Each is a dict: ``model`` (name, or None), ``symbol`` and ``shapes`` when
    ``mxc tune`` wrote it, ``target``, ``trials`` (asked per kernel),
    ``trials_run``, ``tasks``, ``tasks_tuned`` (not skipped), ``task_names``,
    ``search``, ``rpc``, ``started`` (UTC, ISO 8601), ``seconds`` (wall time
    of the call) and ``status`` (``"done"``, ``"interrupted"`` or ``"failed"``).
    Lines that are not JSON objects (a write cut short) are skipped.
    """
    path = Path(db_dir) / TUNE_LOG
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


# ---------------------------------------------------------------------------
# the database
# ---------------------------------------------------------------------------
def open_database(db_dir: str | os.PathLike):
    """MetaSchedule's JSONDatabase in *db_dir* (created when missing)."""
    from tvm.s_tir import meta_schedule as ms
    Path(db_dir).mkdir(parents=True, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=os.fspath(db_dir), module_equality="structural")


def trials_done(database, task_mod) -> int:
    """How many tuning records (measured trials, failed ones included) *task_mod* has."""
    import tvm_ffi
    if not database.has_workload(task_mod):
        return 0
    count = 0
    seen: dict = {}
    for rec in database.get_all_tuning_records():
        wl = rec.workload
        match = seen.get(wl)
        if match is None:
            match = bool(tvm_ffi.structural_equal(wl.mod, task_mod))
            seen[wl] = match
        count += match
    return count


def best_latency_ms(database, task_mod) -> float | None:
    if not database.has_workload(task_mod):
        return None
    wl = database.commit_workload(task_mod)
    top = database.get_top_k(wl, 1)
    if not top:
        return None
    secs = [float(s) for s in top[0].run_secs]
    if not secs or min(secs) >= _FAILED_RUN_SECS:
        return None
    return 1e3 * sum(secs) / len(secs)
