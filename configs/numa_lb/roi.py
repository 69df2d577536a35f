"""The ROI protocol of one gem5 run, as a table of exit-event handlers.

The guest init drives it with m5 pseudo-instructions (disk-image/init):

    boot (boot CPU)  -- m5 checkpoint -->  save the boot checkpoint, stop
                                           (only with --take-checkpoint;
                                           otherwise the event is ignored)
    m5 readfile (the job), still on the boot CPU
    m5 workbegin     -->  switch to the ROI CPU (once), reset stats
    the mix runs on the ROI CPU
    m5 workend       -->  dump stats (the ROI dump)
    m5 writefile ... -->  result files land in the output directory
    m5 exit          -->  stop

Every transition is written to ``roi.json`` in the output directory at once, so
a crashed or killed gem5 leaves the last state it reached. Never switch back to
the boot CPU: after the ROI the caches hold state an atomic_noncaching CPU
would bypass.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from enum import StrEnum
from pathlib import Path
from typing import Any

ROI_RECORD_NAME = "roi.json"


class RunState(StrEnum):
    BOOTING = "booting"  # simulating, no ROI yet
    CHECKPOINTED = "checkpointed"  # boot checkpoint written, simulation stopped
    ROI = "roi"  # between workbegin and workend
    POST_ROI = "post_roi"  # workend seen, results being handed back
    EXITED = "exited"  # the guest called m5 exit
    MAX_TICK = "max_tick"  # --max-sim-seconds reached
    KERNEL_PANIC = "kernel_panic"
    FAILED = "failed"  # anything else that stopped the simulation


class RoiProtocol:
    """Handlers for ``Simulator(on_exit_event=protocol.handlers())``.

    ``tick`` reads gem5's current tick, ``switch_cpus`` moves to the ROI CPU
    (None when boot and ROI CPU are the same), ``reset_stats``/``dump_stats``
    are m5.stats.reset/dump and ``save_checkpoint`` writes a checkpoint: passed
    in so that this module imports nothing from gem5.
    """

    def __init__(
        self,
        outdir: Path,
        tick: Callable[[], int],
        reset_stats: Callable[[], None],
        dump_stats: Callable[[], None],
        switch_cpus: Callable[[], None] | None,
        save_checkpoint: Callable[[Path], None],
        take_checkpoint: Path | None,
        record: dict[str, Any] | None = None,
    ) -> None:
        self._path = outdir / ROI_RECORD_NAME
        self._tick = tick
        self._reset_stats = reset_stats
        self._dump_stats = dump_stats
        self._switch_cpus = switch_cpus
        self._save_checkpoint = save_checkpoint
        self._take_checkpoint = take_checkpoint
        self._switched = False
        self.record: dict[str, Any] = dict(record or {})
        self.record.update(
            {"state": RunState.BOOTING.value, "events": [], "roi": None, "stats_dumps": 0}
        )
        self._write()

    # ----------------------------------------------------------------- state
    @property
    def state(self) -> RunState:
        return RunState(self.record["state"])

    def _event(self, name: str, **extra: Any) -> int:
        tick = self._tick()
        self.record["events"].append(
            {"event": name, "tick": tick, "host_time_unix": round(time.time(), 3), **extra}
        )
        return tick

    def _set(self, state: RunState) -> None:
        self.record["state"] = state.value
        self._write()

    def _write(self) -> None:
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1) + "\n")
        tmp.replace(self._path)

    # -------------------------------------------------------------- handlers
    def on_checkpoint(self) -> Generator[bool, None, None]:
        while True:
            if self._take_checkpoint is None:
                self._event("checkpoint", action="ignored (no --take-checkpoint)")
                self._write()
                yield False
                continue
            self._save_checkpoint(self._take_checkpoint)
            self._event("checkpoint", action="saved", path=str(self._take_checkpoint))
            self._set(RunState.CHECKPOINTED)
            yield True

    def on_workbegin(self) -> Generator[bool, None, None]:
        while True:
            if self._switch_cpus is not None and not self._switched:
                self._switch_cpus()
                self._switched = True
            self._reset_stats()
            tick = self._event("workbegin", switched_cpus=self._switched)
            self.record["roi"] = {"begin_tick": tick, "end_tick": None}
            self._set(RunState.ROI)
            yield False

    def on_workend(self) -> Generator[bool, None, None]:
        while True:
            tick = self._event("workend")
            self._dump_stats()
            self.record["stats_dumps"] += 1
            roi = self.record.get("roi") or {"begin_tick": None}
            roi["end_tick"] = tick
            if roi["begin_tick"] is not None:
                roi["ticks"] = tick - roi["begin_tick"]
                roi["sim_seconds"] = roi["ticks"] / 1e12  # gem5 ticks are ps
            roi["stats_dump_index"] = self.record["stats_dumps"] - 1
            self.record["roi"] = roi
            self._set(RunState.POST_ROI)
            yield False

    def _stop(self, name: str, state: RunState) -> Generator[bool, None, None]:
        while True:
            self._event(name)
            self._set(state)
            yield True

    def handlers(self, events: Any) -> dict[Any, Generator[bool, None, None]]:
        """The table, keyed by gem5's ``ExitEvent`` members (passed in as ``events``)."""
        return {
            events.CHECKPOINT: self.on_checkpoint(),
            events.WORKBEGIN: self.on_workbegin(),
            events.WORKEND: self.on_workend(),
            events.EXIT: self._stop("exit", RunState.EXITED),
            events.MAX_TICK: self._stop("max_tick", RunState.MAX_TICK),
            events.KERNEL_PANIC: self._stop("kernel_panic", RunState.KERNEL_PANIC),
            events.KERNEL_OOPS: self._stop("kernel_oops", RunState.KERNEL_PANIC),
            events.FAIL: self._stop("fail", RunState.FAILED),
        }

    def exit_code(self) -> int:
        """0 for a completed run or boot checkpoint, 2 for the tick limit, 1 otherwise."""
        return {RunState.EXITED: 0, RunState.CHECKPOINTED: 0, RunState.MAX_TICK: 2}.get(
            self.state, 1
        )
