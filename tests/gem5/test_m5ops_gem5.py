"""gem5 tier for workloads/m5ops: execute every op under real gem5 (SE mode).

Runs only when GEM5 names a gem5 binary (v24.0.0.1, X86, any Ruby protocol:
the SE board here uses no caches). A static driver linked with libm5ops.a
calls probe, sum, writefile, readfile, resetstats, dumpstats, work
begin/end, checkpoint and exit in one process; the gem5 script records each
exit event, and the test checks gem5's output directory: the written file,
the stats dumps and the final exit cause.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.cache import default_gem5

pytestmark = pytest.mark.gem5

REPO = Path(__file__).resolve().parents[2]
M5DIR = REPO / "workloads" / "m5ops"
GEM5 = default_gem5()[0] or ""  # $GEM5, else the cached build (analysis/cache.py)

DRIVER = r"""
#include "m5ops.h"
#include <stdio.h>
#include <string.h>

int main(void)
{
    const char *why;
    char buf[4096];
    uint64_t n;

    printf("probe=%d\n", (int)m5_probe(&why));
    printf("sum=%llu\n", (unsigned long long)m5_sum(1, 2, 3, 4, 5, 6));
    printf("wf1=%llu\n", (unsigned long long)m5_write_file("hello gem5\n", 11, 0,
           "m5ops-writefile.txt"));
    printf("wf2=%llu\n", (unsigned long long)m5_write_file("second\n", 7, 11,
           "m5ops-writefile.txt"));
    memset(buf, 0, sizeof(buf));
    n = m5_read_file(buf, sizeof(buf) - 1, 0);
    printf("read=%llu:%s|\n", (unsigned long long)n, buf);
    fflush(stdout);
    m5_reset_stats(0, 0);
    m5_dump_stats(0, 0);
    m5_dump_reset_stats(0, 0);
    m5_work_begin(7, 0);
    m5_work_end(7, 0);
    m5_checkpoint(0, 0);
    printf("before-exit\n");
    fflush(stdout);
    m5_exit(0);
    printf("after-exit\n");    /* never printed: gem5 stops at m5_exit */
    return 0;
}
"""

CONFIG = r"""
import sys
from gem5.components.boards.simple_board import SimpleBoard
from gem5.components.cachehierarchies.classic.no_cache import NoCache
from gem5.components.memory.single_channel import SingleChannelDDR3_1600
from gem5.components.processors.cpu_types import CPUTypes
from gem5.components.processors.simple_processor import SimpleProcessor
from gem5.isas import ISA
from gem5.resources.resource import BinaryResource
from gem5.simulate.exit_event import ExitEvent
from gem5.simulate.simulator import Simulator

driver, readfile = sys.argv[1], sys.argv[2]
board = SimpleBoard(
    clk_freq="1GHz",
    processor=SimpleProcessor(cpu_type=CPUTypes.ATOMIC, isa=ISA.X86, num_cores=1),
    memory=SingleChannelDDR3_1600("512MiB"),
    cache_hierarchy=NoCache(),
)
board.set_se_binary_workload(BinaryResource(driver), env_list=["M5OPS_NO_MLOCK=1"])
board.readfile = readfile

def note(name):
    while True:
        print("EVENT " + name, flush=True)
        yield False  # keep simulating

sim = Simulator(
    board=board,
    on_exit_event={
        ExitEvent.WORKBEGIN: note("workbegin"),
        ExitEvent.WORKEND: note("workend"),
        ExitEvent.CHECKPOINT: note("checkpoint"),
    },
)
sim.run()
print("CAUSE " + sim.get_last_exit_event_cause(), flush=True)
"""


def test_all_ops_under_gem5(tmp_path: Path) -> None:
    if not GEM5 or not os.access(GEM5, os.X_OK):
        pytest.skip("SKIPPED gem5-m5ops: " + default_gem5()[1])
    if shutil.which("gcc") is None:
        pytest.skip("SKIPPED gem5-m5ops: gcc not found")
    build = tmp_path / "m5"
    subprocess.run(["make", "-C", str(M5DIR), f"O={build}"], check=True, capture_output=True)
    (tmp_path / "driver.c").write_text(DRIVER)
    subprocess.run(
        ["gcc", "-O2", "-static", "-I", str(M5DIR), "-o", str(tmp_path / "driver"),
         str(tmp_path / "driver.c"), str(build / "libm5ops.a")],
        check=True, capture_output=True,
    )  # fmt: skip
    (tmp_path / "cfg.py").write_text(CONFIG)
    (tmp_path / "host-readfile").write_text("job from the host\n")
    outdir = tmp_path / "m5out"
    p = subprocess.run(
        [GEM5, "-d", str(outdir), str(tmp_path / "cfg.py"), str(tmp_path / "driver"),
         str(tmp_path / "host-readfile")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-4000:]
    assert "probe=1" in log and "sum=21" in log
    assert "wf1=11" in log and "wf2=7" in log
    assert "read=18:job from the host\n|" in log
    for ev in ("EVENT workbegin", "EVENT workend", "EVENT checkpoint"):
        assert ev in log, ev
    assert "before-exit" in log and "after-exit" not in log
    assert "CAUSE m5_exit instruction encountered" in log
    assert (outdir / "m5ops-writefile.txt").read_text() == "hello gem5\nsecond\n"
    stats = (outdir / "stats.txt").read_text()
    assert stats.count("Begin Simulation Statistics") >= 2  # dumpstats + dumpresetstats
