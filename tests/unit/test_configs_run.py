"""The run script's pure parts: machine flags -> Topology, and the ROI protocol.

The protocol is driven here in the order the guest init drives it under gem5;
tests/gem5 drives the same table with real exit events.
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import Enum
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workloads"))

from numa_lb import options  # noqa: E402
from numa_lb.roi import (  # noqa: E402
    ROI_RECORD_NAME,
    ROI_WORK_ID,
    SAMPLE_WORK_ID,
    WARM_WORK_ID,
    RoiProtocol,
    RoiUnknown,
    RunState,
    roi_stats_dump_index,
)
from numa_lb.topology import TopologyError  # noqa: E402


class Events(Enum):
    """Stands in for gem5's ExitEvent (same member names)."""

    CHECKPOINT = "checkpoint"
    WORKBEGIN = "workbegin"
    WORKEND = "workend"
    EXIT = "exit"
    MAX_TICK = "max tick"
    KERNEL_PANIC = "kernel panic"
    KERNEL_OOPS = "kernel oops"
    FAIL = "fail"


class Machine:
    """Records what the protocol asked gem5 to do, with a tick that advances."""

    def __init__(self) -> None:
        self.now = 0
        self.work_id = ROI_WORK_ID  # the exit event's code: the work item's id
        self.calls: list[str] = []

    def tick(self) -> int:
        return self.now

    def protocol(self, outdir: Path, take: Path | None, switch: bool = True) -> RoiProtocol:
        return RoiProtocol(
            outdir=outdir,
            tick=self.tick,
            reset_stats=lambda: self.calls.append("reset"),
            dump_stats=lambda: self.calls.append("dump"),
            switch_cpus=(lambda: self.calls.append("switch")) if switch else None,
            save_checkpoint=lambda p: self.calls.append(f"checkpoint {p.name}"),
            take_checkpoint=take,
            record={"seed": 3},
            work_id=lambda: self.work_id,
        )


def _state(outdir: Path) -> dict:
    return json.loads((outdir / ROI_RECORD_NAME).read_text())


def test_restored_run_switches_once_and_records_the_roi(tmp_path: Path) -> None:
    m = Machine()
    proto = m.protocol(tmp_path, take=None)
    table = proto.handlers(Events)
    assert _state(tmp_path)["state"] == "booting" and _state(tmp_path)["seed"] == 3

    m.now = 100
    assert next(table[Events.CHECKPOINT]) is False  # a restored guest may checkpoint again
    assert m.calls == []
    m.now = 1_000
    assert next(table[Events.WORKBEGIN]) is False
    assert m.calls == ["switch", "reset"]  # switch first: the ROI counts timing CPUs only
    assert _state(tmp_path)["state"] == "roi"
    m.now = 5_001_000
    assert next(table[Events.WORKEND]) is False
    assert m.calls == ["switch", "reset", "dump"]
    roi = _state(tmp_path)["roi"]
    assert roi == {
        "begin_tick": 1_000,
        "end_tick": 5_001_000,
        "ticks": 5_000_000,
        "sim_seconds": 5e-6,
        "stats_dump_index": 0,
    }
    # a second work item: never a second switch
    assert next(table[Events.WORKBEGIN]) is False
    assert m.calls.count("switch") == 1
    next(table[Events.WORKEND])
    assert _state(tmp_path)["roi"]["stats_dump_index"] == 1
    assert next(table[Events.EXIT]) is True
    assert proto.state is RunState.EXITED and proto.exit_code() == 0
    events = [e["event"] for e in _state(tmp_path)["events"]]
    assert events == ["checkpoint", "workbegin", "workend", "workbegin", "workend", "exit"]


def test_only_the_mix_runners_work_items_open_and_close_the_roi(tmp_path: Path) -> None:
    """PARSEC's hooks mark work items of their own: recorded, never a reset or dump."""
    m = Machine()
    table = m.protocol(tmp_path, take=None).handlers(Events)
    m.now = 10
    assert next(table[Events.WORKBEGIN]) is False  # the mix runner's ROI opens
    assert m.calls == ["switch", "reset"]
    m.work_id = 7  # a program's own region of interest, inside the ROI
    m.now = 20
    assert next(table[Events.WORKBEGIN]) is False
    m.now = 30
    assert next(table[Events.WORKEND]) is False
    assert m.calls == ["switch", "reset"]  # no reset, no dump
    rec = _state(tmp_path)
    assert rec["state"] == "roi" and rec["roi"]["begin_tick"] == 10
    ignored = [e for e in rec["events"] if e.get("work_id") == 7]
    assert [e["event"] for e in ignored] == ["workbegin", "workend"]
    assert all("ignored" in e["action"] for e in ignored)
    m.work_id = ROI_WORK_ID
    m.now = 40
    next(table[Events.WORKEND])
    assert m.calls == ["switch", "reset", "dump"]
    assert _state(tmp_path)["roi"]["ticks"] == 30
    assert roi_stats_dump_index(tmp_path) == 0


def test_the_warm_up_switches_early_and_the_roi_still_resets(tmp_path: Path) -> None:
    """Work id 4 moves to the ROI CPU before the ROI; only the ROI's begin resets."""
    m = Machine()
    table = m.protocol(tmp_path, take=None).handlers(Events)
    m.work_id, m.now = WARM_WORK_ID, 100
    assert next(table[Events.WORKBEGIN]) is False
    assert m.calls == ["switch"]  # no reset: the warm-up is not measured
    assert _state(tmp_path)["state"] == "warmup"
    m.work_id, m.now = ROI_WORK_ID, 2_100
    assert next(table[Events.WORKBEGIN]) is False
    assert m.calls == ["switch", "reset"]  # never a second switch
    m.now = 3_100
    next(table[Events.WORKEND])
    roi = _state(tmp_path)["roi"]
    assert (roi["begin_tick"], roi["warmup_ticks"], roi["ticks"]) == (2_100, 2_000, 1_000)
    assert [e["event"] for e in _state(tmp_path)["events"]] == ["warmup", "workbegin", "workend"]
    # a warm-up mark inside or after the ROI is a foreign work item, never a switch
    m.work_id = WARM_WORK_ID
    assert next(table[Events.WORKBEGIN]) is False
    assert m.calls == ["switch", "reset", "dump"]
    assert "ignored" in _state(tmp_path)["events"][-1]["action"]


def test_the_post_roi_cpu_comes_once_after_the_roi_dump(tmp_path: Path) -> None:
    """--cpu-post-roi atomic: after the ROI's statistics are dumped (never
    before, never twice), the hand-back runs on the boot CPU."""
    m = Machine()
    proto = RoiProtocol(
        outdir=tmp_path,
        tick=m.tick,
        reset_stats=lambda: m.calls.append("reset"),
        dump_stats=lambda: m.calls.append("dump"),
        switch_cpus=lambda: m.calls.append("switch"),
        save_checkpoint=lambda p: m.calls.append("checkpoint"),
        take_checkpoint=None,
        work_id=lambda: m.work_id,
        after_roi=lambda: m.calls.append("post-roi cpu"),
    )
    table = proto.handlers(Events)
    # a workend without a ROI (no workbegin seen): nothing was measured, no switch
    m.now = 5
    next(table[Events.WORKEND])
    assert m.calls == ["dump"]
    m.now = 10
    next(table[Events.WORKBEGIN])
    m.now = 20
    next(table[Events.WORKEND])
    assert m.calls == ["dump", "switch", "reset", "dump", "post-roi cpu"]
    rec = _state(tmp_path)
    assert rec["state"] == "post_roi" and rec["events"][-1]["event"] == "post_roi_cpu"
    assert rec["roi"]["ticks"] == 10
    next(table[Events.WORKBEGIN])
    next(table[Events.WORKEND])
    assert m.calls.count("post-roi cpu") == 1


def test_the_guest_and_gem5_agree_on_the_work_ids() -> None:
    import mix_run  # noqa: PLC0415 - guest code, imported only here
    import parsec_catalog  # noqa: PLC0415

    assert mix_run.WARM_WORK_ID == WARM_WORK_ID
    ids = {ROI_WORK_ID, SAMPLE_WORK_ID, WARM_WORK_ID, parsec_catalog.PARSEC_WORK_ID}
    assert len(ids) == 4


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "missing"),
        ("{not json", "unreadable"),
        ("[1, 2, 3]", "no ROI"),
        ('{"roi": null}', "no ROI"),
        ('{"roi": {"begin_tick": 5, "end_tick": null}}', "never closed"),
        ('{"roi": {"stats_dump_index": -1}}', "never closed"),
        ('{"roi": {"stats_dump_index": true}}', "never closed"),
    ],
)
def test_an_unknown_roi_is_an_error_never_a_fallback(
    tmp_path: Path, content: str | None, match: str
) -> None:
    if content is not None:
        (tmp_path / ROI_RECORD_NAME).write_text(content)
    with pytest.raises(RoiUnknown, match=f"ROI unknown: .*{match}"):
        roi_stats_dump_index(tmp_path)


def test_boot_run_saves_the_checkpoint_and_stops(tmp_path: Path) -> None:
    m = Machine()
    proto = m.protocol(tmp_path, take=tmp_path / "cpt")
    table = proto.handlers(Events)
    assert next(table[Events.CHECKPOINT]) is True
    assert m.calls == ["checkpoint cpt"]
    assert proto.state is RunState.CHECKPOINTED and proto.exit_code() == 0


@pytest.mark.parametrize(
    ("event", "state", "code"),
    [
        (Events.MAX_TICK, RunState.MAX_TICK, 2),
        (Events.KERNEL_PANIC, RunState.KERNEL_PANIC, 1),
        (Events.FAIL, RunState.FAILED, 1),
    ],
)
def test_abnormal_stops(tmp_path: Path, event: Events, state: RunState, code: int) -> None:
    proto = Machine().protocol(tmp_path, take=None, switch=False)
    assert next(proto.handlers(Events)[event]) is True
    assert proto.state is state and proto.exit_code() == code
    assert _state(tmp_path)["state"] == state.value


def test_a_run_that_never_exits_is_not_a_success(tmp_path: Path) -> None:
    proto = Machine().protocol(tmp_path, take=None)
    next(proto.handlers(Events)[Events.WORKBEGIN])
    assert proto.exit_code() == 1


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    options.add_topology_args(p)
    return p.parse_args(list(argv))


def test_flags_build_the_topology() -> None:
    topo = options.topology_from_args(
        _args("--sockets", "2", "--cores-per-socket", "3", "--mem-per-node", "1GiB",
              "--link-latency", "40", "--no-probe-filter", "--calibration", "none")
    )  # fmt: skip
    assert (topo.sockets, topo.cores_per_socket, topo.mem_per_node) == (2, 3, 1 << 30)
    assert topo.link_latency().cycles == 40 and not topo.probe_filter
    assert topo.calibration is None


def test_the_run_scripts_accept_every_inter_socket_layout() -> None:
    """g34 is a spec value (preset paper-8node): the gem5 scripts must take it too."""
    topo = options.topology_from_args(
        _args("--sockets", "8", "--cores-per-socket", "1", "--inter-socket", "g34",
              "--link-latency", "40", "--calibration", "none")
    )  # fmt: skip
    assert topo.inter_socket == "g34" and max(max(r) for r in topo.slit()) > 16


def test_a_bad_topology_ends_with_a_message_and_a_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """gem5's main aborts on a string SystemExit code and loses the message."""
    with pytest.raises(SystemExit) as ei:
        options.topology_or_exit(_args("--sockets", "9", "--calibration", "none"))
    assert ei.value.code == 2
    assert "invalid topology" in capsys.readouterr().err


def test_bad_flags_name_the_parameter(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cores_per_socket"):
        options.topology_from_args(_args("--cores-per-socket", "17"))
    bad = tmp_path / "cal.csv"
    bad.write_text("link_latency_cycles,measured_numa_factor\n10,1.5\n20,1.4\n")
    with pytest.raises(TopologyError, match="calibration"):
        options.topology_from_args(_args("--calibration", str(bad)))


def test_the_shipped_calibration_applies_only_to_the_machine_it_was_measured_on() -> None:
    """The 4x1 bw160 table was measured on 4 x 1 cores at 2.8 GHz, probe filter on, with
    gem5's 16 B/cycle links: used there, refused on any other machine (naming the
    condition). The default 4 x 1 machine (HT3 links) has its own table since 2026-12-07."""
    path = options.CALIBRATION_DIR / "4x1-2800MHz-pf1-bw160-DDR3_1600_8x8-full.csv"
    table = options.load_calibration(path)
    assert table is not None and dict(table.conditions)["cores_per_socket"] == "1"
    measured_on = ("--sockets", "4", "--cores-per-socket", "1", "--link-bandwidth", "44.8")
    topo = options.topology_from_args(_args(*measured_on, "--numa-factor", "1.6"))
    assert topo.link_latency().source == str(path)
    for other, condition in (
        (("--cores-per-socket", "2", "--link-bandwidth", "44.8"), "cores_per_socket"),
        (("--cores-per-socket", "1", "--link-bandwidth", "25.6"), "link_bandwidth_factor"),
        (("--cores-per-socket", "1", "--link-bandwidth", "44.8", "--no-probe-filter"),
         "probe_filter"),
        (("--cores-per-socket", "1", "--link-bandwidth", "44.8", "--cpu-clock", "2GHz"),
         "cpu_clock_hz"),
    ):  # fmt: skip
        args = ("--sockets", "4", *other, "--numa-factor", "1.6")
        with pytest.raises(TopologyError, match=f"calibration: no table .*{condition}="):
            options.topology_from_args(_args(*args))
        # and that table, forced on this machine, is refused naming the condition
        with pytest.raises(TopologyError, match=f"calibration: .*measured with {condition}="):
            options.topology_from_args(_args(*args, "--calibration", str(path)))
        # a link latency given in cycles needs no table
        assert options.topology_from_args(_args("--sockets", "4", *other, "--link-latency", "40"))
    # the uncalibrated model stays available, and says so
    model = options.topology_from_args(_args("--calibration", "none", "--numa-factor", "1.6"))
    assert model.link_latency().source == "first-order model (uncalibrated)"
    # what the sweep uses to describe a machine: the table only where it applies
    assert options.calibration_for(sockets=4, cores_per_socket=4) is None
    assert options.calibration_for(sockets=4, cores_per_socket=1, link_bandwidth=44.8) == table
    # the 4x2 table (HT3 link bandwidth) serves 4x2 only, never the 4x1 one
    t42 = options.calibration_for(sockets=4, cores_per_socket=2)
    assert t42 is not None and t42 != table
    # the default 4 x 1 machine (HT3 links) resolves with its own (transferred) table
    t41 = options.calibration_for(sockets=4, cores_per_socket=1)
    assert t41 is not None and t41 != table and "bw46" in t41.source
    assert dict(t42.conditions)["cores_per_socket"] == "2"


def test_link_bandwidth_defaults_to_hypertransport_3() -> None:
    from numa_lb.topology import Topology  # noqa: PLC0415

    t = Topology()
    assert t.link_bandwidth_gbps == 12.8
    assert t.link_bandwidth_factor == 46  # 4.6 B per 2.8 GHz cycle
    assert abs(t.link_bandwidth_resolved_gbps - 12.88) < 1e-9
    assert Topology(link_bandwidth_gbps=44.8).link_bandwidth_factor == 160  # gem5's 16 B/cycle
    assert Topology.from_options(link_bandwidth="6.4GB/s").link_bandwidth_gbps == 6.4
    for bad in (0, -1, 5000, "fast"):
        with pytest.raises(TopologyError, match="link_bandwidth"):
            Topology.from_options(link_bandwidth=bad)


def test_the_simulated_time_cap_is_absolute(tmp_path: Path) -> None:
    """gem5 re-arms max_ticks relative to 'now' after every exit event: we re-arm the rest."""
    m = Machine()
    armed: list[int] = []
    proto = RoiProtocol(
        outdir=tmp_path, tick=m.tick, reset_stats=lambda: None, dump_stats=lambda: None,
        switch_cpus=None, save_checkpoint=lambda p: None, take_checkpoint=None,
        tick_limit=1_000, set_max_ticks=armed.append,
    )  # fmt: skip
    table = proto.handlers(Events)
    m.now = 400
    assert next(table[Events.WORKBEGIN]) is False and armed == [600]
    m.now = 900
    assert next(table[Events.CHECKPOINT]) is False and armed == [600, 100]
    m.now = 1_000  # a work item exactly at the limit: the run stops there
    assert next(table[Events.WORKEND]) is True
    assert proto.state is RunState.MAX_TICK and proto.exit_code() == 2
    assert _state(tmp_path)["events"][-1]["event"] == "max_tick"


def test_checkpoint_tick_reads_the_globals_section(tmp_path: Path) -> None:
    from numa_lb.roi import checkpoint_tick  # noqa: PLC0415

    # the layout gem5 v24 writes: Root::serialize puts curTick in root.globals
    (tmp_path / "m5.cpt").write_text(
        "## checkpoint generated: Mon Nov 23 2026\n\n[root]\nFullSystem=1\n\n"
        "[root.globals]\ncurTick=930189039423\nversion_tags=arm-ccregs\n\n"
        "[board.processor.start0.core]\ncurTick=5\n"
    )
    assert checkpoint_tick(tmp_path) == 930189039423
    (tmp_path / "m5.cpt").write_text("[root]\nFullSystem=1\n")
    with pytest.raises(ValueError, match="curTick"):
        checkpoint_tick(tmp_path)


def test_a_restore_must_keep_what_the_boot_fixed() -> None:
    from numa_lb.topology import BOOT_FIELDS, Topology, boot_mismatch  # noqa: PLC0415

    boot = json.loads(json.dumps(Topology(sockets=4, cores_per_socket=1,
                                          slit_remote_distance=16).to_record()))  # fmt: skip
    assert set(BOOT_FIELDS) <= boot.keys()
    # another NUMA factor with the SLIT held, other caches: allowed
    same = Topology(sockets=4, cores_per_socket=1, slit_remote_distance=16, numa_factor=2.5,
                    probe_filter=False)  # fmt: skip
    assert boot_mismatch(boot, same.to_record()) is None
    for other, field in (
        (Topology(sockets=4, cores_per_socket=2, slit_remote_distance=16), "cores_per_socket"),
        (Topology(sockets=4, cores_per_socket=1, slit_remote_distance=16,
                  cpu_clock_hz=2_000_000_000), "cpu_clock_hz"),
        (Topology(sockets=4, cores_per_socket=1, slit_remote_distance=20), "slit"),
        (Topology(sockets=4, cores_per_socket=1, slit_remote_distance=16,
                  mem_per_node=256 << 20), "mem_per_node"),
    ):  # fmt: skip
        why = boot_mismatch(boot, other.to_record())
        assert why is not None and why.startswith(field + ":"), why


def _no_busy_stat() -> None:
    """What the counter bridge raised on the O3 CPU (2026-11-25)."""
    raise KeyError("no notIdleFraction under board.processor.switch0.core")


def test_a_failing_handler_stops_the_run_recorded_instead_of_gem5s_default(tmp_path: Path) -> None:
    # gem5 24's Simulator would take this KeyError for "no handler" and quietly
    # reset the statistics itself: the ROI start lost (O3 runs, 2026-11-25)
    m = Machine()
    proto = m.protocol(tmp_path, take=None)
    proto._reset_stats = _no_busy_stat
    table = proto.handlers(Events)
    m.now, m.work_id = 10, 1
    assert next(table[Events.WORKBEGIN]) is True  # stop the simulation
    rec = _state(tmp_path)
    assert rec["state"] == "failed" and proto.exit_code() == 1
    err = rec["events"][-1]
    assert err["event"] == "handler_error" and "KeyError" in err["error"]
    assert "notIdleFraction" in err["traceback"]
    assert next(table[Events.WORKBEGIN]) is True  # and at any later event of that kind


def test_a_counter_bridge_that_cannot_read_the_cpu_does_not_cost_the_roi(tmp_path: Path) -> None:
    m = Machine()
    proto = m.protocol(tmp_path, take=None)
    proto._before_reset = _no_busy_stat
    table = proto.handlers(Events)
    m.now, m.work_id = 10, 1
    assert next(table[Events.WORKBEGIN]) is False
    rec = _state(tmp_path)
    assert [e["event"] for e in rec["events"]] == ["bridge_error", "workbegin"]
    assert rec["state"] == "roi" and rec["roi"]["begin_tick"] == 10
