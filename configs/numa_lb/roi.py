"""The ROI protocol of one gem5 run, as a table of exit-event handlers.

The guest init drives it with m5 pseudo-instructions (disk-image/init):

    boot (boot CPU)  -- m5 checkpoint -->  save the boot checkpoint, stop
                                           (only with --take-checkpoint;
                                           otherwise the event is ignored)
    m5 readfile (the job), still on the boot CPU
    m5 workbegin 4   -->  warm-up: switch to the ROI CPU (once), no reset
                          (only with the job's warmup_s > 0)
    m5 workbegin 1   -->  switch to the ROI CPU (once, if the warm-up did
                          not), reset stats
    the mix runs on the ROI CPU
    m5 workend 1     -->  dump stats (the ROI dump)
    m5 writefile ... -->  result files land in the output directory
    m5 exit          -->  stop

Only work items with the mix runner's id (``ROI_WORK_ID``, the init's
``roi_workid``) open and close the ROI. A workbegin with the counter
bridge's id (``SAMPLE_WORK_ID``, 3) is a policy daemon asking for a counter
sample: it goes to ``sample`` (numa_lb/counter_bridge.py), is not written to
``roi.json`` one by one, and resumes the simulation. Programs that mark work items of their
own (PARSEC's hooks) reach the same exit events with another id: they are
recorded in ``roi.json`` and otherwise ignored, so they cannot reset or dump the
ROI's statistics mid-run.

The warm-up exists because the atomic_noncaching boot CPU bypasses Ruby: a
ROI that switches CPUs at its own start begins with empty caches, probe
filters and TLBs. The mix runner marks it before forking its programs and
lets the guest run ``warmup_s`` on the ROI CPU; ``roi.json`` records its
ticks (``roi.warmup_ticks``).

Every transition is written to ``roi.json`` in the output directory at once, so
a crashed or killed gem5 leaves the last state it reached. After the ROI the
caches hold dirty lines an atomic_noncaching CPU would bypass, so the boot CPU
comes back only through ``after_roi`` (numa_run.py ``--cpu-post-roi atomic``),
which writes every dirty line back first. The guest's hand-back after the ROI
(about 72 ms of guest time in every run so far, 195-391 host seconds on the
timing CPU) measures nothing.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Generator
from enum import StrEnum
from pathlib import Path
from typing import Any

ROI_RECORD_NAME = "roi.json"
ROI_WORK_ID = 1  # the mix runner's work item (disk-image/init: roi_workid, default 1)
SAMPLE_WORK_ID = 3  # a counter-bridge request (daemons/counters.py, numa_lb/counter_bridge.py)
WARM_WORK_ID = 4  # the mix runner's warm-up mark (workloads/mix_run.py WARM_WORK_ID)


BOOT_RECORD_NAME = "boot_topology.json"  # written into the checkpoint directory


def checkpoint_tick(cpt_dir: Path) -> int:
    """The tick a checkpoint was taken at (curTick of the globals section of m5.cpt:
    ``[root.globals]`` in gem5 v24, Root::serialize; ``[Globals]`` in older ones).

    A restored simulation resumes at that tick, so an absolute simulated-time
    cap is counted from it.
    """
    section = None
    for line in (cpt_dir / "m5.cpt").read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif (
            section is not None
            and section.lower().rsplit(".", 1)[-1] == "globals"
            and line.startswith("curTick=")
        ):
            return int(line.split("=", 1)[1])
    raise ValueError(f"{cpt_dir / 'm5.cpt'}: no curTick in a globals section")


class RoiUnknown(ValueError):
    """roi.json is missing or corrupt, or names no closed ROI."""


def roi_stats_dump_index(outdir: Path) -> int:
    """The ROI's stats dump (0-based position in stats.txt) recorded in ``roi.json``.

    Raises ``RoiUnknown("ROI unknown: ...")``: a reader must then not fall back to
    another dump (gem5's exit dump also covers the boot CPUs and the hand back).
    """
    path = outdir / ROI_RECORD_NAME
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise RoiUnknown(f"ROI unknown: {ROI_RECORD_NAME} is missing") from None
    except (OSError, ValueError) as e:
        raise RoiUnknown(f"ROI unknown: {ROI_RECORD_NAME} is unreadable ({e})") from None
    roi = record.get("roi") if isinstance(record, dict) else None
    if not isinstance(roi, dict):
        raise RoiUnknown(f"ROI unknown: {ROI_RECORD_NAME} records no ROI (no workbegin seen)")
    idx = roi.get("stats_dump_index")
    if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
        raise RoiUnknown(
            f"ROI unknown: {ROI_RECORD_NAME} has no valid stats_dump_index ({idx!r}: "
            "the ROI never closed with a workend)"
        )
    return idx


class RunState(StrEnum):
    BOOTING = "booting"  # simulating, no ROI yet
    WARMUP = "warmup"  # on the ROI CPU, before the ROI (statistics not yet reset)
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
        work_id: Callable[[], int] | None = None,
        roi_work_id: int = ROI_WORK_ID,
        tick_limit: int | None = None,
        set_max_ticks: Callable[[int], None] | None = None,
        sample: Callable[[], None] | None = None,
        switch: Callable[[int], bool] | None = None,
        before_reset: Callable[[], None] | None = None,
        after_roi: Callable[[], None] | None = None,
        phase: Callable[[str], None] | None = None,
    ) -> None:
        self._path = outdir / ROI_RECORD_NAME
        self._tick = tick
        self._reset_stats = reset_stats
        self._dump_stats = dump_stats
        self._switch_cpus = switch_cpus
        self._save_checkpoint = save_checkpoint
        self._take_checkpoint = take_checkpoint
        # the work id of the exit event being handled (gem5: the exit code)
        self._work_id = work_id
        self._roi_work_id = roi_work_id
        # gem5's Simulator re-arms its max_ticks relative to the current tick
        # after every exit event (m5.simulate(n) runs n more ticks), so an
        # absolute cap is re-armed here with what is left of it.
        self._tick_limit = tick_limit
        self._set_max_ticks = set_max_ticks
        # the counter bridge: answers work id SAMPLE_WORK_ID; told before a reset
        self._sample = sample
        # the guest's context-switch marks (task_ledger.py): work ids >= 2^30
        self._switch = switch
        self.switch_marks = 0
        self._before_reset = before_reset
        # called once after the ROI's statistics are dumped (the post-ROI CPU)
        self._after_roi = after_roi
        # the phase clock (numa_lb/phases.py): told where warmup, roi and
        # handback start; timing only, it changes no step of the protocol
        self._phase = phase
        self.samples = 0
        self._switched = False
        self._warm_tick: int | None = None
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

    def _mark_phase(self, name: str) -> None:
        """Open phase ``name`` (phases.json); a failure is recorded, never raised."""
        if self._phase is None:
            return
        try:
            self._phase(name)
        except Exception as e:  # noqa: BLE001 - timing must not stop the run
            self._event("phase_error", phase=name, error=f"{type(e).__name__}: {e}")

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

    def _foreign_work_item(self, name: str) -> bool:
        """Record a work item that is not the ROI's; True if it was one."""
        wid = self._work_id() if self._work_id is not None else self._roi_work_id
        if wid == self._roi_work_id:
            return False
        if name == "workbegin" and self._switch is not None and self._switch(wid):
            self.switch_marks += 1  # one per context switch: not an event record each
            return True
        if wid == SAMPLE_WORK_ID and self._sample is not None and name == "workbegin":
            self._sample()
            self.samples += 1
            return True
        if wid == WARM_WORK_ID and name == "workbegin" and self.record["roi"] is None:
            self._switch_once()
            self._mark_phase("warmup")
            self._warm_tick = self._event("warmup", work_id=wid, switched_cpus=self._switched)
            self._set(RunState.WARMUP)
            return True
        self._event(name, work_id=wid, action="ignored (not the ROI's work id)")
        self._write()
        return True

    def _switch_once(self) -> None:
        if self._switch_cpus is not None and not self._switched:
            self._switch_cpus()
            self._switched = True

    def on_workbegin(self) -> Generator[bool, None, None]:
        while True:
            if self._foreign_work_item("workbegin"):
                yield False
                continue
            if self._before_reset is not None:
                # the counter bridge (policy daemons' samples) must not cost the
                # ROI: a bridge that cannot read this CPU model is recorded
                try:
                    self._before_reset()
                except Exception as e:  # noqa: BLE001
                    self._event("bridge_error", error=f"{type(e).__name__}: {e}")
            self._switch_once()
            self._reset_stats()
            self._mark_phase("roi")  # where the ROI dump's hostSeconds starts
            tick = self._event("workbegin", switched_cpus=self._switched)
            self.record["roi"] = {"begin_tick": tick, "end_tick": None}
            if self._warm_tick is not None:
                self.record["roi"]["warmup_ticks"] = tick - self._warm_tick
            self._set(RunState.ROI)
            yield False

    def on_workend(self) -> Generator[bool, None, None]:
        while True:
            if self._foreign_work_item("workend"):
                yield False
                continue
            tick = self._event("workend")
            self._mark_phase("handback")  # the dump and the post-ROI CPU count here
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
            if self._after_roi is not None and roi["begin_tick"] is not None:
                self._after_roi()
                self._event("post_roi_cpu")
                self._write()
                self._after_roi = None  # once
            yield False

    def _stop(self, name: str, state: RunState) -> Generator[bool, None, None]:
        while True:
            self._event(name)
            self._set(state)
            yield True

    def _guarded(self, handler: Generator[bool, None, None]) -> Generator[bool, None, None]:
        """``handler``, but an exception in it stops the run as failed, recorded.

        gem5 24's Simulator takes a KeyError out of a handler for "no handler
        for this event" and silently runs its default instead (for workbegin:
        reset the statistics, no ROI recorded); any other exception would kill
        gem5 without a record. Found 2026-11-25: O3 runs lost their ROI start
        to the counter bridge's KeyError."""
        while True:
            try:
                stop = next(handler)
            except Exception as e:  # noqa: BLE001 - every failure must reach roi.json
                self._event(
                    "handler_error",
                    error=f"{type(e).__name__}: {e}",
                    traceback=traceback.format_exc(limit=6),
                )
                self._set(RunState.FAILED)
                while True:
                    yield True  # stop now, and at any later event
            yield stop

    def _capped(self, handler: Generator[bool, None, None]) -> Generator[bool, None, None]:
        """``handler`` (guarded), then: stop at the absolute tick limit, or re-arm what is left."""
        for stop in self._guarded(handler):
            if not stop and self._tick_limit is not None:
                left = self._tick_limit - self._tick()
                if left <= 0:
                    self._event("max_tick", action=f"absolute limit {self._tick_limit} reached")
                    self._set(RunState.MAX_TICK)
                    stop = True
                elif self._set_max_ticks is not None:
                    self._set_max_ticks(left)
            yield stop

    def handlers(self, events: Any) -> dict[Any, Generator[bool, None, None]]:
        """The table, keyed by gem5's ``ExitEvent`` members (passed in as ``events``)."""
        return {
            events.CHECKPOINT: self._capped(self.on_checkpoint()),
            events.WORKBEGIN: self._capped(self.on_workbegin()),
            events.WORKEND: self._capped(self.on_workend()),
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
