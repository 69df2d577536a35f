"""Hop counts, SLIT distances and the NUMA factor <-> link latency arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))

from numa_lb import numa_factor as nf  # noqa: E402
from numa_lb.numa_factor import CalibrationTable, InterSocket  # noqa: E402
from numa_lb.topology import Topology, TopologyError  # noqa: E402


def test_full_topology_is_one_hop_everywhere() -> None:
    assert nf.hop_counts(4, InterSocket.FULL) == [
        [0, 1, 1, 1],
        [1, 0, 1, 1],
        [1, 1, 0, 1],
        [1, 1, 1, 0],
    ]
    assert nf.links(4, InterSocket.FULL) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def test_ring_hops_go_the_short_way_round() -> None:
    hops = nf.hop_counts(6, InterSocket.RING)
    assert hops[0] == [0, 1, 2, 3, 2, 1]
    assert hops[4] == [2, 3, 2, 1, 0, 1]
    assert nf.links(6, InterSocket.RING) == [(0, 1), (0, 5), (1, 2), (2, 3), (3, 4), (4, 5)]
    # up to 3 sockets a ring is fully connected
    assert nf.hop_counts(3, InterSocket.RING) == nf.hop_counts(3, InterSocket.FULL)


def test_default_slit_is_ten_times_the_factor() -> None:
    assert Topology(numa_factor=1.6).slit() == [
        [10, 16, 16, 16],
        [16, 10, 16, 16],
        [16, 16, 10, 16],
        [16, 16, 16, 10],
    ]
    assert Topology(numa_factor=3.0).slit_distance == 30
    assert Topology(numa_factor=3.14).slit_distance == 31
    assert Topology(numa_factor=1.25).slit_distance == 13  # half rounds up, not to even
    assert Topology(numa_factor=1.01).slit_distance == 11  # Linux needs remote > 10


def test_slit_distance_is_independent_of_the_factor() -> None:
    # a sweep over f holding the SLIT (and Linux's RECLAIM_DISTANCE behaviour) fixed
    for f in (1.2, 1.6, 2.0, 3.0, 4.0):
        t = Topology(numa_factor=f, slit_remote_distance=20)
        assert t.slit()[0][1] == 20
        assert t.target_numa_factor == f


def test_ring_slit_grows_linearly_with_hops() -> None:
    t = Topology(sockets=8, inter_socket="ring", numa_factor=1.6)
    assert t.slit()[0] == [10, 16, 22, 28, 34, 28, 22, 16]
    assert t.slit()[3] == [28, 22, 16, 10, 16, 22, 28, 34]
    assert all(t.slit()[i][i] == 10 for i in range(8))
    assert t.slit() == [list(row) for row in zip(*t.slit(), strict=True)]  # symmetric


def test_single_socket_has_a_trivial_slit() -> None:
    assert Topology(sockets=1, cores_per_socket=1).slit() == [[10]]


def test_first_order_model_inverts() -> None:
    local = 196.0  # 70 ns at 2.8 GHz
    # f = 1 + 2 (L + 1) / local  ->  L = (f - 1) local / 2 - 1
    assert nf.model_link_cycles(1.6, local) == 58  # 57.8 rounded
    assert nf.model_link_cycles(2.0, local) == 97
    assert nf.model_link_cycles(3.0, local) == 195
    assert nf.model_factor(97, local) == pytest.approx(2.0)
    assert nf.model_factor(97, local, hops=2) == pytest.approx(3.0)
    assert nf.model_link_cycles(1.001, local) == 1  # never below one cycle


def test_topology_resolves_factor_to_cycles_and_back() -> None:
    link = Topology(numa_factor=2.0).link_latency()
    assert link.cycles == 97
    assert link.ns == pytest.approx(97 / 2.8)
    assert link.predicted_numa_factor == pytest.approx(2.0)
    assert link.source == "first-order model (uncalibrated)"
    # the default request is the paper's factor
    assert Topology().link_latency().requested == "numa_factor=1.6"


def test_given_latency_in_ns_and_cycles() -> None:
    by_ns = Topology(link_latency_ns=20.0).link_latency()
    assert (by_ns.cycles, by_ns.source, by_ns.requested) == (56, "given", "link_latency_ns=20")
    by_cycles = Topology(link_latency_cycles=97).link_latency()
    assert by_cycles.predicted_numa_factor == pytest.approx(2.0)
    # no factor requested: the SLIT follows the predicted factor
    assert Topology(link_latency_cycles=97).slit_distance == 20
    assert nf.ns_to_cycles(0.1, 2_800_000_000) == 1


# conditions of the default Topology (4 x 4, 2.8 GHz, DDR3-1600, probe filter, HT3 links)
CAL_CSV = (
    "# conditions: cores_per_socket=4 cpu_clock_hz=2800000000 inter_socket=full "
    "link_bandwidth_factor=46 memory_type=DDR3_1600_8x8 probe_filter=1 sockets=4\n"
    "link_latency_cycles,measured_numa_factor\n10,1.2\n50,1.5\n150,2.5\n"
)


def test_calibration_table_interpolates_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "cal.csv"
    path.write_text(CAL_CSV)
    cal = CalibrationTable.from_csv(path)
    assert cal.factor(30) == pytest.approx(1.35)
    assert cal.link_cycles(2.0) == 100
    assert cal.link_cycles(1.2) == 10
    t = Topology(numa_factor=2.0, calibration=cal)
    assert t.link_latency().cycles == 100
    assert t.link_latency().source == str(path)
    assert t.link_latency().predicted_numa_factor == pytest.approx(2.0)
    with pytest.raises(TopologyError, match="numa_factor: 3.0 is outside the calibrated range"):
        Topology(numa_factor=3.0, calibration=cal)
    with pytest.raises(TopologyError, match="calibration: .* measured with cores_per_socket=4"):
        Topology(cores_per_socket=2, numa_factor=2.0, calibration=cal)
    path.write_text(CAL_CSV.split("\n", 1)[1])  # no conditions line: applies to nothing
    with pytest.raises(TopologyError, match="states no measurement conditions"):
        Topology(numa_factor=2.0, calibration=CalibrationTable.from_csv(path))


def test_calibration_table_must_be_monotonic() -> None:
    with pytest.raises(ValueError, match="increase strictly"):
        CalibrationTable(points=((10, 1.5), (20, 1.4)), source="bad")
    with pytest.raises(ValueError, match="two points"):
        CalibrationTable(points=((10, 1.5),), source="short")


def test_g34_layout_is_the_published_four_package_slit() -> None:
    hops = nf.hop_counts(8, InterSocket.G34)
    # symmetric, one or two hops, and the shortest paths over its links agree
    assert all(hops[i][j] == hops[j][i] for i in range(8) for j in range(8))
    assert {h for row in hops for h in row} == {0, 1, 2}
    links = nf.links(8, InterSocket.G34)
    adj = {i: {b for a, b in links if a == i} | {a for a, b in links if b == i} for i in range(8)}
    for i in range(8):
        for j in range(8):
            if hops[i][j] == 2:
                assert not adj[i] & {j} and adj[i] & adj[j], (i, j)
    # the SLIT it gives at 16 per hop is the one numactl printed on that machine
    t = Topology(sockets=8, cores_per_socket=4, inter_socket="g34", slit_remote_distance=16,
                 mem_per_node=256 << 20)  # fmt: skip
    assert t.slit() == [list(r) for r in nf.G34_4P_SLIT]
    with pytest.raises(TopologyError, match="sockets must be 8, got 4"):
        Topology(sockets=4, cores_per_socket=2, inter_socket="g34")


def test_a_given_link_latency_outside_the_table_is_predicted_not_refused(tmp_path) -> None:
    """The calibration's own runs give link latencies the table may not cover yet
    (the partial 4x2 table of 2026-11-24: 60 -> 1.6067, 150 -> 2.5332)."""
    csv = Path(tmp_path) / "t.csv"
    csv.write_text(
        "# conditions: cores_per_socket=2 cpu_clock_hz=2800000000 inter_socket=full "
        "link_bandwidth_factor=46 memory_type=DDR3_1600_8x8 probe_filter=1 sockets=4\n"
        "link_latency_cycles,measured_numa_factor\n60,1.6067\n150,2.5332\n"
    )
    cal = CalibrationTable.from_csv(csv)
    inside = Topology(sockets=4, cores_per_socket=2, link_latency_cycles=60, calibration=cal)
    assert inside.link_latency().predicted_numa_factor == 1.6067
    outside = Topology(sockets=4, cores_per_socket=2, link_latency_cycles=10, calibration=cal)
    assert 1.0 < outside.link_latency().predicted_numa_factor < 1.6067  # the model's guess
    with pytest.raises(ValueError, match="outside the calibrated range"):
        Topology(sockets=4, cores_per_socket=2, numa_factor=1.2, calibration=cal).link_latency()


def test_the_papers_4x8_machine_resolves_a_factor_from_its_shipped_table() -> None:
    """Issue 40 item 1: a 4 x 8 run at f = 1.6 resolves its link latency from the
    shipped 4 x 8 table (the 4 x 2 points, transferred after a transfer check
    whose figures its header carries), not from the first-order model."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))
    from numa_lb.options import calibration_for  # noqa: PLC0415

    t48 = calibration_for(sockets=4, cores_per_socket=8, mem_per_node="512MiB")
    t42 = calibration_for(sockets=4, cores_per_socket=2, mem_per_node="512MiB")
    assert t48 is not None and t42 is not None and t48.source != t42.source
    assert t48.points == t42.points
    header = Path(t48.source).read_text()
    for measured in ("1.2153", "1.6096", "2.4987"):  # the 4 x 8 transfer check
        assert measured in header
    m = Topology(sockets=4, cores_per_socket=8, numa_factor=1.6, calibration=t48)
    link = m.link_latency()
    assert 55 <= link.cycles <= 60 and link.source == t48.source
    assert link.predicted_numa_factor == pytest.approx(1.6, abs=0.005)  # whole cycles
