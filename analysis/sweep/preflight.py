"""Refusals checked before any run is created, built or submitted.

* ``qemu_timing_refusal``: the ``paper`` and ``sensitivity`` presets measure
  timing (elapsed time, IPC, improvements); on the qemu backend that timing is
  not architectural, so they are refused there unless the user passes
  ``--allow-qemu-timing``. The check looks at the preset a spec came from
  (``--preset paper``) and at the sweep name (a copy of the preset file keeps
  its name unless renamed).
* ``daemon_qemu_refusal``: the user-level policies (imar, imar2, devil, plb)
  decide from hardware counters; the qemu backend has none (no PMU under TCG,
  the counter bridge is gem5's), so a sweep naming them on qemu is refused
  (the guest daemon would refuse each run the same way).
* ``switch_marks_qemu_refusal``: ``job.switch_marks`` (kernel patch 0024's
  context-switch m5 ops for gem5's per-task counts) means nothing on qemu.
* ``calibration_refusal``: on gem5 a requested NUMA factor is resolved only
  with a calibration table measured on the same machine (configs/numa_run.py
  refuses a machine without one); the sweep says so before it builds, boots
  or submits anything, naming the machine, instead of every run (or the
  Slurm stage step's first boot) failing with it.
* ``image_problems``: every program of every mix of the spec against the
  image's ``image.json`` (written by ``disk-image/build_image.py``): synthetic
  workloads are binaries in ``/opt/numa-lb/bin``; PARSEC programs through our
  launcher (``numa-lb``) must be in the image's PARSEC build at the mix's input
  (``spec.parsec_image_problem``); through ``parsecmgmt``/``direct`` the image
  must hold a PARSEC tree at ``job.parsec_root``; a ``cmd`` under
  ``/opt/numa-lb`` must be one of the image's files (other commands are
  Debian's and are not listed in image.json, so they are not checked).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .spec import (
    DAEMON_POLICIES,
    Spec,
    numa_lb_daemon,
    parsec_image_problem,
    restricted_count,
    topology_for,
)

TIMING_PRESETS = ("paper", "sensitivity")
ALLOW_QEMU_TIMING_FLAG = "--allow-qemu-timing"
GUEST_PREFIX = "/opt/numa-lb"  # disk-image/build_image.py PREFIX
GUEST_BIN = f"{GUEST_PREFIX}/bin"


def timing_preset(spec: Spec) -> str | None:
    """The timing preset this spec is (by --preset or by sweep name), or None."""
    src = spec.source.removeprefix("preset ") if spec.source.startswith("preset ") else None
    if src in TIMING_PRESETS:
        return src
    return spec.name if spec.name in TIMING_PRESETS else None


def qemu_timing_refusal(spec: Spec, backend: str, backend_why: str, allowed: bool) -> str | None:
    """The refusal message for a timing preset on qemu, or None."""
    which = timing_preset(spec)
    if backend != "qemu" or allowed or which is None:
        return None
    return (
        f"the {which} preset measures timing (elapsed time, IPC, improvement over the "
        f"baseline) and the backend is qemu ({backend_why}), whose timing is functional "
        "emulation, NOT architectural performance. Run it on gem5 (`./run_all.py "
        "build-gem5`, GEM5=/path/to/gem5.fast or --gem5 PATH), or pass "
        f"{ALLOW_QEMU_TIMING_FLAG} to run it on qemu anyway (its reports then carry the "
        "qemu caveat)"
    )


def daemon_qemu_refusal(spec: Spec, backend: str, backend_why: str) -> str | None:
    """The refusal message for counter-driven policies on qemu, or None."""
    pols = [p for p in spec.axes["policy"] if p in DAEMON_POLICIES]
    if backend != "qemu" or not pols:
        return None
    return (
        f"policies {', '.join(pols)} need hardware counters and the backend is qemu "
        f"({backend_why}): {numa_lb_daemon.ctr.QEMU_REFUSAL}"
    )


def switch_marks_qemu_refusal(spec: Spec, backend: str, backend_why: str) -> str | None:
    """The refusal message for job.switch_marks on qemu, or None: the marks are
    m5 ops, which only gem5 executes (the qemu guest is not booted with
    numa_lb_m5=1, so the kernel refuses them with ENODEV)."""
    if backend != "qemu" or not spec.job.get("switch_marks"):
        return None
    return (
        f"job.switch_marks marks context switches for gem5's counter bridge with m5 ops "
        f"and the backend is qemu ({backend_why}): set it on gem5 only"
    )


def calibration_refusal(spec: Spec, backend: str) -> str | None:
    """The refusal message for a gem5 sweep asking for a NUMA factor on a
    machine no shipped calibration table was measured on, or None."""
    factors = spec.axes["numa_factor"]
    if backend != "gem5" or not factors:
        return None
    missing = []
    for s in spec.axes["sockets"]:
        for c in spec.axes["cores_per_socket"]:
            if not restricted_count(spec.axes, spec.exclude, {"sockets": s, "cores_per_socket": c}):
                continue
            topo = topology_for(s, c, "numa_factor", factors[0], spec.machine)
            if topo.calibration is None:
                conds = sorted(topo.calibration_conditions().items())
                missing.append(f"{s} x {c} ({' '.join(f'{k}={v}' for k, v in conds)})")
    if not missing:
        return None
    return (
        f"axes.numa_factor on gem5: no calibration table in configs/numa_lb/calibration was "
        f"measured on the machine {'; '.join(missing)}, and a gem5 run resolves a NUMA factor "
        "only with one (configs/README.md, 'One table per machine'). Measure it (`./run_all.py run "
        "--preset calibration` with these machine settings, then `./run_all.py calibrate "
        "DIR --write TABLE`), give axes.link_latency instead, or exclude these points"
    )


def _mix_programs(spec: Spec) -> list[tuple[str, dict[str, Any]]]:
    return [(mx, p) for mx in spec.axes["mix"] for p in spec.mixes[mx]]


def image_meta(image: Path) -> dict[str, Any] | None:
    """The image's image.json; for an image not built yet (a dry run) what it
    will hold as far as known now: built without PARSEC_SRC it has no PARSEC
    programs (its files are not known, so they are not checked). None: unknown."""
    meta = image.parent / "image.json"
    if meta.is_file():
        try:
            d = json.loads(meta.read_text())
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) else None
    if image.name.startswith("unbuilt-image-") and not os.environ.get("PARSEC_SRC"):
        key = image.name.removeprefix("unbuilt-image-")
        return {"image_key": f"{key} (not built yet; PARSEC_SRC is unset)", "parsec": None}
    return None


def image_problems(spec: Spec, image_meta: dict[str, Any] | None) -> str | None:
    """Why the image cannot run every program of the spec's mixes, or None.

    No image.json (a dry run before the image is built): not checked.
    """
    if image_meta is None:
        return None
    problems: list[str] = []
    parsec = parsec_image_problem(spec, image_meta)
    if parsec:
        problems.append(f"PARSEC: {parsec}")
    files = image_meta.get("files")
    if not isinstance(files, dict):  # not known (an image not built yet): not checked
        return _refusal(problems)
    key = image_meta.get("image_key") or image_meta.get("image_id") or "?"
    missing_bin: dict[str, list[str]] = {}
    launcher = spec.job["parsec_launcher"]
    root = str(spec.job["parsec_root"]).rstrip("/")
    tree_missing: list[str] = []
    for mx, p in _mix_programs(spec):
        if "workload" in p:
            path = f"{GUEST_BIN}/{p['workload']}"
            if path not in files:
                missing_bin.setdefault(path, []).append(mx)
        elif "parsec" in p and launcher != "numa-lb":
            if not any(str(f).startswith(root + "/") for f in files):
                tree_missing.append(f"{mx}:{p['parsec']}")
        elif "cmd" in p:
            exe = str(p["cmd"][0])
            if exe.startswith(GUEST_PREFIX + "/") and exe not in files:
                missing_bin.setdefault(exe, []).append(mx)
    for path, mixes in sorted(missing_bin.items()):
        problems.append(
            f"{path} (mix {', '.join(sorted(set(mixes)))}) is not in the image {key}; "
            "rebuild it with `disk-image/build_image.py build`"
        )
    if tree_missing:
        problems.append(
            f"{len(tree_missing)} PARSEC program(s) ({', '.join(tree_missing[:4])}"
            f"{', ...' if len(tree_missing) > 4 else ''}) run through job.parsec_launcher = "
            f'"{launcher}" from {root}, and the image {key} holds no file under {root}: that '
            "launcher is for the gem5-resources x86-parsec image (README, PARSEC); with our "
            'image use job.parsec_launcher = "numa-lb" and an image built with PARSEC_SRC'
        )
    return _refusal(problems)


def _refusal(problems: list[str]) -> str | None:
    if not problems:
        return None
    return "the sweep's mixes need programs the image lacks: " + "; ".join(problems)
