"""Progress of long work: a tqdm bar on a terminal, plain lines (never silent) elsewhere.

Original failures: a compile stage or a tuning batch printed nothing for
minutes when stderr was not a terminal, and tuning's progress line and its
final summary disagreed on the best latency (the default schedule's record
counted in one and not the other).
"""

from __future__ import annotations

import io
import time

from mxc import progress
from mxc.backends.tvm.tune.progress import TuneProgress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tune_progress_is_a_bar_with_counts_and_eta_on_a_terminal():
    out = FakeTerminal()
    prog = TuneProgress(out, ["k1", "k2"], {"k1": 4, "k2": 4}, {"k1": 0, "k2": 0})
    prog.batch("k1", [1e-3, 2e-3])
    prog.batch("k2", [None, 5e-4])
    prog.close()
    text = out.getvalue()
    assert "4/8" in text and "trial" in text and "<" in text     # count, unit, ETA (a<b)
    assert "best 0.5000 ms" in text


def test_tune_progress_plain_lines_and_best_agrees_with_the_seeded_default():
    out = io.StringIO()
    prog = TuneProgress(out, ["k1"], {"k1": 3}, {"k1": 0})
    prog.best["k1"] = 1e-4            # the default schedule's record, as _tune_groups seeds it
    prog.batch("k1", [2e-4, 3e-4])    # the search found nothing better
    prog.close()
    assert "2/3 trials, best 0.1000 ms" in out.getvalue()


def test_heartbeat_when_a_stage_is_long():
    out = io.StringIO()
    stages = progress.StageProgress(True, out)
    stages._heartbeat.every = 0.2     # noqa: SLF001 - 10 s in real use
    stages.start("build for llvm")
    stages.note("FuseOps")
    time.sleep(1.5)
    stages.done("one library")
    stages.close()
    lines = out.getvalue().splitlines()
    assert any("[1/5] build for llvm: still running (FuseOps)" in ln for ln in lines)
    assert lines[-1].startswith("[1/5] build for llvm: one library")


def test_stage_bar_on_a_terminal():
    out = FakeTerminal()
    stages = progress.StageProgress(True, out, total=2)
    stages.start("passes")
    stages.done("none")
    stages.start("build")
    stages.done("one library")
    stages.close()
    text = out.getvalue()
    assert "[1/2] passes: none" in text and "[2/2] build: 00:00 elapsed" in text
    # stages are unequal (the build is most of a compile): no rate, no ETA from them
    assert "<" not in text and "/s" not in text and "%" not in text
