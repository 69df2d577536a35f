"""Sweep specifications: TOML files (presets in analysis/presets/), overrides, validation.

A spec says which points to run (the ``[axes]``: policy x NUMA factor or link
latency x sockets x cores per socket x threads x mix x repeats), on which
backend, with which machine, CPU, guest-job and resource settings. Everything is
validated before anything runs; a ``SpecError`` names the field (dotted path)
and, where the set is finite, the allowed values.

The model is pure: no backend, no executor, no file system beyond reading the
TOML file. ``matrix.py`` expands a validated spec into sweep points.
"""

from __future__ import annotations

import copy
import math
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PRESET_DIR = Path(__file__).resolve().parent / "presets"

for _sub in ("configs", "workloads", "daemons"):
    _p = str(ROOT / _sub)
    if _p not in sys.path:
        sys.path.insert(0, _p)

import mix_job  # noqa: E402
import mixrunner  # noqa: E402  (workloads/mixrunner.py: the guest job format)
import numa_lb_daemon  # noqa: E402  (daemons/: the user-level policies' parameters)
import parsec_catalog  # noqa: E402
from numa_lb.topology import Topology, TopologyError  # noqa: E402

# The study's policy vocabulary (docs/DESIGN.md): the sysctl values of the kernel
# patch, plus autonuma = default + kernel.numa_balancing=1, plus stock = the
# unmodified kernel (kernel variant "stock", whatever sweep.kernel_variant says),
# plus the user-level daemons on the stock selection (daemons/, job.daemon_params).
POLICIES = ("stock", "default", "tm", "mb", "bce", "mbplus", "excl_base", "excl", "autonuma",
            "null", "mbplus_ff", "excl_ff", "imar", "imar2", "devil", "plb")  # fmt: skip
DAEMON_POLICIES = numa_lb_daemon.POLICIES
# Not in the paper (kernel patches 0019, 0020): null, first fit through the policy
# pass (a control for the pass itself), and mbplus/excl with a first-fit fallback
# when their leader rules leave no candidate.
STUDY_POLICIES = ("null", "mbplus_ff", "excl_ff")
BACKENDS = ("auto", "qemu", "gem5")
# kernel-patches/kbuild.py variants a sweep may name; "stock" is chosen per
# point by the stock policy. nokmlb has no per-node RSS: only NOKMLB_POLICIES.
KERNEL_VARIANTS = ("release", "debug", "nokmlb")
NOKMLB_POLICIES = ("stock", "default", "excl_base", "excl", "autonuma", "null", "excl_ff")
NOKMLB_POLICIES += DAEMON_POLICIES  # the stock selection; devil falls back to numa_maps
CPU_TYPES = ("atomic", "timing", "o3", "kvm")
POST_ROI_CPUS = ("atomic", "roi")
CPU_FLAGS = ("--cpu-boot", "--cpu-roi", "--cpu-post-roi")  # numa_run.py's, from [cpu]
INTER_SOCKET = ("full", "ring", "g34")
MEMORY_TYPES = ("DDR3_1600_8x8", "DDR3_2133_8x8", "DDR4_2400_8x8")
# gem5-image: the x86-parsec image's 13 programs; paper: Table 2 minus `exclude`;
# table2: all 30; paper-available / available: the same restricted to what our
# PARSEC build provides at the mix's input without PARSEC's official input
# tarballs (parsec_catalog.available_programs; image built with PARSEC_SRC).
CATALOGS = ("gem5-image", "paper", "table2", "paper-available", "available")
PINNINGS = mixrunner.PINNINGS

AXES = (
    "policy",
    "numa_balancing",
    "numa_factor",
    "link_latency",
    "sockets",
    "cores_per_socket",
    "threads",
    "mix",
    "pinning",  # the mix runner's pinning scenario; default: [job.pinning]
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.,:@%+-]{1,128}$")
_SLURM_EXTRA = re.compile(r"^--[a-z][a-z0-9-]*(=[^\s'\"\\;`$]+)?$")
_GEM5_SCRIPT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_/.-]*\.py$")
# sbatch options the Slurm executor sets or depends on (one array per resource
# shape, its own log paths, a parsable job id, no blocking): slurm_extra must not
# override them. sbatch takes unambiguous prefixes (--arr = --array), so those too.
SBATCH_RESERVED = (
    "array",
    "output",
    "error",
    "input",
    "parsable",
    "wrap",
    "chdir",
    "job-name",
    "time",
    "cpus-per-task",
    "ntasks",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "partition",
    "account",
    "wait",
    "test-only",
)


def sbatch_reserved(option: str) -> str | None:
    """The reserved sbatch option that '--name[=value]' would set, or None."""
    name = option.removeprefix("--").split("=", 1)[0]
    return next((r for r in SBATCH_RESERVED if name and r.startswith(name)), None)


class SpecError(ValueError):
    """An invalid spec: ``field`` is the dotted path, ``allowed`` what would be accepted."""

    def __init__(self, field_: str, message: str, allowed: Any = None) -> None:
        self.field = field_
        self.allowed = allowed
        text = f"{field_}: {message}"
        if allowed is not None:
            if isinstance(allowed, list | tuple):
                allowed = ", ".join(str(a) for a in allowed)
            text += f" (allowed: {allowed})"
        super().__init__(text)


# --------------------------------------------------------------------- schema
# section -> {key: (type check, default)}; "axes" and "mixes" are handled apart.
_SECTIONS: dict[str, dict[str, Any]] = {
    "sweep": {
        "name": None,
        "description": "",
        "backend": "auto",
        "kernel_variant": "release",
        "repeats": 1,
        # repeat indices first_repeat .. first_repeat + repeats - 1: a pilot takes
        # its own (e.g. 100..), so its runs (ids hash the repeat) are not the sweep's
        "first_repeat": 0,
    },
    "machine": {
        "mem_per_node": "512MiB",
        "cpu_clock": "2.8GHz",
        "memory_type": "DDR3_1600_8x8",
        "inter_socket": "full",
        "slit_remote_distance": None,
        "link_bandwidth": None,  # GB/s per direction; None: HyperTransport 3 (12.8)
        "probe_filter": True,
        "l2_includes_l3_share": False,
        # gem5 boots are deterministic: n > 1 boots n checkpoints per kernel that
        # differ (the guest's init does n-dependent work before its m5 checkpoint)
        # and assigns repeat r to checkpoint r % n (backends.boot_variant)
        "boot_checkpoints": 1,
    },
    # post_roi: the CPU that runs the guest's hand-back after the ROI's stats dump:
    # "roi" (stay on the ROI CPU) or "atomic" (the boot CPU, after a Ruby
    # writeback). Not the default: one 4x2 run of 2026-11-25 died after the
    # switch with heap corruption in the guest (configs/README.md "Post-ROI CPU")
    "cpu": {"boot": "atomic", "roi": "timing", "post_roi": "roi"},
    "gem5": {"script": "numa_run.py", "args": [], "checkpoint": True},
    "job": {
        "pinning": "free",
        "pin_threads": True,
        "sample_interval_s": 0.1,
        # simulated seconds on the ROI CPU before the ROI (configs/numa_lb/roi.py):
        # fills the caches the atomic_noncaching boot left empty; 0 = switch at the ROI
        "warmup_s": 0.01,
        "read_sched": True,
        "strict_policy": True,
        "timeout_s": None,
        "parsec_root": parsec_catalog.GEM5_PARSEC_ROOT,
        "parsec_config": parsec_catalog.GEM5_PARSEC_CONFIG,
        "parsec_launcher": "parsecmgmt",
        # balancing intervals of one sched-domain level, scaled to the ROI
        # (docs/DESIGN.md "Time scale"): {level, busy_factor, min_interval, ...}
        "sched_domain": None,
        # per user-level policy, overrides of its daemon's defaults (the papers'
        # periods are seconds; gem5 ROIs last milliseconds): {imar2 = {...}}
        "daemon_params": None,
        # NUMA balancing's scan delay, periods and size, scaled to the ROI like
        # the intervals: {scan_delay_ms, scan_period_min_ms, scan_period_max_ms,
        # scan_size_mb} (debugfs sched/numa_balancing; absent: the kernel's)
        "numa_balancing_scan": None,
        # gem5's per-task counts for the daemons: the guest marks every context
        # switch with an m5 op (kernel patch 0024, kernel.numa_lb_m5_switch)
        "switch_marks": False,
    },
    "resources": {
        "cpus_per_run": 1,
        "mem_per_run": "2GiB",
        "time_limit": "1h",
        "min_free_disk": "2GiB",
        "partition": None,
        "account": None,
        "max_parallel": None,
        "slurm_extra": [],
        "override": [],
    },
}
DEFAULT_WARMUP_S: float = _SECTIONS["job"]["warmup_s"]
_AXIS_DEFAULTS: dict[str, list[Any]] = {
    "policy": ["default"],
    # kernel.numa_balancing for every policy but autonuma (which is default + 1):
    # explicit and recorded, since page migrations are zero without it.
    "numa_balancing": [0],
    "numa_factor": [],
    "link_latency": [],
    "sockets": [4],
    "cores_per_socket": [4],
    "threads": [4],
    "mix": [],
    "pinning": [],
}


@dataclass
class Spec:
    """A validated sweep spec (plain data; ``raw`` is the merged TOML document)."""

    name: str
    description: str
    backend: str
    kernel_variant: str
    repeats: int
    axes: dict[str, list[Any]]
    machine: dict[str, Any]
    cpu: dict[str, str]
    gem5: dict[str, Any]
    job: dict[str, Any]
    resources: dict[str, Any]
    mixes: dict[str, list[dict[str, Any]]]
    mix_descriptions: dict[str, str] = field(default_factory=dict)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    # [[exclude]] rules: a point matching every axis of one rule is not run
    exclude: list[dict[str, list[Any]]] = field(default_factory=list)
    first_repeat: int = 0  # the repeats are first_repeat .. first_repeat + repeats - 1


# --------------------------------------------------------------------- values
def parse_bytes(text: Any, where: str) -> int:
    m = (
        re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?)?\s*", str(text))
        if not isinstance(text, bool)
        else None
    )
    if not m:
        raise SpecError(where, f"{text!r} is not a size", "e.g. 512MiB, 2GiB, 1048576")
    scale = {None: 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    unit = m.group(2)[0] if m.group(2) else None
    return int(float(m.group(1)) * scale[unit])


def parse_duration(text: Any, where: str) -> int:
    """Seconds from 90, "90s", "30m", "1h30m", "2d", "01:30:00" or "1-00:00:00"."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    s = str(text).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)", s)
    if m:
        d, h, mi, se = (int(g or 0) for g in m.groups())
        secs = ((d * 24 + h) * 60 + mi) * 60 + se
    else:
        parts = re.findall(r"(\d+)\s*([dhms])", s)
        if not parts or "".join(a + b for a, b in parts) != re.sub(r"\s", "", s):
            raise SpecError(
                where, f"{text!r} is not a duration", "e.g. 600, 90s, 30m, 1h30m, 01:30:00"
            )
        mult = {"d": 86400, "h": 3600, "m": 60, "s": 1}
        secs = sum(int(a) * mult[b] for a, b in parts)
    if secs <= 0:
        raise SpecError(where, "must be positive")
    return secs


def _check_type(where: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise SpecError(where, f"must be {what}, got {value!r}")
    if not isinstance(value, kind):
        raise SpecError(where, f"must be {what}, got {value!r}")


def _choice(where: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SpecError(where, f"{value!r} is not allowed", allowed)
    return value


# ----------------------------------------------------------------- load/merge
def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.toml"
    if not _NAME_RE.match(name) or not path.is_file():
        raise SpecError("--preset", f"no preset named {name!r}", preset_names())
    return path


def load_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(str(path), f"not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # tomllib decodes the whole file first
        raise SpecError(
            str(path), f"is not UTF-8 text (byte {e.start} is 0x{e.object[e.start]:02x})"
        ) from None
    except OSError as e:
        raise SpecError(str(path), f"cannot read: {e.strerror or e}") from None


def parse_override(text: str) -> tuple[list[str], Any]:
    """``key.path=value``; the value is read as a TOML value when it parses as one
    (numbers, booleans, quoted strings, [lists]), a comma list becomes a list,
    anything else is a bare string."""
    if "=" not in text:
        raise SpecError("--set", f"{text!r} is not KEY=VALUE", "e.g. axes.policy=default,excl")
    key, _, value = text.partition("=")
    path = [k for k in key.strip().split(".") if k]
    if not path or not all(re.fullmatch(r"[A-Za-z0-9_-]+", k) for k in path):
        raise SpecError("--set", f"bad key {key!r}", "dotted names such as sweep.repeats")
    return path, _parse_value(value.strip())


def _parse_value(value: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    if "," in value:
        return [_parse_value(v.strip()) for v in value.split(",") if v.strip()]
    return value


def apply_overrides(doc: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for path, value in overrides:
        node = doc
        for k in path[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise SpecError(".".join(path), "is not a table")
        if path[0] == "axes" and len(path) == 2 and not isinstance(value, list):
            value = [value]
        node[path[-1]] = value
    return doc


def narrow_exclude(doc: dict[str, Any], overridden: set[str]) -> dict[str, Any]:
    """Fit the [[exclude]] rules to axes narrowed on the command line.

    ``--policies default`` on a preset whose rules name ``tm`` must run the
    default points the rules leave, not fail: for an overridden axis a rule keeps
    the values still on it, and a rule left with none on some axis excludes
    nothing and is dropped. Axes the spec file sets keep the strict check, which
    catches a misspelt value in a rule.
    """
    rules, axes = doc.get("exclude"), doc.get("axes")
    if not overridden or not isinstance(rules, list) or not isinstance(axes, dict):
        return doc
    out: list[Any] = []
    for rule in rules:
        if not isinstance(rule, dict):
            out.append(rule)  # validate() says what is wrong with it
            continue
        kept: dict[str, Any] = {}
        for k, v in rule.items():
            on_axis = axes.get(k)
            if k in overridden and isinstance(on_axis, list):
                vals = [x for x in (v if isinstance(v, list) else [v])
                        if any(_same(x, a) for a in on_axis)]  # fmt: skip
                if not vals:
                    break
                kept[k] = vals
            else:
                kept[k] = v
        else:
            out.append(kept)
    return {**doc, "exclude": out}


# ------------------------------------------------------------------ validate
def load_spec(
    path: Path | None = None,
    preset: str | None = None,
    overrides: list[str] | None = None,
) -> Spec:
    if (path is None) == (preset is None):
        raise SpecError("spec", "give exactly one of a spec file or --preset", preset_names())
    # `preset is not None`, not truthiness: --preset '' is a preset name to refuse
    src = preset_path(preset) if preset is not None else Path(path)  # type: ignore[arg-type]
    doc = load_toml(src)
    parsed = [parse_override(o) for o in overrides or []]
    doc = apply_overrides(doc, parsed)
    if not any(path[0] == "exclude" for path, _ in parsed):  # rules given here stay strict
        narrowed = {path[1] for path, _ in parsed if path[0] == "axes" and len(path) == 2}
        doc = narrow_exclude(doc, narrowed)
    spec = validate(doc, default_name=preset or src.stem)
    spec.source = f"preset {preset}" if preset is not None else str(src)
    return spec


def nonfinite(value: Any, where: str = "") -> str | None:
    """The dotted path of the first inf/nan float in a TOML value, or None.

    TOML has inf and nan literals (and ``--set k=inf`` parses as one), but no
    spec value means anything at either, and a point holding one cannot be
    hashed into a run id (canonical JSON refuses them): refused wherever they
    are, before a range check that inf would pass (``timeout_s > 0``).
    """
    if isinstance(value, float) and not math.isfinite(value):
        return where or "value"
    if isinstance(value, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((w for w in (nonfinite(v, k) for k, v in items) if w), None)


def validate(doc: dict[str, Any], default_name: str = "sweep") -> Spec:
    bad = nonfinite(doc)
    if bad:
        raise SpecError(bad, "inf and nan are not allowed in a spec (give a finite number)")
    known = set(_SECTIONS) | {"axes", "mixes", "exclude"}
    for key in doc:
        if key not in known:
            raise SpecError(key, "unknown section", sorted(known))
    sec = {name: _section(doc, name, keys) for name, keys in _SECTIONS.items()}

    sw = sec["sweep"]
    name = sw["name"] if sw["name"] is not None else default_name
    _check_type("sweep.name", name, str, "a string")
    if not _NAME_RE.match(name):
        raise SpecError("sweep.name", f"{name!r} is not a usable name", _NAME_RE.pattern)
    _check_type("sweep.description", sw["description"], str, "a string")
    _choice("sweep.backend", sw["backend"], BACKENDS)
    _choice("sweep.kernel_variant", sw["kernel_variant"], KERNEL_VARIANTS)
    _check_type("sweep.repeats", sw["repeats"], int, "an integer >= 1")
    if sw["repeats"] < 1:
        raise SpecError("sweep.repeats", f"must be >= 1, got {sw['repeats']}")
    _check_type("sweep.first_repeat", sw["first_repeat"], int, "an integer in 0..100000")
    if not 0 <= sw["first_repeat"] <= 100000:
        raise SpecError("sweep.first_repeat", f"{sw['first_repeat']} is outside 0..100000")

    machine = _validate_machine(sec["machine"])
    cpu = sec["cpu"]
    for k in ("boot", "roi"):
        _choice(f"cpu.{k}", cpu[k], CPU_TYPES)
    if cpu["roi"] in ("atomic", "kvm"):
        raise SpecError(
            "cpu.roi", f"{cpu['roi']!r} has no timing model for the ROI", ["timing", "o3"]
        )
    _choice("cpu.post_roi", cpu["post_roi"], POST_ROI_CPUS)
    if cpu["post_roi"] == "atomic" and cpu["boot"] != "atomic":
        raise SpecError(
            "cpu.post_roi", "'atomic' hands the cores back to the boot CPU: needs cpu.boot "
            f"'atomic', got {cpu['boot']!r}", ["roi"],
        )  # fmt: skip
    g5 = sec["gem5"]
    _check_type("gem5.script", g5["script"], str, "a file name under configs/")
    if not _GEM5_SCRIPT.match(g5["script"]) or ".." in g5["script"]:
        raise SpecError("gem5.script", f"{g5['script']!r} is not a script path under configs/")
    _check_type("gem5.args", g5["args"], list, "a list of strings")
    for i, a in enumerate(g5["args"]):
        _check_type(f"gem5.args[{i}]", a, str, "a string")
        flag = a.split("=", 1)[0]
        if flag in CPU_FLAGS:
            raise SpecError(
                f"gem5.args[{i}]", f"{flag} is set by [cpu] (boot, roi, post_roi), not gem5.args"
            )
        if flag == "--perturb":
            # Ruby randomization replaces every message delay by 1-4 random
            # ticks: the NUMA factor collapses to ~1 (configs/numa_run.py).
            raise SpecError(
                f"gem5.args[{i}]",
                "--perturb is refused for study runs: Ruby randomization erases the link "
                "and cache latencies; repeats differ on the guest side (repeat seed)",
            )
    _check_type("gem5.checkpoint", g5["checkpoint"], bool, "true or false")

    job = _validate_job(sec["job"])
    resources = _validate_resources(sec["resources"])
    mixes, mix_desc = _validate_mixes(doc.get("mixes"), job)
    axes = _validate_axes(doc.get("axes", {}), mixes)
    if not axes["pinning"]:
        axes["pinning"] = [job["pinning"]]
    elif "pinning" in doc.get("job", {}):
        raise SpecError("axes.pinning", "give axes.pinning or job.pinning, not both")
    for i, pin in enumerate(axes["pinning"]):
        _choice(f"axes.pinning[{i}]", pin, PINNINGS)
    if sw["kernel_variant"] == "nokmlb":
        bad = [p for p in axes["policy"] if p not in NOKMLB_POLICIES]
        if bad:
            raise SpecError(
                "axes.policy",
                f"{bad} read per-node RSS, which kernel variant nokmlb does not track",
                NOKMLB_POLICIES,
            )
    _validate_topologies(axes, machine)
    _validate_thread_limits(axes, mixes)
    exclude = _validate_exclude(doc.get("exclude", []), axes)
    if point_count(axes, exclude) == 0:
        raise SpecError("exclude", "the rules exclude every point of the sweep")
    _validate_daemon_topologies(axes, machine, job, exclude)
    if sw["backend"] == "gem5":
        _validate_daemon_attribution(axes, job, mixes, exclude)
    if job.get("switch_marks") and "stock" in axes["policy"]:
        raise SpecError(
            "job.switch_marks",
            "the stock kernel has no kernel.numa_lb_m5_switch (kernel patch 0024): "
            "drop stock from axes.policy or switch_marks",
        )

    return Spec(
        name=name,
        description=sw["description"],
        backend=sw["backend"],
        kernel_variant=sw["kernel_variant"],
        repeats=sw["repeats"],
        first_repeat=sw["first_repeat"],
        axes=axes,
        machine=machine,
        cpu=dict(cpu),
        gem5=dict(g5),
        job=job,
        resources=resources,
        mixes=mixes,
        mix_descriptions=mix_desc,
        raw=copy.deepcopy(doc),
        exclude=exclude,
    )


def _validate_exclude(rules: Any, axes: dict[str, list[Any]]) -> list[dict[str, list[Any]]]:
    """[[exclude]] tables: axis -> values. A rule must name axis values that exist,
    rules must not overlap (so the run count stays a sum), and something must remain."""
    if not isinstance(rules, list):
        raise SpecError("exclude", "must be a list of tables ([[exclude]])")
    out: list[dict[str, list[Any]]] = []
    for i, r in enumerate(rules):
        if not isinstance(r, dict) or not r:
            raise SpecError(f"exclude[{i}]", "must be a non-empty table of axis = [values]")
        rule: dict[str, list[Any]] = {}
        for k, v in r.items():
            if k not in AXES:
                raise SpecError(f"exclude[{i}].{k}", "unknown axis", AXES)
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                if not any(_same(x, a) for a in axes[k]):
                    raise SpecError(
                        f"exclude[{i}].{k}", f"{x!r} is not a value of axes.{k}", axes[k]
                    )
            rule[k] = vals
        for j, other in enumerate(out):
            if all(any(_same(x, y) for x in rule[k] for y in other[k])
                   for k in set(rule) & set(other)):  # fmt: skip
                raise SpecError(f"exclude[{i}]", f"overlaps exclude[{j}]: make them disjoint")
        out.append(rule)
    return out


def point_count(axes: dict[str, list[Any]], exclude: list[dict[str, list[Any]]]) -> int:
    """Points of the axes' product minus those of the (disjoint) exclude rules."""
    lat_key = "numa_factor" if axes["numa_factor"] else "link_latency"
    keys = ("mix", "sockets", "cores_per_socket", lat_key, "threads", "numa_balancing", "policy")
    keys += ("pinning",) if axes.get("pinning") else ()
    n = 1
    for k in keys:
        n *= len(axes[k])
    for rule in exclude:
        m = 1
        for k in keys:
            m *= len(rule[k]) if k in rule else len(axes[k])
        n -= m
    return n


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return abs(a - b) < 1e-9
    return bool(a == b)


def excluded(spec: Spec, values: dict[str, Any]) -> bool:
    """Whether a point with these axis values is excluded by a rule of @spec."""
    return any(
        all(any(_same(values[k], x) for x in vals) for k, vals in rule.items())
        for rule in spec.exclude
    )


def _section(doc: dict[str, Any], name: str, keys: dict[str, Any]) -> dict[str, Any]:
    got = doc.get(name, {})
    if not isinstance(got, dict):
        raise SpecError(name, "must be a table")
    for k in got:
        if k not in keys:
            raise SpecError(f"{name}.{k}", "unknown key", sorted(keys))
    return {k: copy.deepcopy(got.get(k, d)) for k, d in keys.items()}


def _validate_machine(m: dict[str, Any]) -> dict[str, Any]:
    _choice("machine.inter_socket", m["inter_socket"], INTER_SOCKET)
    _choice("machine.memory_type", m["memory_type"], MEMORY_TYPES)
    for k in ("probe_filter", "l2_includes_l3_share"):
        _check_type(f"machine.{k}", m[k], bool, "true or false")
    for k in ("mem_per_node", "cpu_clock"):
        _check_type(f"machine.{k}", m[k], str, "a string such as '512MiB' / '2.8GHz'")
    d = m["slit_remote_distance"]
    if d is not None:
        _check_type("machine.slit_remote_distance", d, int, "an integer in 11..254")
    n = m["boot_checkpoints"]
    _check_type("machine.boot_checkpoints", n, int, "an integer in 1..64")
    if not 1 <= n <= 64:
        raise SpecError("machine.boot_checkpoints", f"{n} is outside 1..64")
    if n == 1:
        del m["boot_checkpoints"]  # absent: the run ids of sweeps without it stay
    bw = m["link_bandwidth"]
    if bw is not None:
        _check_type("machine.link_bandwidth", bw, int | float, "GB/s per direction, 0.1..1000")
        if not 0.1 <= bw <= 1000:
            raise SpecError("machine.link_bandwidth", f"{bw} GB/s is outside 0.1..1000")
    return m


def _numa_scan(d: Any) -> dict[str, Any]:
    """job.numa_balancing_scan checked key by key (mix_job's rules, the guest's own)."""
    where = "job.numa_balancing_scan"
    _check_type(where, d, dict,
                "a table such as { scan_delay_ms = 10, scan_period_min_ms = 10, "
                "scan_period_max_ms = 100, scan_size_mb = 16 }")  # fmt: skip
    if not d:
        raise SpecError(where, "names no knob", list(mix_job.NUMA_SCAN_KNOBS))
    for k, v in d.items():
        if k not in mix_job.NUMA_SCAN_KNOBS:
            raise SpecError(f"{where}.{k}", "unknown key", list(mix_job.NUMA_SCAN_KNOBS))
        problem = mix_job.numa_scan_problem(k, v)
        if problem:
            raise SpecError(f"{where}.{k}", problem)
    lo, hi = d.get("scan_period_min_ms"), d.get("scan_period_max_ms")
    if lo is not None and hi is not None and lo > hi:
        raise SpecError(f"{where}.scan_period_min_ms", f"{lo} is above scan_period_max_ms {hi}")
    try:
        return mix_job.numa_scan_settings(d) or {}
    except mixrunner.JobError as e:  # the guest's validator: the same rules
        raise SpecError(where, str(e)) from None


def _validate_job(j: dict[str, Any]) -> dict[str, Any]:
    _choice("job.pinning", j["pinning"], PINNINGS)
    if j["daemon_params"] is None:
        del j["daemon_params"]  # absent, not null: the run ids of sweeps without it stay
    else:
        _check_type("job.daemon_params", j["daemon_params"], dict,
                    "a table per daemon policy: { imar = { interval_s = 0.005 } }")  # fmt: skip
        for pol, params in j["daemon_params"].items():
            _choice("job.daemon_params", pol, DAEMON_POLICIES)
            try:
                # the daemons run on gem5 only (qemu is refused): its periods' defaults
                numa_lb_daemon.check_params(pol, params, "gem5")
            except numa_lb_daemon.ParamError as e:
                raise SpecError(f"job.daemon_params.{pol}", str(e)) from None
    if j["sched_domain"] is not None:
        _check_type(
            "job.sched_domain",
            j["sched_domain"],
            dict,
            "a table such as "
            "{ level = 'NUMA', busy_factor = 1, min_interval = 4, max_interval = 8 }",
        )
        try:
            j["sched_domain"] = mix_job.sched_domain_settings(j["sched_domain"])
        except mixrunner.JobError as e:
            raise SpecError("job.sched_domain", str(e)) from None
    if j["numa_balancing_scan"] is None:
        del j["numa_balancing_scan"]  # absent, not null: the run ids of sweeps without it stay
    else:
        j["numa_balancing_scan"] = _numa_scan(j["numa_balancing_scan"])
    _choice("job.parsec_launcher", j["parsec_launcher"], parsec_catalog.LAUNCHERS)
    if j["parsec_launcher"] == "numa-lb":  # our image's build: its own root and config
        if j["parsec_root"] == parsec_catalog.GEM5_PARSEC_ROOT:
            j["parsec_root"] = parsec_catalog.NUMA_LB_PARSEC_ROOT
        if j["parsec_config"] == parsec_catalog.GEM5_PARSEC_CONFIG:
            j["parsec_config"] = parsec_catalog.NUMA_LB_PARSEC_CONFIG
    for k in ("pin_threads", "read_sched", "strict_policy", "switch_marks"):
        _check_type(f"job.{k}", j[k], bool, "true or false")
    if not j["switch_marks"]:
        del j["switch_marks"]  # absent, not false: the run ids of sweeps without it stay
    _check_type("job.sample_interval_s", j["sample_interval_s"], int | float, "a number > 0")
    if not j["sample_interval_s"] > 0:
        raise SpecError("job.sample_interval_s", "must be > 0")
    most = mix_job.MAX_WARMUP_S
    _check_type("job.warmup_s", j["warmup_s"], int | float, f"a number in 0..{most}")
    if not 0 <= j["warmup_s"] <= most:
        raise SpecError("job.warmup_s", f"must be in 0..{most} (simulated seconds)")
    if j["timeout_s"] is not None:
        _check_type("job.timeout_s", j["timeout_s"], int | float, "a number > 0")
        if not j["timeout_s"] > 0:
            raise SpecError("job.timeout_s", "must be > 0")
    for k in ("parsec_root", "parsec_config"):
        _check_type(f"job.{k}", j[k], str, "a string")
    return j


# What one run may ask for, checked with the spec for the defaults and every
# resources.override alike: these reach `#SBATCH --cpus-per-task/--mem/--time`
# and the local pool, and a value sbatch refuses used to surface only at
# submission, after the staging (hours of boot checkpoints).
MAX_CPUS_PER_RUN = 1024  # as --jobs: more than any node offers
MIN_MEM_PER_RUN = 64 << 20  # no gem5 or QEMU process fits in less; sbatch counts MiB
MAX_MEM_PER_RUN = 64 << 40
MAX_TIME_LIMIT_S = 365 * 86400  # a year; Slurm's --time, the worker's own timer


def _cpus_per_run(v: Any, where: str) -> int:
    want = f"an integer in 1..{MAX_CPUS_PER_RUN}"
    _check_type(where, v, int, want)
    if not 1 <= v <= MAX_CPUS_PER_RUN:
        raise SpecError(where, f"must be {want}, got {v}")
    return int(v)


def _mem_per_run(v: Any, where: str) -> int:
    n = parse_bytes(v, where)
    if not MIN_MEM_PER_RUN <= n <= MAX_MEM_PER_RUN:
        raise SpecError(
            where,
            f"{v!r} is {n:,} bytes, outside {MIN_MEM_PER_RUN >> 20} MiB..{MAX_MEM_PER_RUN >> 40} "
            "TiB (the memory one run's gem5/QEMU process may use)",
        )
    return n


def _time_limit(v: Any, where: str) -> int:
    secs = parse_duration(v, where)
    if secs > MAX_TIME_LIMIT_S:
        raise SpecError(where, f"{v!r} is more than {MAX_TIME_LIMIT_S // 86400} days per run")
    return secs


def _validate_resources(r: dict[str, Any]) -> dict[str, Any]:
    out = dict(r)
    out["cpus_per_run"] = _cpus_per_run(r["cpus_per_run"], "resources.cpus_per_run")
    out["mem_per_run_bytes"] = _mem_per_run(r["mem_per_run"], "resources.mem_per_run")
    out["time_limit_s"] = _time_limit(r["time_limit"], "resources.time_limit")
    out["min_free_disk_bytes"] = parse_bytes(r["min_free_disk"], "resources.min_free_disk")
    for k in ("partition", "account"):
        v = r[k]
        if v is not None and (not isinstance(v, str) or not _SLURM_WORD.match(v)):
            raise SpecError(f"resources.{k}", f"{v!r} is not a Slurm name", _SLURM_WORD.pattern)
    if r["max_parallel"] is not None:
        _check_type("resources.max_parallel", r["max_parallel"], int, "an integer >= 1")
        if r["max_parallel"] < 1:
            raise SpecError("resources.max_parallel", "must be >= 1")
    _check_type("resources.slurm_extra", r["slurm_extra"], list, "a list of '--option=value'")
    for i, x in enumerate(r["slurm_extra"]):
        if not isinstance(x, str) or not _SLURM_EXTRA.match(x):
            raise SpecError(
                f"resources.slurm_extra[{i}]",
                f"{x!r} is not a single sbatch option",
                "--name=value without spaces or quotes",
            )
        if sbatch_reserved(x):
            raise SpecError(
                f"resources.slurm_extra[{i}]",
                f"{x!r} would override --{sbatch_reserved(x)}, which the Slurm executor sets "
                "(cpus/mem/time/partition/account have resources.* fields)",
            )
    _check_type("resources.override", r["override"], list, "a list of tables")
    overrides = []
    for i, o in enumerate(r["override"]):
        where = f"resources.override[{i}]"
        if not isinstance(o, dict) or "match" not in o or not isinstance(o["match"], dict):
            raise SpecError(where, "needs a 'match' table", f"keys of a point: {', '.join(AXES)}")
        for k in o["match"]:
            if k not in AXES + ("repeat", "backend"):
                raise SpecError(f"{where}.match.{k}", "unknown point field", AXES + ("repeat",))
        ov: dict[str, Any] = {"match": dict(o["match"])}
        for k, v in o.items():
            if k == "match":
                continue
            if k == "cpus_per_run":
                ov[k] = _cpus_per_run(v, f"{where}.{k}")
            elif k == "mem_per_run":
                ov["mem_per_run_bytes"] = _mem_per_run(v, f"{where}.{k}")
            elif k == "time_limit":
                ov["time_limit_s"] = _time_limit(v, f"{where}.{k}")
            else:
                raise SpecError(
                    f"{where}.{k}",
                    "cannot be overridden",
                    ["cpus_per_run", "mem_per_run", "time_limit"],
                )
        overrides.append(ov)
    out["override"] = overrides
    return out


def _validate_mixes(
    mixes: Any, job: dict[str, Any]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    if not isinstance(mixes, dict) or not mixes:
        raise SpecError("mixes", "define at least one mix ([mixes.<name>])")
    out: dict[str, list[dict[str, Any]]] = {}
    desc: dict[str, str] = {}
    for name, m in mixes.items():
        where = f"mixes.{name}"
        if not _NAME_RE.match(name):
            raise SpecError(where, "bad mix name", _NAME_RE.pattern)
        if not isinstance(m, dict):
            raise SpecError(where, "must be a table")
        allowed = {"description", "programs", "catalog", "input", "exclude", "inputs"}
        for k in m:
            if k not in allowed:
                raise SpecError(f"{where}.{k}", "unknown key", sorted(allowed))
        desc[name] = str(m.get("description", ""))
        if ("programs" in m) == ("catalog" in m):
            raise SpecError(where, "give exactly one of 'programs' or 'catalog'")
        if "catalog" in m:
            progs = _catalog_programs(where, m)
        else:
            progs = m["programs"]
            if not isinstance(progs, list) or not progs:
                raise SpecError(f"{where}.programs", "must be a non-empty list of tables")
        # Check with the guest's own validator, threads filled in with 1 if left
        # to the axis, so errors surface now and not inside a guest.
        trial = {"programs": [{"threads": 1, **p} if isinstance(p, dict) else p for p in progs]}
        try:
            mixrunner.load_job(trial)
        except mixrunner.JobError as e:
            raise SpecError(f"{where}.programs", str(e)) from None
        out[name] = [dict(p) for p in progs]
    return out, desc


def _catalog_programs(where: str, m: dict[str, Any]) -> list[dict[str, Any]]:
    cat = _choice(f"{where}.catalog", m["catalog"], CATALOGS)
    inp = m.get("input", "simsmall")
    _choice(f"{where}.input", inp, parsec_catalog.INPUTS)
    if cat in ("paper-available", "available"):
        progs = parsec_catalog.available_programs(inp)
        if cat == "paper-available" and "exclude" in m:  # optional: the subset is partial anyway
            try:
                progs = [p for p in progs if p != parsec_catalog.lookup(m["exclude"])]
            except KeyError as e:
                raise SpecError(f"{where}.exclude", e.args[0]) from None
        if not progs:
            raise SpecError(f"{where}.input", f"our PARSEC build provides no program at {inp}")
    elif cat == "paper":
        if "exclude" not in m:
            raise SpecError(
                f"{where}.exclude",
                "the paper ran 29 of Table 2's 30 programs and does not say which one it left "
                "out: name it",
                [p.package for p in parsec_catalog.PROGRAMS],
            )
        try:
            progs = parsec_catalog.paper_mix(exclude=m["exclude"])
        except KeyError as e:
            raise SpecError(f"{where}.exclude", e.args[0]) from None
    elif cat == "gem5-image":
        progs = [p for p in parsec_catalog.PROGRAMS if p.in_gem5_image]
    else:
        progs = list(parsec_catalog.PROGRAMS)
    per = m.get("inputs", {})  # catalog mixes: {program: input} for a few programs
    if not isinstance(per, dict):
        raise SpecError(f"{where}.inputs", "must be a table of program = input")
    chosen = {}
    for k, v in per.items():
        try:
            chosen[parsec_catalog.lookup(k).package] = _choice(
                f"{where}.inputs.{k}", v, parsec_catalog.INPUTS
            )
        except KeyError as e:
            raise SpecError(f"{where}.inputs.{k}", e.args[0]) from None
    extra = sorted(set(chosen) - {p.package for p in progs})
    if extra:
        raise SpecError(f"{where}.inputs", f"{extra} are not in the mix")
    if cat in ("paper-available", "available"):
        gone = [n for n, i in chosen.items() if not parsec_catalog.available(
            parsec_catalog.lookup(n), i)]  # fmt: skip
        if gone:
            raise SpecError(f"{where}.inputs", f"our PARSEC build does not provide {gone}")
    return [
        {"name": p.package, "parsec": p.package, "input": chosen.get(p.package, inp)} for p in progs
    ]


def _validate_thread_limits(axes: dict[str, list[Any]], mixes: dict[str, Any]) -> None:
    """A PARSEC program given more threads than its input has work units fails
    (swaptions: one swaption per thread at least)."""
    for mx in axes["mix"]:
        for p in mixes[mx]:
            if "parsec" not in p:
                continue
            top = parsec_catalog.max_threads(parsec_catalog.lookup(p["parsec"]), p.get("input",
                                             "simsmall"))  # fmt: skip
            ts = [p["threads"]] if "threads" in p else axes["threads"]
            if top is not None and max(ts) > top:
                raise SpecError(
                    f"mixes.{mx}",
                    f"{p['parsec']} at {p.get('input', 'simsmall')} takes at most {top} threads, "
                    f'not {max(ts)} (a larger input, e.g. inputs = {{ "{p["parsec"]}" = '
                    '"simmedium" }, or fewer threads)',
                )


def needs_parsec_build(spec: Spec) -> bool:
    """Whether SPEC runs a PARSEC program from our image's PARSEC build (the
    numa-lb launcher): only then does run_all.py default PARSEC_SRC to the
    cache's tree, so a sweep without PARSEC gets the PARSEC-free image whatever
    the cache holds (README "PARSEC"; a pitfall in docs/DESIGN.md)."""
    return spec.job["parsec_launcher"] == "numa-lb" and any(
        "parsec" in p for mx in spec.axes["mix"] for p in spec.mixes[mx]
    )


def parsec_image_problem(spec: Spec, image_meta: dict[str, Any] | None) -> str | None:
    """Why the image cannot run SPEC's PARSEC programs through the numa-lb launcher
    (our PARSEC build, image.json "parsec"), or None. No image.json: not checked."""
    if not needs_parsec_build(spec) or image_meta is None:
        return None
    want = sorted({(p["parsec"], p.get("input", "simsmall")) for mx in spec.axes["mix"]
                   for p in spec.mixes[mx] if "parsec" in p})  # fmt: skip
    have = (image_meta.get("parsec") or {}).get("programs") or {}
    missing = [f"{parsec_catalog.lookup(n).package} {i}" for n, i in want
               if i not in have.get(parsec_catalog.lookup(n).package, {})]  # fmt: skip
    if not missing:
        return None
    if not have:
        return (
            f"the image {image_meta.get('image_key')} has no PARSEC programs: build it with "
            "PARSEC_SRC set to a PARSEC 3.0 tree (README: PARSEC), or use the x86-parsec "
            'overlay with job.parsec_launcher = "parsecmgmt"'
        )
    return f"the image's PARSEC build lacks {', '.join(missing)}"


def _validate_axes(axes: Any, mixes: dict[str, Any]) -> dict[str, list[Any]]:
    if not isinstance(axes, dict):
        raise SpecError("axes", "must be a table")
    for k in axes:
        if k not in AXES:
            raise SpecError(f"axes.{k}", "unknown axis", AXES)
    out = {k: copy.deepcopy(axes.get(k, d)) for k, d in _AXIS_DEFAULTS.items()}
    for k, v in out.items():
        if not isinstance(v, list):
            raise SpecError(f"axes.{k}", "must be a list")
        if len(set(map(repr, v))) != len(v):
            raise SpecError(f"axes.{k}", f"repeated values in {v}")
    if not out["policy"]:
        raise SpecError("axes.policy", "must not be empty", POLICIES)
    for i, p in enumerate(out["policy"]):
        _choice(f"axes.policy[{i}]", p, POLICIES)
    if not out["numa_balancing"]:
        raise SpecError("axes.numa_balancing", "must not be empty", "0, 1")
    for i, nb in enumerate(out["numa_balancing"]):
        if isinstance(nb, bool) or nb not in (0, 1):
            raise SpecError(f"axes.numa_balancing[{i}]", f"{nb!r}", "0 (off), 1 (on)")
    if "autonuma" in out["policy"] and out["numa_balancing"] != [0]:
        raise SpecError(
            "axes.policy",
            "autonuma is default with numa_balancing=1; with a numa_balancing axis "
            "sweep policy default instead",
        )
    for k, lo, hi in (("sockets", 1, 8), ("cores_per_socket", 1, 16), ("threads", 1, 1024)):
        if not out[k]:
            raise SpecError(f"axes.{k}", "must not be empty")
        for i, v in enumerate(out[k]):
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise SpecError(f"axes.{k}[{i}]", f"{v!r} is out of range", f"integers {lo}..{hi}")
    if out["numa_factor"] and out["link_latency"]:
        raise SpecError("axes.link_latency", "give numa_factor or link_latency, not both")
    # An axis given as [] used to fall back to its default without a word
    # (numa_factor to 1.6, mix to every mix, pinning to job.pinning). The one
    # empty list that means something: the latency axis not in use, cleared
    # so that the other one can be set (--set axes.numa_factor=[] beside
    # --set axes.link_latency=20 on a preset that names factors).
    for k, default in (("mix", "every mix of [mixes]"), ("pinning", "job.pinning")):
        if k in axes and axes[k] == []:
            raise SpecError(f"axes.{k}", f"is empty; leave it out for its default ({default})")
    lat = [k for k in ("numa_factor", "link_latency") if k in axes and axes[k] == []]
    if lat and not (out["numa_factor"] or out["link_latency"]):
        raise SpecError(
            f"axes.{lat[0]}",
            "is empty and so is the other latency axis; give numa_factor or link_latency "
            "values, or leave both out for the default numa_factor = [1.6]",
        )
    for i, f in enumerate(out["numa_factor"]):
        if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f):
            raise SpecError(f"axes.numa_factor[{i}]", f"{f!r} is not a number", "(1.0, 10.0]")
        if not 1.0 < f <= 10.0:
            raise SpecError(f"axes.numa_factor[{i}]", f"{f!r} is out of range", "(1.0, 10.0]")
        out["numa_factor"][i] = float(f)
    for i, ll in enumerate(out["link_latency"]):
        if isinstance(ll, bool) or not isinstance(ll, int | str):
            raise SpecError(f"axes.link_latency[{i}]", f"{ll!r}", "cycles (integer) or '20ns'")
        out["link_latency"][i] = str(ll)
    if not out["numa_factor"] and not out["link_latency"]:
        out["numa_factor"] = [1.6]
    if not out["mix"]:
        out["mix"] = sorted(mixes)
    for i, mx in enumerate(out["mix"]):
        _choice(f"axes.mix[{i}]", mx, tuple(sorted(mixes)))
    return out


def _validate_topologies(axes: dict[str, list[Any]], machine: dict[str, Any]) -> None:
    """Every (sockets, cores, factor|latency) combination must be a valid Topology."""
    lat_key = "numa_factor" if axes["numa_factor"] else "link_latency"
    for s in axes["sockets"]:
        for c in axes["cores_per_socket"]:
            for lat in axes[lat_key]:
                try:
                    topology_for(s, c, lat_key, lat, machine)
                except TopologyError as e:
                    raise SpecError(
                        f"axes (sockets={s}, cores_per_socket={c}, {lat_key}={lat})", str(e)
                    ) from None


def daemon_needs_requests_by_node(policy: str, job: dict[str, Any]) -> str | None:
    """Which formula of a daemon policy needs each socket's demand requests by
    home node (the counter bridge's ``mem_requests``), or None."""
    if policy in ("imar", "imar2"):
        return f"{policy}'s latency term (each thread's requests by home node)"
    params = (job.get("daemon_params") or {}).get(policy) or {}
    if policy == "devil" and params.get("pattern") == "counters":
        return "devil's reference shares with pattern = 'counters'"
    return None


def daemon_splits_socket_requests(policy: str, job: dict[str, Any]) -> str | None:
    """Which formula of a daemon policy uses each thread's share of its
    socket's requests by home node on gem5, an approximate attribution (the
    bridge counts requests per socket, not per core or task; daemons/README.md
    "Signals"), or None."""
    if policy in ("imar", "imar2"):
        return f"{policy}'s latency term"
    params = (job.get("daemon_params") or {}).get(policy) or {}
    if policy == "devil" and params.get("pattern", "auto") != "pages":
        return "devil's reference shares (pattern counters, or auto on gem5)"
    return None


def _validate_daemon_attribution(
    axes: dict[str, list[Any]],
    job: dict[str, Any],
    mixes: dict[str, list[Any]],
    exclude: list[dict[str, list[Any]]],
) -> None:
    """Issue 39: where a daemon's signal cannot be attributed exactly (a
    socket's requests by home node shared over the tasks that missed there,
    by their misses), its runs are restricted to mixes where each program
    has CPUs to itself: threads bound to their node (job.pin_threads, a
    pinning other than 'free'), one program per node (no more programs than
    sockets, each on a node of its own). The daemon's own moves may still
    put two programs on one socket later: its log's node_split_purity per
    decision says how far (daemons/README.md "Signals")."""
    for pol in axes["policy"]:
        what = daemon_splits_socket_requests(pol, job)
        if what is None:
            continue
        for pin in axes["pinning"]:
            if not restricted_count(axes, exclude, {"policy": pol, "pinning": pin}):
                continue
            if pin == "free" or not job.get("pin_threads"):
                raise SpecError(
                    f"axes (policy={pol}, pinning={pin})",
                    f"{what} shares each socket's requests by home node over the tasks that "
                    "ran there (gem5 counts them per socket): approximate, so its runs need "
                    "each program on CPUs of its own (a pinning other than 'free' with "
                    "job.pin_threads = true, one program per node); see daemons/README.md "
                    '"Signals", or exclude these points',
                )
            for mix in axes["mix"]:
                progs = mixes.get(mix) or []
                for n in axes["sockets"]:
                    fixed = {"policy": pol, "pinning": pin, "mix": mix, "sockets": n}
                    if not restricted_count(axes, exclude, fixed):
                        continue
                    nodes = [
                        p.get("node") if isinstance(p, dict) and p.get("node") is not None
                        else i % n for i, p in enumerate(progs)
                    ]  # fmt: skip
                    if len(progs) > n or len(set(nodes)) != len(nodes):
                        raise SpecError(
                            f"axes (policy={pol}, mix={mix}, sockets={n})",
                            f"{what} is approximate where programs share a socket: its runs "
                            f"need one program per node, and mix {mix!r} puts {len(progs)} "
                            f"programs on nodes {nodes} of {n}; see daemons/README.md "
                            '"Signals", or exclude these points',
                        )


def restricted_count(
    axes: dict[str, list[Any]], exclude: list[dict[str, list[Any]]], fixed: dict[str, Any]
) -> int:
    """Points of the sweep whose axes take the FIXED values."""
    ax = dict(axes, **{k: [v] for k, v in fixed.items()})
    rules = []
    for r in exclude:
        if any(k in r and not any(_same(v, x) for x in r[k]) for k, v in fixed.items()):
            continue  # the rule excludes none of these points
        rules.append(dict(r, **{k: [v] for k, v in fixed.items() if k in r}))
    return point_count(ax, rules)


def _validate_daemon_topologies(
    axes: dict[str, list[Any]],
    machine: dict[str, Any],
    job: dict[str, Any],
    exclude: list[dict[str, list[Any]]],
) -> None:
    """A daemon formula that needs requests by home node, on sockets that are
    not all directly linked, is refused: the counter bridge cannot split a
    link's traffic into transit and originated requests there
    (analysis/results/gem5stats.remote_requests), so its replies carry no
    request matrix and the formula would get nothing (IMAR's latency 1.0 for
    every thread), silently."""
    from numa_lb.numa_factor import InterSocket, hop_counts

    kind = InterSocket(machine["inter_socket"])
    for pol in axes["policy"]:
        what = daemon_needs_requests_by_node(pol, job)
        if what is None:
            continue
        for n in axes["sockets"]:
            hops = hop_counts(n, kind)
            far = max((max(r) for r in hops), default=0)
            if far <= 1 or not restricted_count(axes, exclude, {"policy": pol, "sockets": n}):
                continue
            raise SpecError(
                f"axes (policy={pol}, sockets={n})",
                f"{what} needs each socket's requests by home node; with machine.inter_socket "
                f"{kind.value!r} and {n} sockets some are {far} hops apart, and the counter "
                "bridge splits requests by node only when every pair of sockets is directly "
                "linked (a link's throttle cannot tell transit from originated requests). "
                "Use inter_socket 'full', or exclude these points",
            )


def topology_for(
    sockets: int, cores: int, lat_key: str, lat: Any, machine: dict[str, Any]
) -> Topology:
    kw: dict[str, Any] = {
        "sockets": sockets,
        "cores_per_socket": cores,
        "mem_per_node": machine["mem_per_node"],
        "cpu_clock": machine["cpu_clock"],
        "memory_type": machine["memory_type"],
        "inter_socket": machine["inter_socket"],
        "probe_filter": machine["probe_filter"],
        "l2_includes_l3_share": machine["l2_includes_l3_share"],
        "slit_remote_distance": machine["slit_remote_distance"],
    }
    kw[lat_key] = lat
    if machine.get("link_bandwidth") is not None:
        kw["link_bandwidth"] = machine["link_bandwidth"]
    from numa_lb.numa_factor import InterSocket
    from numa_lb.options import calibration_for

    kw["inter_socket"] = InterSocket(kw["inter_socket"])
    # The shipped table where it was measured on this machine, else the
    # uncalibrated model (recorded as such); a gem5 run resolving a NUMA
    # factor refuses a mismatched table itself (configs/numa_run.py).
    kw["calibration"] = calibration_for(**kw)
    return Topology.from_options(**kw)
