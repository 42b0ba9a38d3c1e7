"""The tuning database of ``mxc tune``: MetaSchedule's JSONDatabase in a directory.

What is in a database directory (records, the CPU they were tuned for, the
log of the tuning runs) and whether ``mxc compile --db`` can use it.

A cut-short line.  JSONDatabase appends one JSON line per record (tens of
kilobytes, written in several ``write`` calls), so a SIGKILL, a full disk or
a crash can leave the last line incomplete -- and TVM then refuses the whole
file (``Unexpected end of string``), and its next append would glue a new
record onto the broken one.  So before TVM reads or appends,
:func:`check_lines` reads both files line by line: a damaged *last* line is
the record being written when the writer died; it is reported (file and
line), moved to ``FILE.damaged`` and cut off, so every complete record stays
usable and the next append starts a fresh line.  A damaged line anywhere
else cannot come from an interrupted append: it is a :class:`BackendError`
naming the file and line.  ``mxc tune`` holds ``.mxc-db.lock`` in the
directory while it runs, and a reader never cuts a line off while a tuner
holds it (that line may still be being written).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....errors import BackendError

#: file names of MetaSchedule's JSONDatabase inside a database directory
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
#: mxc's log of the tuning runs into a database directory: JSON lines, one per tune()
TUNE_LOG = "mxc-tune-log.jsonl"


def check_database(db: str | os.PathLike) -> str:
    """*db* as a path string; refuse a directory without a tuning database (and repair
    a cut-short last line: :func:`check_lines`)."""
    path = Path(db)
    if not path.is_dir():
        raise BackendError(f"tuning database {str(path)!r} is not a directory "
                           f"(create one with `mxc tune ... --db {path}`)")
    if not (path / WORKLOAD_FILE).is_file():
        raise BackendError(f"{str(path)!r} holds no tuning database ({WORKLOAD_FILE} missing; "
                           f"create one with `mxc tune ... --db {path}`)")
    check_lines(path)
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
    """MetaSchedule's JSONDatabase in *db_dir* (created when missing), for tuning into:
    this process holds the directory's lock from now on, and a cut-short last line is
    repaired first (:func:`check_lines`)."""
    from tvm.s_tir import meta_schedule as ms
    try:
        Path(db_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendError(f"cannot create the tuning database directory {os.fspath(db_dir)!r}: "
                           f"{exc.strerror or exc}") from None
    _hold_lock(Path(db_dir))
    check_lines(db_dir)
    try:
        return ms.database.JSONDatabase(work_dir=os.fspath(db_dir), module_equality="structural")
    except Exception as exc:  # noqa: BLE001 - TVM's error for a file it cannot read
        raise BackendError(f"cannot open the tuning database {os.fspath(db_dir)!r}: "
                           f"{type(exc).__name__}: {str(exc).strip()[:300]}") from None


# ---------------------------------------------------------------------------
# cut-short lines
# ---------------------------------------------------------------------------
LOCK_FILE = ".mxc-db.lock"
_HELD: dict[str, int] = {}      # database directories this process holds the lock of


def _hold_lock(db_dir: Path) -> None:
    """Hold *db_dir*'s lock until this process ends (a tuner; a second one waits)."""
    key = os.path.realpath(db_dir)
    if key in _HELD:
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return
    try:
        fd = os.open(db_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return           # a read-only directory: nothing will be appended there either
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        logging.getLogger(__name__).warning(
            "another mxc tune is tuning into %s; waiting for it to finish", db_dir)
        fcntl.flock(fd, fcntl.LOCK_EX)
    _HELD[key] = fd


def _tuner_running(db_dir: Path) -> bool:
    """Whether another process holds *db_dir*'s lock (is appending records right now)."""
    if os.path.realpath(db_dir) in _HELD or not (db_dir / LOCK_FILE).exists():
        return False
    try:
        import fcntl
        fd = os.open(db_dir / LOCK_FILE, os.O_RDONLY)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _damage(line: bytes, kind: str, workloads: int) -> str | None:
    """Why *line* is not a record of file *kind*, or None when it is one."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return f"not JSON ({str(exc)[:80]})"
    if not isinstance(value, list) or len(value) != 2:
        return "not a two-element JSON list"
    if kind == RECORD_FILE:
        index = value[0]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < workloads:
            return (f"its workload index {index!r:.20} is not one of the {workloads} "
                    f"workload(s) of {WORKLOAD_FILE}")
    return None


def _check_file(path: Path, kind: str, workloads: int, may_repair: bool) -> int:
    """Check one JSON-lines file; returns its number of good lines."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()          # after the last newline: b"" unless the file is cut short
    if tail:
        lines.append(tail)
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    for i, line in enumerate(lines):
        why = _damage(line, kind, workloads)
        if why is None:
            continue
        if i < len(lines) - 1:
            raise BackendError(f"{path}:{i + 1}: a damaged tuning record ({why}), followed by "
                               f"{len(lines) - 1 - i} more line(s); only the last line can be "
                               f"cut short by an interrupted write, so the file was changed "
                               f"otherwise: remove or fix that line")
        if not may_repair:
            raise BackendError(f"{path}:{i + 1}: the last tuning record is incomplete ({why}) "
                               f"and an mxc tune holding {path.parent / LOCK_FILE} may still be "
                               f"writing it; run again when that tune has finished")
        _cut(path, starts[i], line, i + 1, why)
        return i
    if tail and may_repair:     # complete, but without its newline: the next append needs one
        with open(path, "ab") as fh:
            fh.write(b"\n")
    return len(lines)


def _cut(path: Path, start: int, line: bytes, number: int, why: str) -> None:
    damaged = path.with_name(path.name + ".damaged")
    try:
        with open(damaged, "ab") as fh:
            fh.write(line + b"\n")
        with open(path, "r+b") as fh:
            fh.truncate(start)
    except OSError as exc:
        raise BackendError(f"{path}:{number}: the last tuning record is incomplete ({why}; a "
                           f"write cut short) and cannot be removed: {exc.strerror or exc}; "
                           f"delete that line by hand") from None
    logging.getLogger(__name__).warning(
        "%s:%d: skipped the last tuning record, cut short by an interrupted write (%s); its "
        "%d bytes were moved to %s", path, number, why, len(line), damaged)


def check_lines(db_dir: str | os.PathLike) -> None:
    """Repair or refuse damaged lines in *db_dir*'s JSONDatabase files (module docstring)."""
    path = Path(db_dir)
    may_repair = not _tuner_running(path)
    workloads = 0
    for kind in (WORKLOAD_FILE, RECORD_FILE):
        if (path / kind).is_file():
            try:
                count = _check_file(path / kind, kind, workloads, may_repair)
            except OSError as exc:
                raise BackendError(f"cannot read the tuning database file {path / kind}: "
                                   f"{exc.strerror or exc}") from None
            if kind == WORKLOAD_FILE:
                workloads = count


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
