"""Progress of ``mxc tune``: a tqdm bar on a terminal, plain lines elsewhere.

:class:`TuneProgress` counts the measured trials of every task (fed by
:func:`progress_callback`, a MetaSchedule measure callback) and keeps the best
latency seen, seeded with the default schedule's record so that the progress
line and the final summary agree.
"""

from __future__ import annotations

import time
from typing import TextIO

from .... import progress as _progress

class TuneProgress:
    """Writes ``[mxc tune] ...`` lines after each measured batch."""

    def __init__(self, stream: TextIO | None, names: list[str], goal: dict[str, int],
                 done_before: dict[str, int]):
        self.stream = stream
        self.names = names
        self.goal = goal
        self.done = dict(done_before)
        self.best: dict[str, float] = {}
        self.start = time.time()
        # the trials this run measures: of the tasks tuned now (*names*), not the skipped
        todo = sum(max(goal.get(n, 0) - done_before.get(n, 0), 0) for n in names)
        self.total_goal = todo
        self.total_done = 0
        self.run_counts: dict[str, int] = {n: 0 for n in names}
        self.current = ""
        # a terminal: one tqdm bar over every trial of this run (counts, ETA); else plain
        # lines, with a "still working" line when a batch takes long
        self.bar = _progress.bar(todo, "[mxc tune]", stream, unit="trial") if stream else None
        self.heartbeat = (_progress.Heartbeat(stream, self._still) if stream is not None
                          and self.bar is None else None)

    def _still(self) -> str:
        return (f"[mxc tune] task {self.current or '-'}: searching and measuring... "
                f"{time.time() - self.start:.0f} s")

    def begin(self, name: str) -> None:
        idx = self.names.index(name) + 1 if name in self.names else 0
        self.current = f"{idx}/{len(self.names)} {name}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def batch(self, name: str, latencies: list[float | None]) -> None:  # noqa: C901
        n = len(latencies)
        if n == 0:          # an empty batch (the search found no new candidate)
            return
        self.done[name] = self.done.get(name, 0) + n
        self.run_counts[name] = self.run_counts.get(name, 0) + n
        self.total_done += n
        ok = [x for x in latencies if x is not None]
        if ok:
            best = min(ok)
            if name not in self.best or best < self.best[name]:
                self.best[name] = best
        if self.stream is None:
            return
        idx = self.names.index(name) + 1 if name in self.names else 0
        best = self.best.get(name)
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix_str(f"task {idx}/{len(self.names)} {name[:40]}, best "
                                     + (f"{best * 1e3:.4f} ms" if best is not None else "-"))
            return
        if self.heartbeat is not None:
            self.heartbeat.touch()
        elapsed = time.time() - self.start
        msg = (f"[mxc tune] task {idx}/{len(self.names)} {name}: "
               f"{self.done[name]}/{self.goal.get(name, '?')} trials, "
               f"best {best * 1e3:.4f} ms" if best is not None else
               f"[mxc tune] task {idx}/{len(self.names)} {name}: "
               f"{self.done[name]}/{self.goal.get(name, '?')} trials, no valid run yet")
        msg += f" | all: {self.total_done}/{self.total_goal} trials, {elapsed:.0f} s"
        if ok and len(ok) < n:
            msg += f" ({n - len(ok)} failed)"
        elif not ok:
            msg += f" ({n} failed)"
        print(msg, file=self.stream, flush=True)


def progress_callback(progress: TuneProgress, names: list[str]):
    from tvm.s_tir import meta_schedule as ms
    from tvm.ir.utils import derived_object

    from ....interrupts import interrupted

    @derived_object
    class _Callback(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results):
            lat = []
            for br, rr in zip(builder_results, runner_results):
                if br.error_msg is not None or rr.error_msg is not None or not rr.run_secs:
                    lat.append(None)
                else:
                    secs = [float(s) for s in rr.run_secs]
                    lat.append(sum(secs) / len(secs))
            progress.batch(names[int(task_id)], lat)
            if interrupted():    # Ctrl-C: end the task after this (committed) batch; raising
                task_scheduler.terminate_task(int(task_id))   # here crashes TVM's C++

    return _Callback()
