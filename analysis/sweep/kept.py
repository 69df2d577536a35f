"""Runs kept in git as frames, adopted by a sweep on another machine (--kept).

A run id hashes the point and the provenance, and the provenance holds the
gem5 binary's SHA-256. gem5 rebuilt from the same source on a new machine has
another hash (it embeds __DATE__/__TIME__), so every run id changes although
nothing that decides a result did, and the run directories of the old machine
are gone with it. What survives is a finding's frames in git
(``findings/NAME/frames/runs.parquet``, analysis/results/keep.py).
``run_all.py run --kept DIR`` skips a planned run, verdict "kept", when DIR
holds a run with

* the same point (``point_id``: the point alone, hashed as in the run id),
* state done,
* the same provenance except the gem5 binary hash: the build id of the kernel
  the point boots, image id, code revision, tool version, backend.

With ``--kept-whole-repeats`` kept runs are adopted by whole **repeat
group** (the repeats that restore one cycle of the machine's boot
checkpoints, ``repeat // machine.boot_checkpoints``; one repeat where there
is one checkpoint), for a pre-registered design whose pairs never span two
gem5 builds (findings/2026-11-28-verdict/PREREGISTRATION.md, section 6): a
group is adopted from one gem5 binary that holds every planned run of the
group in a final state (done, failed or timeout: a failure is adopted as a
failure, never run again on another build), and only when no run of the
group has finished here; otherwise the whole group runs here, and the plan
names it.

A kept run of the same point with another provenance is not adopted; the plan
notes count those per differing field, and the runs without a point id (rows
of frames kept before runs recorded it). The whole directory is checked up
front (analysis/results/frames.py read_frames, imported lazily with pandas):
the sweep's final report reads all three frames files, and a bad one must stop
the sweep before anything is built or run, not after. sweep.json records the
directories resolved (keep.py reads the adopted runs back from them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .point import PointIds, Provenance, SweepPoint, canonical_json
from .rundir import RERUN_ON_REQUEST, State

if TYPE_CHECKING:
    import pandas as pd

# compared between a kept run and a planned one; gem5_sha256 deliberately not
PROV_FIELDS = ("kernel_build_id", "image_id", "code_revision", "tool_version", "backend")


# what a whole repeat group may adopt: done, and the states --rerun-failed reruns
FINAL_STATES = (State.DONE.value, *sorted(s.value for s in RERUN_ON_REQUEST))


def repeat_group(point: SweepPoint) -> int:
    """The repeat group of a point: the repeats that restore one cycle of its
    machine's boot checkpoints (repeat r restores r % boot_checkpoints)."""
    return point.repeat // max(1, int(point.machine.get("boot_checkpoints", 1)))


class KeptError(ValueError):
    """A --kept directory that cannot serve: it names the path and why."""


@dataclass(frozen=True)
class KeptRun:
    run_id: str
    state: str
    prov: tuple[Any, ...]  # the PROV_FIELDS values
    gem5_sha256: str | None
    frames: Path  # the frames directory it came from


def prov_key(prov: Provenance) -> tuple[Any, ...]:
    """A planned run's PROV_FIELDS values, written as the runs frame writes them."""
    return (prov.kernel_build_id, prov.image_id, canonical_json(prov.code_revision),
            prov.tool_version, prov.backend)  # fmt: skip


def read_runs_frame(d: Path) -> pd.DataFrame:
    """The runs frame of DIR once the whole frames directory (metrics, runs,
    errors) reads back as the report will read it; KeptError naming the path."""
    # here: the driver (and every worker's runner) starts without pandas
    from ..results.frames import FramesError, read_frames

    d = Path(d)
    hint = "give a frames directory, e.g. findings/NAME/frames"
    if not d.is_dir():
        raise KeptError(f"{d}: no such directory ({hint})")
    if not (d / "runs.parquet").is_file():
        raise KeptError(f"{d}: no runs.parquet ({hint})")
    try:
        runs = read_frames(d).runs
    except FramesError as e:
        raise KeptError(str(e)) from e
    if runs["point_id"].isna().all():  # read_frames adds the column, empty, to old frames
        raise KeptError(
            f"{d / 'runs.parquet'}: no run has a point id (frames kept before runs recorded "
            "their point id); keep them again from their run directories, or run those "
            "points here"
        )
    return runs


def _cell(v: Any) -> Any:
    """A frame cell as a plain value (None, NaN, pandas' NA -> None)."""
    try:
        return None if v is None or bool(v != v) else v
    except TypeError:  # pandas' NA: its comparisons have no truth value
        return None


def load_kept(dirs: list[Path]) -> KeptRuns:
    """The runs of the frames directories, by point id (read once: a 10^6-run
    sweep then looks each of its runs up in a dict). Later directories first
    among equals: adopt() takes the last matching run."""
    by_point: dict[str, list[KeptRun]] = defaultdict(list)
    no_point: dict[Path, int] = {}
    resolved = []
    for d in dirs:
        runs = read_runs_frame(d)
        where = Path(d).resolve()  # as sweep.json records it: valid from any cwd
        resolved.append(where)
        cols = ["point_id", "run_id", "state", *PROV_FIELDS, "gem5_sha256"]
        for c in cols:
            if c not in runs.columns:
                runs[c] = None  # not recorded: never equal to a planned value
        for row in runs[cols].itertuples(index=False, name=None):
            pid, rid, state, *prov, sha = map(_cell, row)
            if pid is None:  # a row from older frames merged in: cannot be matched
                no_point[where] = no_point.get(where, 0) + 1
                continue
            if rid is None:
                continue
            by_point[str(pid)].append(KeptRun(str(rid), str(state), tuple(prov), sha, where))
    return KeptRuns(dict(by_point), resolved, no_point)


class KeptRuns:
    """The kept runs of a sweep's --kept directories, and what adopt() decided."""

    def __init__(
        self,
        by_point: dict[str, list[KeptRun]],
        dirs: list[Path],
        no_point: dict[Path, int] | None = None,
    ) -> None:
        self.by_point = by_point
        self.dirs = dirs
        self.no_point = no_point or {}  # frames dir -> its runs without a point id
        self.adopted: dict[str, KeptRun] = {}  # planned run id -> the kept run
        self._ids = PointIds()
        self._differs: Counter[str] = Counter()  # provenance field -> runs not adopted
        self._example: dict[str, tuple[Any, Any]] = {}  # field -> (kept, here)
        self._not_done: Counter[str] = Counter()  # state of the kept run -> runs
        self._rebuilt: Counter[tuple[Any, Any]] = Counter()  # (kept, here) gem5 hash -> runs
        # whole repeat groups only (whole_repeats): group -> the gem5 hash adopted, or None
        self._chosen: dict[int, str | None] | None = None
        self._partial: Counter[int] = Counter()  # group -> kept runs not adopted
        self._adopted_failed = 0
        self._states: tuple[str, ...] = FINAL_STATES  # what whole_repeats may adopt

    def _candidates(self, point: SweepPoint, prov: Provenance, states: tuple[str, ...]
                    ) -> list[KeptRun]:  # fmt: skip
        """The kept runs that may stand for this point: @states, same provenance."""
        found = self.by_point.get(self._ids(point)) if self.by_point else None
        want = prov_key(prov)
        return [k for k in found or [] if k.state in states and k.prov == want]

    def whole_repeats(
        self, planned: Iterable[tuple[SweepPoint, Provenance, bool]], rerun_failed: bool = False
    ) -> None:
        """From now on adopt by whole repeat group only (module doc). @planned:
        every planned run's (point, provenance, started here). @rerun_failed: a
        kept failure does not count (its group runs here whole, the failure
        included: a host-side failure gets its one re-run on this build)."""
        self._states = ("done",) if rerun_failed else FINAL_STATES
        total: Counter[int] = Counter()
        here: set[int] = set()
        shas: dict[int, set[str]] = {}
        for point, prov, done_here in planned:
            g = repeat_group(point)
            total[g] += 1
            if done_here:
                here.add(g)
            mine = {b for k in self._candidates(point, prov, self._states) if (b := _build(k))}
            shas[g] = mine if g not in shas else shas[g] & mine
        self._chosen = {g: None if g in here or not shas.get(g) else min(shas[g]) for g in total}

    def adopt(self, point: SweepPoint, planned_id: str, prov: Provenance) -> bool:
        """True when a kept run stands for this planned run (recorded in adopted)."""
        found = self.by_point.get(self._ids(point)) if self.by_point else None
        if not found:
            return False
        if self._chosen is not None:
            return self._adopt_whole(point, planned_id, prov)
        done = [k for k in found if k.state == "done"]
        if not done:
            self._not_done[found[-1].state] += 1
            return False
        match = self._candidates(point, prov, ("done",))
        if not match:
            self._count_differences(done[-1].prov, prov_key(prov))
            return False
        self._record(planned_id, match[-1], prov)  # the later --kept directory first
        return True

    def _adopt_whole(self, point: SweepPoint, planned_id: str, prov: Provenance) -> bool:
        assert self._chosen is not None
        g = repeat_group(point)
        sha = self._chosen.get(g)
        match = [k for k in self._candidates(point, prov, self._states) if _build(k) == sha]
        if sha is None or not match:
            self._partial[g] += 1
            return False
        if match[-1].state != "done":
            self._adopted_failed += 1
        self._record(planned_id, match[-1], prov)
        return True

    def _record(self, planned_id: str, k: KeptRun, prov: Provenance) -> None:
        self.adopted[planned_id] = k
        if k.gem5_sha256 != prov.gem5_sha256:
            self._rebuilt[(k.gem5_sha256, prov.gem5_sha256)] += 1

    def _count_differences(self, kept: tuple[Any, ...], here: tuple[Any, ...]) -> None:
        for name, a, b in zip(PROV_FIELDS, kept, here, strict=True):
            if a != b:
                self._differs[name] += 1
                self._example.setdefault(name, (a, b))

    def notes(self) -> list[str]:
        """One line per reason (never one per run): kept runs without a point id,
        refusals by field, kept runs not done, adopted runs from another gem5 binary."""
        out = [f"kept: {n} run(s) in {d} have no point id and cannot be adopted"
               for d, n in self.no_point.items()]  # fmt: skip
        for name, n in sorted(self._differs.items()):
            a, b = self._example[name]
            out.append(f"kept: {n} run(s) of a planned point not adopted: {name} differs "
                       f"(kept {_short(a)}, here {_short(b)})")  # fmt: skip
        if self._not_done:
            states = ", ".join(f"{v} {k}" for k, v in sorted(self._not_done.items()))
            out.append(f"kept: {sum(self._not_done.values())} planned run(s) match only kept "
                       f"runs that are not done ({states}); they run here")  # fmt: skip
        if self._partial:
            groups = ", ".join(str(g) for g in sorted(self._partial))
            out.append(f"kept: {sum(self._partial.values())} planned run(s) of "
                       f"{len(self._partial)} repeat group(s) ({groups}; group = repeat // "
                       "boot checkpoints) not adopted (--kept-whole-repeats: a group is "
                       "adopted whole from one gem5 binary or runs here whole)")  # fmt: skip
        if self._adopted_failed:
            out.append(f"kept: {self._adopted_failed} kept run(s) adopted as failed "
                       "(--kept-whole-repeats: a failure on another build is not run again "
                       "here)")  # fmt: skip
        for (a, b), n in sorted(self._rebuilt.items(), key=str):
            out.append(f"kept: {n} run(s) adopted from another gem5 binary (kept {_short(a)}, "
                       f"here {_short(b)}; the frames record each run's)")  # fmt: skip
        return out

    def report_inputs(self) -> list[tuple[Path, set[str]]]:
        """(frames dir, run ids adopted from it): what the sweep's report adds."""
        ids: dict[Path, set[str]] = {d: set() for d in self.dirs}
        for k in self.adopted.values():
            ids[k.frames].add(k.run_id)
        return [(d, s) for d, s in ids.items() if s]


def _build(k: KeptRun) -> str | None:
    """The build a kept run's block is known by: its gem5 binary's hash; a
    gem5 run without one cannot be placed in a block (None), a qemu run has
    no gem5 binary (one block: qemu's timing is functional anyway)."""
    if k.gem5_sha256:
        return str(k.gem5_sha256)
    return None if k.prov[PROV_FIELDS.index("backend")] == "gem5" else "no gem5 binary"


def _short(v: Any) -> str:
    s = "not recorded" if v is None else str(v)
    return s[:16] + "..." if len(s) > 19 else s
