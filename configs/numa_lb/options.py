"""Command-line options that describe the machine, shared by every configs/ script.

The flag names are the contract with ``analysis/sweep/backends.py`` (``gem5_args``):
one flag per ``Topology`` field, human units accepted ("512MiB", "2.8GHz",
"20ns"). Pure Python, importable without gem5.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .numa_factor import CalibrationTable
from .topology import Topology, TopologyError

# The calibration shipped with the repo, for the default machine (configs/README.md,
# "Calibration"). A run with other caches, clock or memory may pass its own table.
DEFAULT_CALIBRATION = Path(__file__).resolve().parent / "calibration.csv"


def add_topology_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("machine (one Topology; see configs/README.md)")
    g.add_argument("--sockets", type=int, default=4, help="1..8 (default 4)")
    g.add_argument("--cores-per-socket", type=int, default=4, help="1..16 (default 4)")
    g.add_argument("--mem-per-node", default="512MiB")
    g.add_argument("--cpu-clock", default="2.8GHz")
    g.add_argument("--memory-type", default="DDR3_1600_8x8")
    g.add_argument("--inter-socket", default="full", choices=["full", "ring"])
    lat = g.add_mutually_exclusive_group()
    lat.add_argument("--numa-factor", type=float, help="target one-hop factor (default 1.6)")
    lat.add_argument("--link-latency", help="inter-socket link: cycles (integer) or time (20ns)")
    g.add_argument("--slit-remote-distance", type=int, help="default round(10 * f)")
    g.add_argument("--no-probe-filter", action="store_true")
    g.add_argument("--l2-includes-l3-share", action="store_true")
    g.add_argument(
        "--calibration",
        type=Path,
        help=f"link latency -> measured factor CSV (default {DEFAULT_CALIBRATION.name} "
        "when it exists; 'none' for the uncalibrated model)",
    )


def load_calibration(path: Path | None) -> CalibrationTable | None:
    """The table at ``path``; None means the shipped default (if any), "none" no table."""
    if path is not None and str(path) == "none":
        return None
    if path is None:
        path = DEFAULT_CALIBRATION
        if not path.exists():
            return None
    try:
        return CalibrationTable.from_csv(path)
    except (OSError, KeyError, ValueError) as err:
        raise TopologyError(f"calibration: cannot use {path}: {err}") from None


def topology_from_args(args: argparse.Namespace) -> Topology:
    """The machine the flags describe; raises TopologyError naming the bad flag."""
    return Topology.from_options(
        sockets=args.sockets,
        cores_per_socket=args.cores_per_socket,
        mem_per_node=args.mem_per_node,
        cpu_clock=args.cpu_clock,
        memory_type=args.memory_type,
        inter_socket=args.inter_socket,
        numa_factor=args.numa_factor,
        link_latency=args.link_latency,
        slit_remote_distance=args.slit_remote_distance,
        probe_filter=not args.no_probe_filter,
        l2_includes_l3_share=args.l2_includes_l3_share,
        calibration=load_calibration(args.calibration),
    )


def topology_or_exit(args: argparse.Namespace) -> Topology:
    """``topology_from_args`` for scripts: a bad flag ends the process before gem5 starts."""
    try:
        return topology_from_args(args)
    except TopologyError as err:
        sys.exit(f"invalid topology: {err}")
