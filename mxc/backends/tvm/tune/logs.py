"""MetaSchedule's logs during ``mxc tune``, set up without touching the application's logging.

TVM's own set-up (``meta_schedule.logging.get_loggers_from_work_dir``, which
``relax_integration.extracted_tasks_to_tune_contexts`` calls) hands a
``logging.config.dictConfig`` the *names* of the handlers already on the
``tvm.s_tir.meta_schedule`` logger.  An unnamed handler (an application's
``StreamHandler()``, pytest's capture handler) has the name ``None`` and the
set-up dies with ``'NoneType' object has no attribute 'format'``; and
``dictConfig`` closes every handler of the process on its way.  So mxc builds
its tuning contexts itself (:func:`tune_context`) and gives each task a logger
of its own, with a file handler it removes and closes when the task is done.

While :func:`metaschedule_logs` is active the ``tvm.s_tir.meta_schedule``
logger writes to ``DB_DIR/logs/`` (and, with *console*, to stdout) and does not
propagate to the root logger; the application's handlers on it stay attached,
and its level, propagation and handlers are as before once the block ends.
The file names are MetaSchedule's own, so ``DB_DIR/logs`` reads as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

#: MetaSchedule's logger (its task scheduler and search log under it)
METASCHEDULE_LOGGER = "tvm.s_tir.meta_schedule"
#: the prefix of MetaSchedule's per-task logger names (and of their files in DB_DIR/logs)
TASK_LOGGER_PREFIX = "tvm.s_tir.meta_schedule.logging"
_FORMAT = "%(asctime)s [%(levelname)s] %(message)s"


def logs_dir(db_dir: str | os.PathLike) -> str:
    path = os.path.join(os.fspath(db_dir), "logs")
    os.makedirs(path, exist_ok=True)
    return path


def _file_handler(path: str) -> logging.FileHandler:
    handler = logging.FileHandler(path, mode="a", delay=True)
    handler.setFormatter(logging.Formatter(_FORMAT, "%Y-%m-%d %H:%M:%S"))
    handler.setLevel(logging.DEBUG)
    return handler


@contextlib.contextmanager
def metaschedule_logs(db_dir: str | os.PathLike, console: bool = False) -> Iterator[None]:
    """MetaSchedule's log into ``DB_DIR/logs`` (and stdout with *console*) for the block."""
    logger = logging.getLogger(METASCHEDULE_LOGGER)
    saved = (logger.level, logger.propagate)
    ours: list[logging.Handler] = [
        _file_handler(os.path.join(logs_dir(db_dir), f"{TASK_LOGGER_PREFIX}.task_scheduler.log"))]
    if console:
        stream = logging.StreamHandler(sys.stdout)
        stream.setFormatter(logging.Formatter(_FORMAT, "%Y-%m-%d %H:%M:%S"))
        stream.setLevel(logging.INFO)
        ours.append(stream)
    for handler in ours:
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield
    finally:
        for handler in ours:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


@contextlib.contextmanager
def task_logger(db_dir: str | os.PathLike, task_name: str) -> Iterator[logging.Logger]:
    """A logger for one task's search, writing ``DB_DIR/logs/<its name>.log`` for the block."""
    name = f"{TASK_LOGGER_PREFIX}.task_0_{task_name[:100]}"
    logger = logging.getLogger(name)
    handler = _file_handler(os.path.join(logs_dir(db_dir), f"{name}.log"))
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def tune_context(task, logger: logging.Logger, strategy, num_threads: int, seed: int | None):
    """The ``TuneContext`` of one extracted task, as TVM's
    ``extracted_tasks_to_tune_contexts`` makes it, with *logger* instead of the ones its
    ``dictConfig`` set-up makes."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import fork_seed
    return ms.TuneContext(mod=task.dispatched[0], target=task.target,
                          space_generator="post-order-apply", search_strategy=strategy,
                          task_name=task.task_name, logger=logger,
                          rand_state=fork_seed(seed, n=1)[0], num_threads=num_threads).clone()
