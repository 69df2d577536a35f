"""Command-line options that describe the machine, shared by every configs/ script.

The flag names are the contract with ``analysis/sweep/backends.py`` (``gem5_args``):
one flag per ``Topology`` field, human units accepted ("512MiB", "2.8GHz",
"20ns"). Pure Python, importable without gem5.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .numa_factor import CalibrationTable, InterSocket
from .topology import Topology, TopologyError

# Measured calibration tables, one per machine (configs/README.md, "Calibration"):
# each states the conditions it was measured under, and a machine uses the one
# whose conditions it meets. A run may also pass its own table.
CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"


def add_topology_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("machine (one Topology; see configs/README.md)")
    g.add_argument("--sockets", type=int, default=4, help="1..8 (default 4)")
    g.add_argument("--cores-per-socket", type=int, default=4, help="1..16 (default 4)")
    g.add_argument("--mem-per-node", default="512MiB")
    g.add_argument("--cpu-clock", default="2.8GHz")
    g.add_argument("--memory-type", default="DDR3_1600_8x8")
    g.add_argument("--inter-socket", default="full", choices=[k.value for k in InterSocket])
    lat = g.add_mutually_exclusive_group()
    lat.add_argument("--numa-factor", type=float, help="target one-hop factor (default 1.6)")
    lat.add_argument("--link-latency", help="inter-socket link: cycles (integer) or time (20ns)")
    g.add_argument("--slit-remote-distance", type=int, help="default round(10 * f)")
    g.add_argument(
        "--link-bandwidth",
        help="inter-socket link bandwidth per direction, GB/s (default 12.8: HyperTransport 3)",
    )
    g.add_argument("--no-probe-filter", action="store_true")
    g.add_argument("--l2-includes-l3-share", action="store_true")
    g.add_argument(
        "--calibration",
        type=Path,
        help="link latency -> measured factor CSV (default: the table in "
        f"{CALIBRATION_DIR.name}/ measured on this machine; 'none' for the uncalibrated model)",
    )


def load_calibration(path: Path | None) -> CalibrationTable | None:
    """The table at ``path``; None or "none" means no table."""
    if path is None or str(path) == "none":
        return None
    try:
        return CalibrationTable.from_csv(path)
    except (OSError, KeyError, ValueError) as err:
        raise TopologyError(f"calibration: cannot use {path}: {err}") from None


def find_calibration(conditions: dict[str, str]) -> CalibrationTable | None:
    """The shipped table measured under exactly these conditions, if any."""
    for path in sorted(CALIBRATION_DIR.glob("*.csv")):
        table = load_calibration(path)
        if table is not None and table.mismatch(conditions) is None:
            return table
    return None


def calibration_for(**topology_kwargs: Any) -> CalibrationTable | None:
    """The shipped table for this machine, else None (the model).

    For callers that only describe the machine (the sweep's QEMU points, plans):
    a gem5 run resolving a NUMA factor refuses a machine without a table instead
    (``topology_from_args``).
    """
    machine = Topology.from_options(**topology_kwargs, calibration=None)
    return find_calibration(machine.calibration_conditions())


def topology_from_args(args: argparse.Namespace) -> Topology:
    """The machine the flags describe; raises TopologyError naming the bad flag.

    Without --calibration, a requested NUMA factor is resolved with the shipped
    table measured on this machine; if there is none the run is refused (the
    first-order model only with an explicit --calibration none).
    """
    kw: dict[str, Any] = {
        "sockets": args.sockets,
        "cores_per_socket": args.cores_per_socket,
        "mem_per_node": args.mem_per_node,
        "cpu_clock": args.cpu_clock,
        "memory_type": args.memory_type,
        "inter_socket": args.inter_socket,
        "numa_factor": args.numa_factor,
        "link_latency": args.link_latency,
        "slit_remote_distance": args.slit_remote_distance,
        "probe_filter": not args.no_probe_filter,
        "l2_includes_l3_share": args.l2_includes_l3_share,
        "link_bandwidth": args.link_bandwidth,
    }
    if args.calibration is not None:
        return Topology.from_options(**kw, calibration=load_calibration(args.calibration))
    machine = Topology.from_options(**kw, calibration=None)
    table = find_calibration(machine.calibration_conditions())
    if table is None and args.link_latency is None:
        conds = " ".join(f"{k}={v}" for k, v in sorted(machine.calibration_conditions().items()))
        raise TopologyError(
            f"calibration: no table in {CALIBRATION_DIR} was measured on this machine "
            f"({conds}); measure one (./run_all.py --preset calibration with these machine "
            "settings, then ./run_all.py calibrate), give --link-latency, or pass "
            "--calibration none for the uncalibrated first-order model"
        )
    return Topology.from_options(**kw, calibration=table)


def topology_or_exit(args: argparse.Namespace) -> Topology:
    """``topology_from_args`` for scripts: a bad flag ends the process before gem5 starts."""
    try:
        return topology_from_args(args)
    except TopologyError as err:
        # print, then exit with a number: gem5's main casts a SystemExit code to
        # int and aborts on a string (pybind11::cast_error), losing the message
        print(f"invalid topology: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
