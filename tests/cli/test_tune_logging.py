"""``mxc tune`` whatever logging handlers the application installed.

Original failure: every ``mxc tune`` after the first in a process died with
``internal error: AttributeError: 'NoneType' object has no attribute 'format'``
once the ``tvm.s_tir.meta_schedule`` logger carried an unnamed handler
(pytest 9.2's capture handler, or an application's ``StreamHandler()``):
TVM's log set-up builds a ``dictConfig`` from the handlers' names, and
``dictConfig`` closes every handler of the process as it goes.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from mxc.cli import main  # noqa: E402

from test_cli_tuning import write_tiny_model  # noqa: E402  (the one-task model)

REPO = Path(__file__).resolve().parents[2]
TUNE = ["--shape", "data=1,4,8,8", "--trials", "1", "--search", "random", "-q", "--no-verify",
        "--no-default-record"]


def test_two_tunes_with_an_unnamed_handler_leave_the_applications_logging_alone(tmp_path):
    symbol, params, _ = write_tiny_model(tmp_path)
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    unnamed = logging.StreamHandler(open(tmp_path / "app-ms.log", "w"))
    app_file = logging.FileHandler(tmp_path / "app-root.log")   # an application's own log
    logging.getLogger().addHandler(app_file)
    logger.addHandler(unnamed)
    before = (list(logger.handlers), logger.level, logger.propagate)
    try:
        for i in range(2):
            db = tmp_path / f"db{i}"
            assert main(["tune", str(symbol), "--params", str(params), "--db", str(db),
                         *TUNE]) == 0
            # MetaSchedule's logs still land where they always did
            assert list((db / "logs").glob("*task_scheduler.log"))
            assert any("task_0_" in p.name for p in (db / "logs").iterdir())
        assert (list(logger.handlers), logger.level, logger.propagate) == before
        assert app_file.stream is not None and not app_file.stream.closed
        assert not unnamed.stream.closed
    finally:
        logger.removeHandler(unnamed)
        logging.getLogger().removeHandler(app_file)
        unnamed.stream.close()
        app_file.close()


def test_two_tunes_with_an_unnamed_handler_outside_pytest(tmp_path):
    """The same in a plain interpreter (no pytest capture handler anywhere)."""
    symbol, params, _ = write_tiny_model(tmp_path)
    script = textwrap.dedent(f"""
        import logging, sys
        from mxc.cli import main
        logging.getLogger("tvm.s_tir.meta_schedule").addHandler(logging.StreamHandler())
        for i in range(2):
            rc = main(["tune", {str(symbol)!r}, "--params", {str(params)!r},
                       "--db", {str(tmp_path)!r} + f"/db{{i}}", *{TUNE!r}])
            print("exit status", rc)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if line.startswith("exit status")] == \
        ["exit status 0"] * 2, r.stderr
    assert "internal error" not in r.stderr
