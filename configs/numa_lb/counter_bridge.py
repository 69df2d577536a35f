"""The gem5 side of the daemons' counter bridge (daemons/counters.py).

x86 gem5 gives the guest no PMU. A guest daemon that wants per-core counters
executes ``m5 workbegin 3 <seq>`` (``SAMPLE_WORK_ID``); gem5 stops at the
exit event, the run script's handler (``RoiProtocol``, work id 3) calls
``CounterBridge.sample(seq)``, which reads gem5's live statistics, writes the
reply (JSON, ``daemons/counters.py`` ``SCHEMA``) to the file gem5 serves to
``m5 readfile`` and returns; the simulation resumes and the guest reads the
reply with ``m5 readfile``. gem5 v24.0.0.1 opens the readfile file anew on
every call (src/sim/pseudo_inst.cc ``readfile``: ``::open`` + ``lseek`` +
``read`` + ``close`` per call), so a reply written between two requests is
what the next read returns; the reply is written to a temporary file and
renamed over the served path, so a read never sees half a reply.

Per core, cumulative since the bridge began (the ROI's stats reset does not
reset them: the values before each reset are kept as offsets):

- ``insts``: committed instructions (``commitStats0.numInsts`` of the core's
  CPUs, the switched-out one included);
- ``busy_cycles``: non-idle cycles: the active CPU's ``notIdleFraction``
  (a tick-weighted average since the last reset) times the ticks since that
  reset, over the clock period. gem5's own ``numBusyCycles`` multiplies by
  ``numCycles``, which a halted TimingSimpleCPU updates only at its next
  activity, and a switched-out CPU keeps its last ``notIdleFraction``.
  An O3 CPU has no exec_context statistics: its ``numCycles``, the cycles
  it was not halted, stalls included (o3/cpu.cc adds the cycles it slept
  through a miss at wake-up; a halt goes to ``quiesceCycles`` only), as
  ``analysis/results/gem5stats`` counts it;
- ``llc_misses``: demand misses of the core's L2 (the LLC under MOESI_hammer);
- ``mem_requests[s][d]``: demand requests (GETS/GETX) of socket s's caches
  homed at node d, from the request network's throttle counts
  (``ruby_requests.remote_requests``, the same derivation the reports use);
  gem5 counts them per link, not per core, so the guest splits a socket's
  requests between its cores by their LLC misses, or, with the guest's
  switch marks on, between the tasks that missed there by their misses
  (``task_llc_by_socket`` from the ledger; approximate, daemons/README.md);

- ``load_latency`` (when the run script gives it, ``load_latency``): the
  machine's load-to-use latency from socket s to node d relative to a local
  one, from the run's resolved link latency and its NUMA-factor calibration:
  1 + h * (f - 1) for a home h hops away, f the calibrated one-hop factor
  (the first-order model's linear hop cost). IMAR's latency term weighs each
  thread's requests by home node with it (daemons/README.md).

Reading statistics does not reset or dump them: the ROI's stats dump is the
same with or without samples. The bridge's host time per sample is measured
(``host_ms`` in each reply, and ``counter_bridge.json`` in the output
directory with the tick of each sample, so the analysis can take the
samples inside the ROI out of its host-time figures). Imports nothing from
gem5: the caller passes the live statistics' root and callables.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .ruby_requests import remote_requests
from .task_ledger import TaskLedger

SAMPLE_WORK_ID = 3  # 1: the mix runner's ROI, 2: PARSEC's hooks
RECORD_NAME = "counter_bridge.json"
READFILE_NAME = "readfile.bin"  # the file gem5 serves to m5 readfile (job first, then replies)
REPLY_SCHEMA = 1
COST_KEEP = 100_000  # per-sample records kept in counter_bridge.json
COUNTER_KEYS = ("insts", "llc_misses", "busy_cycles")  # per core, in a reply

_CPU_IDX = re.compile(r"(\d+)\.core\.")
_CACHE_IDX = re.compile(r"(?:core_caches|l1_cntrl|L1Cache_Controller)(\d+)\.")
INSTS = ".core.commitStats0.numInsts"
NOT_IDLE = ".core.exec_context.thread_0.notIdleFraction"
CYCLES = ".core.numCycles"
LLC_MISSES = ".L2cache.m_demand_misses"
_NETWORK = re.compile(r"\.routers\d+\.throttle\d+\.msg_count\.(Request|Writeback)_Control$")
DIR_REQUESTS = ".requestToDir.m_msg_count"


def load_latency(
    hops: list[list[int]], one_hop_factor: float, source: str, link_latency_cycles: int
) -> dict[str, Any]:
    """The reply's ``load_latency``: ``relative[s][d]``, the load-to-use latency
    of a miss of socket s homed at node d over a local one (1 + h * (f - 1),
    h the hops, f the one-hop NUMA factor), and where f came from (the
    calibration table's file, or the uncalibrated first-order model)."""
    if not one_hop_factor >= 1.0:
        raise ValueError(f"a one-hop NUMA factor below 1: {one_hop_factor!r}")
    rel = [[round(1.0 + h * (one_hop_factor - 1.0), 6) for h in row] for row in hops]
    return {"relative": rel, "one_hop_factor": round(one_hop_factor, 6),
            "source": source, "link_latency_cycles": link_latency_cycles}  # fmt: skip


def bridge_latency(topology: Any) -> dict[str, Any]:
    """``load_latency`` of a run's machine (a ``Topology``): its hops and the
    one-hop factor its resolved link latency has in the calibration table (or
    the first-order model, named as such, when the run has no table)."""
    link = topology.link_latency()
    cal = topology.calibration
    source = "first-order model (uncalibrated): no calibration table"
    if cal is not None:
        try:
            cal.factor(link.cycles)
            source = f"calibration {Path(cal.source).name}"
        except ValueError:
            source = "first-order model (uncalibrated): link latency outside the calibration table"
    return load_latency(topology.hops(), link.predicted_numa_factor, source, link.cycles)


def stats_prefix(path: str) -> str:
    """The stats-tree name of a SimObject path. gem5 names element i of a
    SimObject vector of n > 10 ``name%0*d`` in paths (``switch00`` ..
    ``switch15``: m5/params.py SimObjectVector.set_parent) but ``name{i}`` in
    the stats tree (m5/stats/__init__.py _bind_obj). Found 2026-11-25: on 4 x 4
    the bridge looked for ``switch00`` and raised KeyError at the ROI start."""
    return re.sub(r"\d+", lambda m: str(int(m.group())), path)


def core_paths(processor: Any) -> list[str]:
    """The SimObject paths of a stdlib processor's current cores, in cpu order
    (what ``CounterBridge`` takes as ``active_cores``)."""
    return [c.get_simobject().path() for c in processor.get_cores()]


def walk(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(full name, Info) of every statistic below a gem5 stats Group, named as
    in stats.txt (``board.processor.switch0.core.commitStats0.numInsts``)."""
    for info in group.getStats():
        yield prefix + info.name, info
    for name, child in group.getStatGroups().items():
        yield from walk(child, f"{prefix}{name}.")


_DIR_IDX = re.compile(r"(?:directories|dir_cntrl|Directory_Controller)\d+\.requestToDir\.")


def wanted(name: str) -> bool:
    """The statistics a sample reads (per core and per link; stats.txt names)."""
    if name.endswith(LLC_MISSES):
        return _CACHE_IDX.search(name) is not None
    if name.endswith(DIR_REQUESTS):
        return _DIR_IDX.search(name) is not None  # not the DMA controllers'
    return name.endswith((INSTS, NOT_IDLE, CYCLES)) or _NETWORK.search(name) is not None


class CounterBridge:
    """Reads the live statistics and answers the guest's sample requests.

    ``root``: gives the stats Group at the top (gem5's Root SimObject, which
    exists once the simulation is instantiated); ``tick``:
    m5.curTick; ``active_cores``: the SimObject paths of the CPUs running
    now, in cpu order (``board.processor.switch00.core``; ``stats_prefix``
    gives their stats names); ``reset_tick``: the
    tick gem5 last reset the statistics at (the first simulate() resets them
    at the start tick); ``config``: gem5's config.json (the links and their
    throttles); ``sockets``: the cpus of each socket; ``latency``: the
    machine's relative load latencies (``load_latency``), handed to the guest
    in every reply.
    """

    def __init__(
        self,
        outdir: Path,
        readfile: Path,
        root: Callable[[], Any],
        tick: Callable[[], int],
        active_cores: Callable[[], list[str]],
        sockets: list[list[int]],
        cpu_clock_hz: float,
        reset_tick: int,
        config: Path,
        in_roi: Callable[[], bool] | None = None,
        latency: dict[str, Any] | None = None,
    ) -> None:
        self.outdir, self.readfile, self.root = outdir, readfile, root
        self.tick, self.active_cores = tick, active_cores
        self.sockets = [list(s) for s in sockets]
        self.ncpus = sum(len(s) for s in self.sockets)
        self.cpu_hz = float(cpu_clock_hz)
        self.period_ticks = 1e12 / self.cpu_hz  # gem5 ticks are ps
        self.reset_tick = reset_tick
        self.config_path = config
        self.in_roi = in_roi
        self._index: dict[str, Any] | None = None
        self._cfg: dict[str, Any] | None = None
        self.offsets: dict[str, Any] | None = None
        self.resets = 0
        self.samples: list[dict[str, Any]] = []
        self.dropped = 0  # samples beyond COST_KEEP: counted, not itemised
        self.errors = 0
        self.lost: str | None = None  # why the counts before a reset could not be kept
        self._per_core: list[tuple[list[Any], list[Any]]] | None = None
        # per-task counts from the guest's switch marks (task_ledger.py)
        socket_of = [0] * self.ncpus
        for s, members in enumerate(self.sockets):
            for c in members:
                socket_of[c] = s
        self.ledger = TaskLedger(self.core_totals, self.ncpus, socket_of)
        self.latency = latency
        self.final: dict[str, Any] | None = None  # close(): the counts at the run's end

    # --------------------------------------------------------------- reading
    def index(self) -> dict[str, Any]:
        if self._index is None:
            self._index = {n: i for n, i in walk(self.root()) if wanted(n)}
        return self._index

    def config(self) -> dict[str, Any] | None:
        if self._cfg is None and self.config_path.is_file():
            self._cfg = json.loads(self.config_path.read_text())
        return self._cfg

    def _values(self) -> dict[str, float]:
        """The network and directory counters, named as remote_requests wants."""
        out: dict[str, float] = {}
        for name, info in self.index().items():
            if _NETWORK.search(name):
                for i, v in enumerate(info.value):
                    out[f"{name}::{i}"] = float(v)
            elif name.endswith(DIR_REQUESTS):
                out[name] = float(info.value)
        return out

    def current(self) -> dict[str, Any]:
        """Counters since the last statistics reset (not yet with offsets)."""
        idx = self.index()
        now = self.tick()
        insts = [0.0] * self.ncpus
        llc = [0.0] * self.ncpus
        busy = [0.0] * self.ncpus
        active = self.active_cores()
        for name, info in idx.items():
            if name.endswith(INSTS):
                m = _CPU_IDX.search(name)
                if m and int(m.group(1)) < self.ncpus:
                    insts[int(m.group(1))] += float(info.value)
            elif name.endswith(LLC_MISSES):
                m = _CACHE_IDX.search(name)
                if m and int(m.group(1)) < self.ncpus:
                    llc[int(m.group(1))] += float(info.value)
        for cpu, prefix in enumerate(active[: self.ncpus]):
            busy[cpu] = self._busy(idx, stats_prefix(prefix), now)
        return {"tick": now, "insts": insts, "llc_misses": llc, "busy_cycles": busy,
                "mem": self._mem_matrix()}  # fmt: skip

    def _core_infos(self) -> list[tuple[list[Any], list[Any]]]:
        """Per cpu: its instruction counters (every CPU object of the core)
        and its LLC's miss counters, resolved once."""
        if self._per_core is None:
            per: list[tuple[list[Any], list[Any]]] = [([], []) for _ in range(self.ncpus)]
            for name, info in self.index().items():
                pat, k = (_CPU_IDX, 0) if name.endswith(INSTS) else (_CACHE_IDX, 1)
                if not name.endswith((INSTS, LLC_MISSES)):
                    continue
                m = pat.search(name)
                if m and int(m.group(1)) < self.ncpus:
                    per[int(m.group(1))][k].append(info)
            self._per_core = per
        return self._per_core

    def core_totals(self, cpu: int) -> tuple[float, float, float]:
        """One CPU's (insts, llc_misses, busy_cycles) since the bridge began
        (offsets of earlier stats resets added): what a switch mark reads."""
        insts, llc = self._core_infos()[cpu]
        now = self.tick()
        busy = self._busy(self.index(), stats_prefix(self.active_cores()[cpu]), now)
        vals = [sum(float(i.value) for i in insts), sum(float(i.value) for i in llc), busy]
        if self.offsets is not None:
            vals = [v + self.offsets[k][cpu] for v, k in zip(vals, COUNTER_KEYS, strict=True)]
        return vals[0], vals[1], vals[2]

    def _busy(self, idx: dict[str, Any], core: str, now: int) -> float:
        """Busy cycles since the last reset of the active CPU ``core`` (a stats
        prefix ending in ``.core``)."""
        info = idx.get(core + NOT_IDLE[len(".core") :])
        if info is not None:  # a simple CPU
            info.prepare()  # AvgStor::result needs last == curTick
            return float(info.result) * (now - self.reset_tick + 1) / self.period_ticks
        cycles = idx.get(core + CYCLES[len(".core") :])
        if cycles is None:  # not KeyError: gem5 24 reads that as "no handler" (roi._guarded)
            raise LookupError(f"no notIdleFraction and no numCycles under {core}")
        return float(cycles.value)  # O3: not halted, stalls included

    def _mem_matrix(self) -> dict[str, Any]:
        cfg = self.config()
        if cfg is None:
            return {"matrix": None, "reason": "no config.json yet"}
        rr = remote_requests(self._values(), cfg)
        if rr is None or not rr.get("available"):
            return {"matrix": None, "reason": (rr or {}).get("reason", "no network stats")}
        req = rr["requests"]
        n = len(self.sockets)
        mat = [[0.0] * n for _ in range(n)]
        for s in range(n):
            for d in range(n):
                if s == d:
                    mat[s][d] = float(req["local_by_socket"].get(d, 0.0))
                else:
                    mat[s][d] = float(req["remote_by_link"].get(f"{s}->{d}", 0.0))
        return {"matrix": mat, "consistent": bool(rr.get("consistent"))}

    # ------------------------------------------------------- stats resets
    def before_reset(self) -> None:
        """Called right before gem5's statistics are reset (and the CPUs
        switched): what was counted so far becomes the offset. If it cannot
        be read, the reset still happens: every later reply is an error
        rather than a count that silently misses what came before."""
        try:
            cur = self.current()
        except Exception as e:
            self.lost = f"{type(e).__name__}: {e}"
            self.reset_tick = self.tick()
            self.resets += 1
            raise
        if self.offsets is None:
            self.offsets = cur
        else:
            for k in COUNTER_KEYS:
                self.offsets[k] = [a + b for a, b in zip(self.offsets[k], cur[k], strict=True)]
            a, b = self.offsets["mem"].get("matrix"), cur["mem"].get("matrix")
            if a is not None and b is not None:
                self.offsets["mem"]["matrix"] = [
                    [x + y for x, y in zip(ra, rb, strict=True)]
                    for ra, rb in zip(a, b, strict=True)
                ]
        self.reset_tick = self.tick()
        self.resets += 1

    # --------------------------------------------------------------- replies
    def reply(self, seq: int) -> dict[str, Any]:
        if self.lost is not None:
            raise RuntimeError(f"counts before stats reset {self.resets} lost: {self.lost}")
        cur = self.current()
        off = self.offsets
        out: dict[str, Any] = {
            "schema": REPLY_SCHEMA, "source": "gem5", "seq": seq, "tick": cur["tick"],
            "cpus": list(range(self.ncpus)), "cpu_hz": self.cpu_hz,
            "sockets": self.sockets, "node_of_socket": list(range(len(self.sockets))),
            "stats_resets": self.resets,
        }  # fmt: skip
        for k in ("insts", "llc_misses", "busy_cycles"):
            vals = cur[k] if off is None else [a + b for a, b in zip(cur[k], off[k], strict=True)]
            out[k] = [round(v, 3) for v in vals]
        mat = cur["mem"].get("matrix")
        if mat is not None and off is not None and off["mem"].get("matrix") is not None:
            mat = [[x + y for x, y in zip(ra, rb, strict=True)]
                   for ra, rb in zip(mat, off["mem"]["matrix"], strict=True)]  # fmt: skip
        out["mem_requests"] = mat
        if mat is None:
            out["mem_reason"] = cur["mem"].get("reason")
        else:
            out["mem_consistent"] = cur["mem"].get("consistent")
        if self.latency is not None:
            out["load_latency"] = self.latency
        if self.ledger.marks:  # the guest marks its switches: counts per task too
            out.update(self.ledger.snapshot())
        return out

    def sample(self) -> None:
        """Answer one request: the reply lands in the served readfile. Replies
        are numbered 1, 2, ... over the run (the exit event carries only the
        work id, so the guest checks that each reply is newer than the last)."""
        t0 = time.perf_counter()
        seq = len(self.samples) + self.dropped + 1
        try:
            rep = self.reply(seq)
        except Exception as e:  # noqa: BLE001 - the guest must get an answer, not a stale file
            rep = {"schema": REPLY_SCHEMA, "source": "gem5", "seq": seq,
                   "error": f"{type(e).__name__}: {e}"}  # fmt: skip
            self.errors += 1
        host_ms = (time.perf_counter() - t0) * 1e3
        rep["host_ms"] = round(host_ms, 3)
        tmp = self.readfile.with_name(self.readfile.name + ".tmp")
        tmp.write_text(json.dumps(rep, separators=(",", ":")) + "\n")
        os.replace(tmp, self.readfile)
        if len(self.samples) >= COST_KEEP:
            self.dropped += 1
        else:
            self.samples.append({
                "seq": seq, "tick": rep.get("tick", self.tick()), "host_ms": rep["host_ms"],
                "in_roi": None if self.in_roi is None else bool(self.in_roi()),
                "error": rep.get("error"),
            })  # fmt: skip

    def close(self) -> None:
        """The counts at the run's end, for the record (``final``): a reply's
        view (per-CPU totals, per-task counts, the socket matrix, the load
        latency) and the ledger's charges per CPU (``per_cpu``); the
        known-answer tests of the attribution read them
        (tests/gem5/test_attribution_gem5.py). A failure is recorded, never
        raised: the run's record must still be written."""
        try:
            rep = self.reply(0)
            rep.pop("seq", None)
            if self.ledger.marks:
                rep["per_cpu"] = self.ledger.per_cpu()
            self.final = rep
        except Exception as e:  # noqa: BLE001 - the record must be written
            self.final = {"error": f"{type(e).__name__}: {e}"}

    def record(self) -> dict[str, Any]:
        ms = [s["host_ms"] for s in self.samples]
        roi = [s["host_ms"] for s in self.samples if s["in_roi"]]
        return {
            "work_id": SAMPLE_WORK_ID, "samples": len(self.samples) + self.dropped,
            "errors": self.errors,
            "host_ms_total": round(sum(ms), 3),
            "host_ms_mean": round(sum(ms) / len(ms), 3) if ms else None,
            "host_ms_max": round(max(ms), 3) if ms else None,
            "samples_in_roi": len(roi), "host_s_in_roi": round(sum(roi) / 1e3, 6),
            "stats_resets": self.resets, "switches": self.ledger.record(),
            "per_sample": self.samples,
            **({} if self.final is None else {"final": self.final}),
        }  # fmt: skip

    def write_record(self) -> None:
        path = self.outdir / RECORD_NAME
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record(), indent=1) + "\n")
        tmp.replace(path)
