"""Per-task counts from the guest's context-switch marks (issue 39 item 1).

With ``kernel.numa_lb_m5_switch = 1`` (kernel patch 0024, on a kernel booted
with ``numa_lb_m5=1``) the guest executes ``m5 workbegin`` at every context
switch with a work id that carries the CPU and the next task's pid
(``switch_id``: bit 30 set, CPU in bits 22-29, pid in bits 0-21; gem5 hands
the work id to the exit event as an int). At each mark the run script calls
``TaskLedger.on_switch``, which reads that CPU's cumulative counters and
charges what the CPU counted since its previous mark to the task that was
running: the counts of a task are those of the time it ran, on every CPU it
ran on. The idle task is pid 0. What a CPU counted before its first mark
has no known task and is kept apart (``unattributed``).

Given ``socket_of`` (the socket of each CPU), the ledger also keeps each
task's LLC misses per socket it ran on (``task_llc_by_socket`` in the
snapshot): the guest splits a socket's requests by home node over the tasks
that missed there (daemons/counters.py ``task_requests``).

Imports nothing from gem5: ``read_core(cpu)`` gives the CPU's cumulative
(insts, llc_misses, busy_cycles), the counter bridge's ``core_totals``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SWITCH_FLAG = 1 << 30
PID_BITS = 22
CPU_BITS = 8
COUNTERS = ("insts", "llc_misses", "busy_cycles")


def switch_id(cpu: int, pid: int) -> int:
    """The work id of a switch mark (kernel/sched/numa_lb_m5.h)."""
    if not (0 <= cpu < 1 << CPU_BITS and 0 <= pid < 1 << PID_BITS):
        raise ValueError(f"cpu {cpu} or pid {pid} does not fit a switch mark")
    return SWITCH_FLAG | cpu << PID_BITS | pid


def decode_switch(work_id: int) -> tuple[int, int] | None:
    """(cpu, next pid) of a switch mark; None for any other work id."""
    if work_id < SWITCH_FLAG or work_id >= SWITCH_FLAG << 1:
        return None
    return (work_id >> PID_BITS) & ((1 << CPU_BITS) - 1), work_id & ((1 << PID_BITS) - 1)


class TaskLedger:
    """Counts per task (pid), charged at the CPUs' switch marks."""

    def __init__(
        self,
        read_core: Callable[[int], tuple[float, ...]],
        ncpus: int,
        socket_of: list[int] | None = None,
    ) -> None:
        self.read_core, self.ncpus = read_core, ncpus
        if socket_of is not None and len(socket_of) != ncpus:
            raise ValueError(f"socket_of names {len(socket_of)} cpus, the machine has {ncpus}")
        self.socket_of = list(socket_of) if socket_of is not None else None
        self.nsockets = max(self.socket_of) + 1 if self.socket_of else 0
        # per task: LLC misses on each socket (with socket_of)
        self.llc_by_socket: dict[int, list[float]] = {}
        self.running: list[int | None] = [None] * ncpus  # since the CPU's last mark
        self.at_mark: list[tuple[float, ...] | None] = [None] * ncpus
        self.tasks: dict[int, list[float]] = {}
        self.unattributed = [0.0] * len(COUNTERS)
        # the same charges per CPU (what each CPU's counts went to: ``per_cpu``)
        self.cpu_tasks: list[dict[int, list[float]]] = [{} for _ in range(ncpus)]
        self.cpu_unattributed = [[0.0] * len(COUNTERS) for _ in range(ncpus)]
        self.marks = 0
        self.refused = 0  # marks naming a CPU this machine does not have
        self.host_s = 0.0

    def on_switch(self, work_id: int) -> bool:
        """Charge the marking CPU's counts since its last mark; False if
        ``work_id`` is not a switch mark of this machine."""
        got = decode_switch(work_id)
        if got is None or got[0] >= self.ncpus:
            self.refused += got is not None
            return False
        t0 = time.perf_counter()
        cpu, pid = got
        now = tuple(self.read_core(cpu))
        before, who = self.at_mark[cpu], self.running[cpu]
        delta = [a - b for a, b in zip(now, before, strict=True)] if before else list(now)
        into = self.unattributed if who is None else self.tasks.setdefault(who, [0.0] * 3)
        on = (self.cpu_unattributed[cpu] if who is None
              else self.cpu_tasks[cpu].setdefault(who, [0.0] * 3))  # fmt: skip
        for i, d in enumerate(delta):
            into[i] += d
            on[i] += d
        if who is not None and self.socket_of is not None:
            by = self.llc_by_socket.setdefault(who, [0.0] * self.nsockets)
            by[self.socket_of[cpu]] += delta[1]
        self.running[cpu], self.at_mark[cpu] = pid, now
        self.marks += 1
        self.host_s += time.perf_counter() - t0
        return True

    def snapshot(self) -> dict[str, Any]:
        """Per-task totals now, each running task charged up to this tick."""
        tasks = {pid: list(v) for pid, v in self.tasks.items()}
        by_socket = {pid: list(v) for pid, v in self.llc_by_socket.items()}
        for cpu in range(self.ncpus):
            who, before = self.running[cpu], self.at_mark[cpu]
            if who is None or before is None:
                continue
            now = self.read_core(cpu)
            acc = tasks.setdefault(who, [0.0] * 3)
            for i, (a, b) in enumerate(zip(now, before, strict=True)):
                acc[i] += a - b
            if self.socket_of is not None:
                by = by_socket.setdefault(who, [0.0] * self.nsockets)
                by[self.socket_of[cpu]] += now[1] - before[1]
        out: dict[str, Any] = {
            "tasks": {str(pid): dict(zip(COUNTERS, (round(x, 3) for x in v), strict=True))
                      for pid, v in sorted(tasks.items())},
            "unattributed": dict(zip(COUNTERS, (round(x, 3) for x in self.unattributed),
                                     strict=True)),
            "switch_marks": self.marks,
        }  # fmt: skip
        if self.socket_of is not None:
            out["task_llc_by_socket"] = {str(pid): [round(x, 3) for x in v]
                                         for pid, v in sorted(by_socket.items())}  # fmt: skip
        return out

    def per_cpu(self) -> dict[str, Any]:
        """Per CPU, now: its cumulative counts (``read_core``), what the ledger
        charged of them to each task (the running one up to now) and what it
        counted before its first mark: on a CPU that has marked, tasks +
        unattributed = its counts (``marked``: false, nothing charged yet).
        For the run's end record (counter_bridge.json ``final``), not the
        replies: it names every (cpu, task) pair."""
        out: dict[str, Any] = {}
        for cpu in range(self.ncpus):
            now = tuple(self.read_core(cpu))
            tasks = {pid: list(v) for pid, v in self.cpu_tasks[cpu].items()}
            who, before = self.running[cpu], self.at_mark[cpu]
            if who is not None and before is not None:
                acc = tasks.setdefault(who, [0.0] * 3)
                for i, (a, b) in enumerate(zip(now, before, strict=True)):
                    acc[i] += a - b
            out[str(cpu)] = {
                "marked": before is not None,
                "totals": dict(zip(COUNTERS, (round(x, 3) for x in now), strict=True)),
                "unattributed": dict(zip(COUNTERS, (round(x, 3) for x in
                                                    self.cpu_unattributed[cpu]), strict=True)),
                "tasks": {str(pid): dict(zip(COUNTERS, (round(x, 3) for x in v), strict=True))
                          for pid, v in sorted(tasks.items())},
            }  # fmt: skip
        return out

    def record(self) -> dict[str, Any]:
        return {"switch_marks": self.marks, "refused": self.refused,
                "host_s": round(self.host_s, 6),
                "host_ms_per_mark": round(self.host_s * 1e3 / self.marks, 4)
                if self.marks else None}  # fmt: skip
