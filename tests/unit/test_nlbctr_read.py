"""nlbctr.c's perf group read, decoded without a PMU (this machine has none).

``nlb_perf_decode`` is the part of the real-hardware counter path that turns
one ``read(2)`` of a perf event group leader into per-event values; it does
no I/O, so a small C program (tests/unit/c/nlbctr_decode.c) linked with
daemons/nlbctr.c feeds it byte layouts. The layouts are the kernel's
``read_format`` for PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED |
TOTAL_TIME_RUNNING | ID (include/uapi/linux/perf_event.h): u64 nr,
time_enabled, time_running, then nr {u64 value, u64 id}. Then the Python half
(``counters.perf_sample`` / ``refusal``) on what the decoder reports.
"""

from __future__ import annotations

import errno
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(ROOT / "daemons"))
import counters as ctr  # noqa: E402

COUNTED, SCALED, NOT_COUNTED, ABSENT = range(4)
U64_MAX = 2**64 - 1


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("SKIPPED unit-c: gcc not found")
    out = tmp_path_factory.mktemp("nlbctr_decode") / "nlbctr_decode"
    m5 = ROOT / "workloads" / "m5ops"
    p = subprocess.run(
        ["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wmissing-prototypes", "-Werror",
         f"-I{m5}", "-o", str(out), str(ROOT / "tests/unit/c/nlbctr_decode.c"),
         str(ROOT / "daemons/nlbctr.c"), str(m5 / "m5ops.c")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return out


def layout(
    enabled: int, running: int, pairs: list[tuple[int, int]], nr: int | None = None
) -> bytes:
    """A group read: header then (value, id) pairs, native byte order as read(2) gives."""
    b = struct.pack("=QQQ", len(pairs) if nr is None else nr, enabled, running)
    return b + b"".join(struct.pack("=QQ", v, i) for v, i in pairs)


def decode(exe: Path, buf: bytes, ids: list[int]) -> tuple[int, tuple[int, int], list]:
    p = subprocess.run([str(exe), buf.hex(), *map(str, ids)], capture_output=True, text=True,
                       timeout=10, check=True)  # fmt: skip
    lines = p.stdout.split("\n")
    rc = int(lines[0].split()[1])
    en, run = (int(x) for x in lines[1].split()[1:])
    evs = [tuple(int(x) for x in ln.split()[2:]) for ln in lines[2:7]]
    return rc, (en, run), evs


IDS = [101, 102, 103, 104, 105]  # ids the kernel gave the five events


def test_all_counting(decoder: Path) -> None:
    vals = [5000, 4000, 30, 900, 200]
    rc, times, evs = decode(decoder, layout(10**6, 10**6, list(zip(vals, IDS, strict=True))), IDS)
    assert rc == 0 and times == (10**6, 10**6)
    assert evs == [(COUNTED, v) for v in vals]


def test_multiplexed_group_is_scaled_by_enabled_over_running(decoder: Path) -> None:
    # the group ran 2 of the 3 ms it was enabled: every value x 3/2, rounded down
    vals = [1001, 3000, 7, 0, 2]
    buf = layout(3_000_000, 2_000_000, list(zip(vals, IDS, strict=True)))
    rc, times, evs = decode(decoder, buf, IDS)
    assert rc == 0 and times == (3_000_000, 2_000_000)
    assert evs == [(SCALED, v * 3 // 2) for v in vals]
    # no overflow in the product: 2^62 x 3 does not fit 64 bits, the quotient does
    rc, _, evs = decode(decoder, layout(3, 2, [(2**62, 101)]), IDS)
    assert evs[0] == (SCALED, 2**62 * 3 // 2)
    rc, _, evs = decode(decoder, layout(4, 1, [(2**63, 101)]), IDS)
    assert evs[0] == (SCALED, U64_MAX)  # saturates instead of wrapping


def test_never_scheduled_is_unavailable_not_a_division_by_zero(decoder: Path) -> None:
    rc, times, evs = decode(decoder, layout(5_000_000, 0, [(0, i) for i in IDS]), IDS)
    assert rc == 0 and times == (5_000_000, 0)
    assert evs == [(NOT_COUNTED, 0)] * 5


def test_a_missing_event_is_absent_and_values_go_by_id(decoder: Path) -> None:
    # node-loads (event 3) did not open: id 0, not in the group; the kernel's
    # order of the members is not the events' order, the ids say which is which
    ids = [101, 102, 103, 0, 105]
    pairs = [(5000, 101), (200, 105), (4000, 102), (30, 103)]
    rc, _, evs = decode(decoder, layout(10, 10, pairs), ids)
    assert rc == 0
    assert evs == [(COUNTED, 5000), (COUNTED, 4000), (COUNTED, 30), (ABSENT, 0), (COUNTED, 200)]
    # an event that opened but is not in the read is absent too (not a zero)
    rc, _, evs = decode(decoder, layout(10, 10, pairs[:3]), IDS)
    assert evs[2] == (ABSENT, 0) and evs[3] == (ABSENT, 0)


@pytest.mark.parametrize(
    "buf",
    [
        b"",  # nothing read
        struct.pack("=QQ", 1, 10),  # header cut short
        layout(10, 10, [(1, 101), (2, 102)], nr=5),  # nr says more than the buffer holds
        layout(10, 10, [(1, 101), (2, 101)]),  # one id twice
    ],
)
def test_a_malformed_read_is_an_error(decoder: Path, buf: bytes) -> None:
    rc, _, evs = decode(decoder, buf, IDS)
    assert rc == -errno.EIO


# ------------------------------------------------------- the Python half


def test_python_half_refuses_what_the_decoder_could_not_count() -> None:
    rows = {0: [100, 200, 3, 50, 10], 1: [10, 20, 1, 5, 1]}
    s = ctr.perf_sample([0, 1], rows, scaled=[1], not_counted=[])
    assert s["mem_local"] == [40, 4] and s["mem_remote"] == [10, 1]
    assert s["perf_scaled_cpus"] == [1] and ctr.refusal(s) is None
    # a CPU whose group never ran: the sample is refused, not read as zeros
    s = ctr.perf_sample([0, 1], {0: rows[0], 1: [None] * 5}, scaled=[], not_counted=[1])
    assert ctr.refusal(s)[0] == "not_counted"
    # an event missing on one CPU is missing for all (None), not half a column
    s = ctr.perf_sample([0, 1], {0: rows[0], 1: [10, 20, 1, None, None]}, [], [])
    assert s["mem_local"] is None and s["llc_misses"] == [3, 1] and ctr.refusal(s) is None
    # more node-load misses than node loads: refused, not clipped to 0
    s = ctr.perf_sample([0, 1], {0: rows[0], 1: [10, 20, 1, 5, 6]}, [], [])
    assert s["mem_local"] == [40, -1]
    assert ctr.refusal(s) == ("negative_count", "mem_local of cpu 1 is -1")


def test_missing_events_are_named_with_their_errno() -> None:
    assert ctr.missing_event(errno.ENOENT) == "ENOENT (the CPU has no such event)"
    assert ctr.missing_event(errno.EOPNOTSUPP).startswith("EOPNOTSUPP (the PMU does not")
    assert "does not fit in one group" in ctr.missing_event(errno.EINVAL)
