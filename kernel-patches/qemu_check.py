#!/usr/bin/env python3
"""Boot the patched kernel as a 4-node NUMA guest under QEMU and exercise it.

    kernel-patches/qemu_check.py run   [--variant V] [--policies a,b] [--seconds N]
    kernel-patches/qemu_check.py bench [--variant V] [--seconds N]
    kernel-patches/qemu_check.py faultbench [--threads 1,4,8] [--rounds N]

The guest is qemu-system-x86_64 (TCG: KVM guests hang on these machines) with
4 NUMA nodes x 2 vCPUs and SLIT distances 10/16, booting an initramfs made of
Debian's busybox-static, guest/init.sh and guest/numa_lb_stress.c.  init.sh
switches kernel.sched_numa_lb_policy at run time, runs a multithreaded mix
under every policy and prints tagged lines on the serial console, which
parse_console() turns into a GuestRun.  Before the mix it makes the sysctl
writes whose results the kernel documents (SYSCTL_WRITES) and checks the
access rules of /proc/<pid>/numa_lb_migrations and numa_lb_threads; after it,
the accounting program checks numa_rss and numa_lb_threads on every path,
and one program runs with NUMA balancing on so that page migrations are
counted.

`run` prints a summary and exits non-zero when a check fails; the pytest tier
(tests/kernel/test_qemu_numa.py) asserts the same checks one by one.
`bench` runs a mix with 8+ runnable tasks per CPU and prints, per policy, the
nanoseconds and tasks evaluated per cross-node balance pass as a ratio to
`default` measured in the same boot.  QEMU TCG timing is functional, not
architectural: the ratios compare code paths, not NUMA performance.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "configs"))
from numa_lb.kernel_cmdline import QEMU_TIMER_ARGS  # noqa: E402
from numa_lb.qemu import cpulist, guest_topology, qemu_args  # noqa: E402
from numa_lb.topology import Topology  # noqa: E402 - one machine description (configs/)

GUEST = HERE / "guest"
POLICIES = ("default", "tm", "mb", "bce", "mbplus", "excl_base", "excl",
            "null", "mbplus_ff", "excl_ff")  # fmt: skip
STAT_FIELDS = (
    "attempts",
    "visited",
    "rejected",
    "evaluated",
    "taken_leader_dst",
    "skipped_leader",
    "skipped_leader_src",
    "skipped_seen",
    "migrated",
    "picked_none",
    "active_moved",
    "active_leader",
    "select_ns",
    "detach_ns",
    "unfit",  # patch 0015: ranked, left for the imbalance
    "pass_max_ns",  # patch 0016; a maximum, not a counter
    "pinned_late",  # patch 0018: pinned looks after a movable task
    "fallback_taken",  # patch 0020: moved by mbplus_ff/excl_ff's first fit
)
# /proc/<pid>/numa_lb_migrations, in file order
MIGRATION_KEYS = (
    "migrations",
    "migrations_xnode",
    "balance",
    "balance_xnode",
    "active_balance",
    "active_balance_xnode",
    "wakeup",
    "wakeup_xnode",
    "numa_balancing",
    "numa_balancing_xnode",
    "numa_swap",
    "numa_swap_xnode",
    "other",
    "other_xnode",
    "numa_pages_migrated",
)
# Writes to kernel.sched_numa_lb_policy the guest makes while the policy is
# mb (guest/numa_lb_stress.c sysctl_cases[]) and their documented result;
# all but "newline" must leave the policy unchanged.
SYSCTL_WRITES = {
    "empty": "EINVAL",  # write(fd, "", 0)
    "4k": "EINVAL",  # 4096 bytes
    "upper": "EINVAL",  # "EXCL": names are lower case
    "offset": "EINVAL",  # "excl" at file offset 1
    "nul": "EINVAL",  # "tm\0"
    "tail": "EINVAL",  # "tm\nx": nothing may follow the newline
    "newline": "ok",  # "excl\n": one trailing newline is fine
}
# kernel.numa_lb_m5_switch (patch 0024) on a QEMU boot, which has no numa_lb_m5=1
M5_SWITCH_WANT = {
    "m5_initial": "0", "m5_mode": "644", "m5_on": "ENODEV", "m5_two": "EINVAL",
    "m5_off": "ok", "m5_unprivileged": "EACCES", "m5_after": "0",
}  # fmt: skip
KMSG_TAIL = re.compile(r"\[\s*\d+\.\d{6}\].*$")
SPLAT = re.compile(
    r"WARNING:|BUG:|possible circular locking|inconsistent lock state|"
    r"KASAN|Kernel panic|Oops|Call Trace|Bad numa_rss|Bad numa_lb_threads|Bad rss-counter|UBSAN|"
    r"self-detected stall|detected stalls on CPUs"
)


@dataclass
class GuestRun:
    console: str
    returncode: int
    seconds: float
    topo: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    online: str = ""
    kernel: str = ""
    sysctl: dict[str, str] = field(default_factory=dict)
    policy_set: dict[str, str] = field(default_factory=dict)
    stats_before: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    stats_after: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    stress: list[dict[str, str]] = field(default_factory=list)
    slab: dict[str, dict[str, int]] = field(default_factory=dict)
    access: dict[str, dict[str, str]] = field(default_factory=dict)
    numabal: dict[str, str] = field(default_factory=dict)
    dmesg: list[str] = field(default_factory=list)
    policy_write: dict[str, str] = field(default_factory=dict)  # faultbench boots
    faultbench: list[dict[str, int]] = field(default_factory=list)
    irq_rows: dict[str, list[int]] = field(default_factory=dict)  # /proc/interrupts
    done: bool = False

    def delta(self, policy: str) -> dict[str, int]:
        """Counter changes of @policy's row over the run made under @policy
        (a maximum such as pass_max_ns: its value at the end)."""
        before = self.stats_before[policy][policy]
        after = self.stats_after[policy][policy]
        return {k: after[k] if k.endswith("_max_ns") else after[k] - before[k] for k in STAT_FIELDS}

    def zombies(self, prefix: str = "") -> list[dict[str, str]]:
        """The final numa_lb_migrations of each stress program whose tag starts
        with @prefix, as its parent read it from the zombie."""
        return [
            s for s in self.stress if s.get("check") == "zombie" and s["tag"].startswith(prefix)
        ]

    def splats(self) -> list[str]:
        """Kernel warnings anywhere: on the console (everything printk'd at
        loglevel 7) or in the dmesg dump at the end."""
        return [ln for ln in self.console.splitlines() if SPLAT.search(ln)]


TAGGED = re.compile(
    r"(TOPO|KERNEL|SLAB|SYSCTL|ACCESS|POLICY|STATS_BEFORE|STATS_AFTER|STRESS|"
    r"NUMABAL|DMESG|POLICYWRITE|FAULTBENCH|IRQROW|GUEST DONE)"
    r"( .*)?$"
)


def tagged_lines(text: str) -> list[tuple[str, str]]:
    """(tag, rest) of each of our lines.  Kernel printk lines may interleave
    with ours on the console: a printk that lands in the middle of our line
    is cut off, and the rest of our line, which the console then puts on the
    next line, is joined back."""
    out: list[tuple[str, str]] = []
    cut = False
    for raw in text.splitlines():
        line = raw.strip("\r")
        m = TAGGED.search(line)
        if not m:
            if cut and line.strip() and not line.lstrip().startswith("["):
                tag, rest = out[-1]
                out[-1] = (tag, rest + line.strip())
            cut = False
            continue
        tag, rest = m.group(1), (m.group(2) or "").strip()
        cut = False
        if tag != "DMESG":
            kept = KMSG_TAIL.sub("", rest)
            cut = kept != rest
            rest = kept if cut else rest.strip()
        out.append((tag, rest))
    return out


def parse_console(text: str) -> GuestRun:
    run = GuestRun(console=text, returncode=0, seconds=0.0)
    header = list(STAT_FIELDS)
    for tag, rest in tagged_lines(text):
        rest = rest.strip()
        if tag == "TOPO":
            kv = dict(w.split("=", 1) for w in rest.split())
            if "online" in kv:
                run.online = kv["online"]
            else:
                dist = [int(x) for x in kv["distance"].split(",") if x]
                run.topo[int(kv["node"])] = (kv["cpus"], dist)
        elif tag == "KERNEL":
            run.kernel = rest
        elif tag == "SLAB":
            name, *kv = rest.split()
            run.slab[name] = {k: int(v) for k, v in (w.split("=", 1) for w in kv)}
        elif tag == "SYSCTL":
            run.sysctl.update(w.split("=", 1) for w in rest.split() if "=" in w)
        elif tag == "ACCESS":
            kv = dict(w.split("=", 1) for w in rest.split() if "=" in w)
            run.access[kv.pop("file", "")] = kv
        elif tag == "NUMABAL":
            run.numabal.update(w.split("=", 1) for w in rest.split() if "=" in w)
        elif tag == "POLICY":
            name, setting = rest.split()
            run.policy_set[name] = setting.split("=", 1)[1]
        elif tag in ("STATS_BEFORE", "STATS_AFTER"):
            words = rest.split()
            if len(words) >= 3 and words[1] == "policy":
                header = words[2:]  # the file names its columns
                continue
            if len(words) < 3 or not all(w.isdigit() for w in words[2:]):
                continue  # "# current" lines
            under, row = words[0], words[1]
            vals = dict(zip(header, (int(x) for x in words[2:]), strict=False))
            target = run.stats_before if tag == "STATS_BEFORE" else run.stats_after
            # columns an older kernel lacks read as 0
            target.setdefault(under, {})[row] = {k: vals.get(k, 0) for k in STAT_FIELDS}
        elif tag == "STRESS":
            words = rest.split()
            rec = {"tag": words[0]}
            rec.update(w.split("=", 1) if "=" in w else (w, "") for w in words[1:])
            run.stress.append(rec)
        elif tag == "POLICYWRITE":
            run.policy_write.update(w.split("=", 1) for w in rest.split() if "=" in w)
        elif tag == "FAULTBENCH":
            kv = dict(w.split("=", 1) for w in rest.split() if "=" in w)
            run.faultbench.append({k: int(float(v)) for k, v in kv.items()})
        elif tag == "IRQROW":
            name, *counts = rest.split()
            run.irq_rows[name] = [int(c) for c in counts if c.isdigit()]
        elif tag == "DMESG":
            run.dmesg.append(rest)
        elif tag == "GUEST DONE":
            run.done = True
    return run


def build_initramfs(dest: Path) -> Path:
    """busybox + init + the stress program, as a gzipped newc cpio."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not Path(busybox).exists():
        raise RuntimeError("busybox not found: install Debian's busybox-static (.ci/setup does)")
    root = dest / "root"
    for d in ("bin", "proc", "sys", "dev", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(busybox, root / "bin/busybox")
    shutil.copy2(GUEST / "init.sh", root / "init")
    os.chmod(root / "init", 0o755)
    for prog in ("numa_lb_stress", "fault_bench"):
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-static", "-pthread"]
            + ["-o", str(root / "bin" / prog), str(GUEST / f"{prog}.c")],
            check=True,
        )
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    cpio = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"],
        input="\n".join(files).encode(),
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    out = dest / "initramfs.cpio.gz"
    out.write_bytes(gzip.compress(cpio))
    return out


def kernel_dir(variant: str) -> Path:
    """The cached build of the current series (built on demand)."""
    sys.path.insert(0, str(HERE))
    import kbuild  # noqa: PLC0415 - sibling tool, not a package

    return kbuild.build(variant, None)


def boot(
    bzimage: Path,
    policies: list[str],
    mix: str,
    seconds: int,
    topo: Topology | None = None,
    timeout: int = 600,
    extra_append: str = "",
    crowd: list[str] | tuple[str, ...] = (),
) -> GuestRun:
    """Boot the test guest: each of @policies under the stress @mix for @seconds,
    then the crowd checks (init.sh) under each policy of @crowd."""
    topo = topo or guest_topology()
    unknown = [p for p in [*policies, *crowd] if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policy {unknown}; allowed: {', '.join(POLICIES)}")
    if not re.fullmatch(r"\d+:\d+(,\d+:\d+)*", mix):
        raise ValueError(f"mix must be threads:MiB[,threads:MiB...], got {mix!r}")
    append = (
        f"numa_lb_test.policies={','.join(policies)} numa_lb_test.mix={mix} "
        f"numa_lb_test.seconds={seconds} {extra_append}"
    )
    if crowd:
        append += f" numa_lb_test.crowd={','.join(crowd)}"
    return boot_initramfs(bzimage, append, topo, timeout)


def initramfs_append(test_args: str) -> str:
    """The test guest's command line (the study's QEMU timer arguments too)."""
    timer = " ".join(QEMU_TIMER_ARGS)
    return f"console=ttyS0 panic=-1 oops=panic loglevel=7 {timer} {test_args}".strip()


def boot_initramfs(bzimage: Path, test_args: str, topo: Topology, timeout: int) -> GuestRun:
    """Boot @bzimage on the test initramfs with numa_lb_test.* @test_args."""
    with tempfile.TemporaryDirectory(prefix="numa-lb-qemu-") as tmp:
        initrd = build_initramfs(Path(tmp))
        append = initramfs_append(test_args)
        cmd = [
            "qemu-system-x86_64",
            "-M",
            "pc",
            "-accel",
            "tcg,thread=multi",
            "-cpu",
            "max",
            *qemu_args(topo),
            "-kernel",
            str(bzimage),
            "-initrd",
            str(initrd),
            "-append",
            append,
            "-nographic",
            "-no-reboot",
            "-serial",
            "mon:stdio",
        ]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
            out, rc = proc.stdout.decode(errors="replace"), proc.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") + "\n[host: QEMU timed out]\n"
            rc = -1
        run = parse_console(out)
        run.returncode = rc
        run.seconds = time.monotonic() - t0
        return run


def sysctl_problems(run: GuestRun) -> list[str]:
    """The documented result of each write to kernel.sched_numa_lb_policy."""
    bad = []
    if run.sysctl.get("invalid") != "rejected" or run.sysctl.get("after") != "default":
        bad.append(f"invalid sysctl write not rejected cleanly: {run.sysctl}")
    for case, want in SYSCTL_WRITES.items():
        got = run.sysctl.get(f"write_{case}")
        after = run.sysctl.get(f"after_{case}")
        want_after = "excl" if case == "newline" else "mb"
        if got != want or after != want_after:
            bad.append(
                f"sysctl write {case}: {got} (want {want}), policy after {after} "
                f"(want {want_after})"
            )
    if run.sysctl.get("unprivileged") != "EACCES":
        bad.append(f"unprivileged sysctl open: {run.sysctl.get('unprivileged')}")
    if run.sysctl.get("after_unprivileged") != "mb":
        bad.append(f"unprivileged write changed the policy: {run.sysctl}")
    if run.sysctl.get("reset") != "default":
        bad.append(f"policy not back to default: {run.sysctl.get('reset')}")
    m5 = {k: run.sysctl.get(k) for k in M5_SWITCH_WANT}
    if m5 != M5_SWITCH_WANT:
        bad.append(f"kernel.numa_lb_m5_switch: {m5} (want {M5_SWITCH_WANT})")
    return bad


def migration_problems(run: GuestRun, policies: list[str]) -> list[str]:
    """/proc/<pid>/numa_lb_migrations: access rules, per-program checks, and
    the programs' cross-node moves against the policy counters."""
    bad = []
    for f in ("numa_lb_migrations", "numa_lb_threads", "numa_rss", "numa_maps"):
        if run.access.get(f) != {"open": "EACCES", "held": "ok"}:
            bad.append(
                f"/proc/1/{f} as nobody: {run.access.get(f)} (want EACCES at open, "
                "a file opened before dropping privileges readable)"
            )
    if run.access.get("after_exec") != {"before": "ok", "after": "EACCES"}:
        bad.append(f"numa_lb_migrations across execve: {run.access.get('after_exec')}")
    zombies = run.zombies()
    if not zombies:
        bad.append("no numa_lb_migrations read from a zombie")
    for z in zombies:
        if z.get("ok") != "1" or any(k not in z for k in MIGRATION_KEYS):
            bad.append(f"numa_lb_migrations of {z['tag']}: {z}")
    bad += thread_count_problems(run)
    for p in policies:
        if p not in run.stats_after:
            continue
        d = run.delta(p)
        zs = run.zombies(f"{p}-")
        for key, stat in (("balance_xnode", "migrated"), ("active_balance_xnode", "active_moved")):
            moved = sum(int(z.get(key, 0)) for z in zs)
            if moved > d[stat]:
                bad.append(f"policy {p}: programs' {key} {moved} > {stat} {d[stat]}")
    for s in run.stress:
        if s.get("check") in ("migrations", "cumulative", "numa_pages") and s.get("ok") != "1":
            bad.append(f"numa_lb_migrations check failed: {s}")
    nb = run.zombies("numabal-")
    if run.numabal and nb:
        vm = int(run.numabal.get("vmstat_numa_pages_migrated", "0"))
        mine = int(nb[0].get("numa_pages_migrated", "0"))
        if mine > vm or (vm > 0 and mine == 0):
            bad.append(f"numa_pages_migrated {mine} vs /proc/vmstat numa_pages_migrated +{vm}")
    elif not nb:
        bad.append("the NUMA-balancing program did not run")
    return bad


# guest/numa_lb_stress.c accounting: kMLB against the pages' real nodes
ACCOUNTING_CHECKS = (
    "move_pages", "migrate_pages", "cow", "cow_parent", "storm", "thp", "ksm", "acct_munmap",
    "threads_storm", "threads_fork",  # /proc/<pid>/numa_lb_threads (patch 0017)
)  # fmt: skip


def accounting_problems(run: GuestRun) -> list[str]:
    """Every accounting path check reported once, and passed."""
    got = {s["check"]: s for s in run.stress if s.get("tag") == "acct-0" and "check" in s}
    bad = [f"accounting check {c} not reported" for c in ACCOUNTING_CHECKS if c not in got]
    bad += [
        f"accounting check {c} failed: {got[c]}"
        for c in ACCOUNTING_CHECKS
        if c in got and got[c].get("ok") != "1"
    ]
    return bad


def thread_count_problems(run: GuestRun) -> list[str]:
    """/proc/<pid>/numa_lb_threads (patch 0017): every zombie counts no
    thread, and every stress program's counts after its workers were joined
    are its one thread, on the node it is on.  (The storm and fork checks
    are accounting checks.)"""
    bad = []
    zombies = run.zombies()
    for z in zombies:
        if z.get("threads_left") != "0":
            bad.append(f"zombie {z['tag']} still counts threads: {z.get('threads_left')}")
    joined = [s for s in run.stress if s.get("check") == "threads_joined"]
    stress_programs = [z for z in zombies if not z["tag"].startswith(("acct-", "numabal-"))]
    if len(joined) != len(stress_programs):
        bad.append(
            f"{len(joined)} numa_lb_threads checks after the join, "
            f"expected {len(stress_programs)} (one per stress program)"
        )
    bad += [f"numa_lb_threads after the join: {s}" for s in joined if s.get("ok") != "1"]
    return bad


# The crowd checks: a CPU stuck in a balancing softirq shows as a hang or a
# long gap in the 10 ms wake-ups of a task on another CPU; TCG with 8 vCPUs on
# a loaded 2-core host stretches a normal gap to a few hundred ms.
CROWD_MAX_GAP_MS = 5000


def crowd_problems(run: GuestRun, crowd: list[str]) -> list[str]:
    """Each crowd policy: the pinned crowd (more tasks than the balancer's window,
    none movable) and the free one (nr_migrate 64) ran to the end, no long gap."""
    bad = []
    for p in crowd:
        for mode in ("pinned", "free"):
            recs = [s for s in run.stress if s["tag"] == f"crowd-{mode}-{p}"]
            if len(recs) != 1:
                bad.append(f"crowd {mode} under {p}: {len(recs)} reports")
                continue
            r = recs[0]
            if r.get("ok") != "1" or float(r.get("max_gap_ms", "inf")) > CROWD_MAX_GAP_MS:
                bad.append(f"crowd {mode} under {p}: {r}")
    return bad


def idle_hlt_problems(run: GuestRun, topo: Topology) -> list[str]:
    """Patch 0025 steps over an idle HLT only when an interrupt was taken
    between its STI and the HLT, which a CPU that models STI's interrupt
    shadow (QEMU, hardware) never does: the HLT row is there, one 0 per CPU,
    and the rescheduling IPIs it could have acted on did happen."""
    ncpu = topo.ncpus
    hlt, res = run.irq_rows.get("HLT"), run.irq_rows.get("RES")
    if hlt is None or len(hlt) != ncpu:
        return [f"/proc/interrupts HLT row: {hlt} (want {ncpu} counts)"]
    bad = []
    if any(hlt):
        bad.append(f"idle HLT stepped over under QEMU (STI shadow modelled): {hlt}")
    if not res or sum(res) <= 0:
        bad.append(f"no rescheduling IPIs counted (RES {res}): the HLT check saw no wake-up")
    return bad


def problems(
    run: GuestRun, policies: list[str], topo: Topology, crowd: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """Every check of the kernel's QEMU test, as readable failures."""
    bad = []
    if not run.done:
        bad.append(
            f"guest did not finish (rc {run.returncode}); console tail:\n{run.console[-3000:]}"
        )
        return bad
    want = {n: (cpulist(topo, n), topo.slit()[n]) for n in range(topo.sockets)}
    if run.topo != want:
        bad.append(f"topology {run.topo} != {want}")
    bad += sysctl_problems(run)
    for p in policies:
        if run.policy_set.get(p) != p:
            bad.append(f"policy {p} read back as {run.policy_set.get(p)}")
            continue
        d = run.delta(p)
        if d["attempts"] <= 0 or d["migrated"] <= 0:
            bad.append(f"policy {p}: no cross-node selections counted: {d}")
        if p != "default" and d["evaluated"] + d["taken_leader_dst"] <= 0:
            bad.append(f"policy {p}: no task evaluated or taken: {d}")
        if d["picked_none"] > d["attempts"] or d["active_leader"] > d["active_moved"]:
            bad.append(f"policy {p}: inconsistent counters: {d}")
        if d["select_ns"] <= 0 or d["detach_ns"] <= 0:
            bad.append(f"policy {p}: selection or detach time not counted: {d}")
        for other in POLICIES:
            if other == p:
                continue
            # attempts move when a pass starts; a pass that straddles the
            # switch (a descheduled vCPU) may still add to other counters
            b, a = run.stats_before[p].get(other), run.stats_after[p].get(other)
            if b is None or a is None:
                bad.append(f"policy {p}: no row for {other} in /proc/sched_numa_lb_stats")
            elif a["attempts"] != b["attempts"]:
                bad.append(f"policy {p} in force but {other}'s counters moved")
    checks = [s for s in run.stress if s.get("check") in ("touched", "running", "joined", "munmap")]
    if not checks:
        bad.append("no numa_rss checks reported")
    for s in checks:
        if s.get("ok") != "1":
            bad.append(f"numa_rss invariant failed: {s}")
    bad += accounting_problems(run)
    bad += migration_problems(run, policies)
    bad += crowd_problems(run, list(crowd))
    bad += idle_hlt_problems(run, topo)
    if run.splats():
        bad.append("kernel splat:\n" + "\n".join(run.splats()[:40]))
    return bad


def cmd_run(args: argparse.Namespace) -> int:
    topo = guest_topology()
    policies = args.policies.split(",")
    kdir = Path(args.kernel) if args.kernel else kernel_dir(args.variant)
    crowd = [c for c in args.crowd.split(",") if c]
    run = boot(kdir / "bzImage", policies, args.mix, args.seconds, topo, crowd=crowd)
    if args.console_out:
        Path(args.console_out).write_text(run.console)
    print(
        f"qemu_check: {run.kernel} booted and ran {len(policies)} policies in {run.seconds:.0f} s"
    )
    for name, sizes in run.slab.items():
        print(f"  slab {name}: " + " ".join(f"{k}={v}" for k, v in sizes.items()))
    for p in policies:
        if p in run.stats_after:
            print(f"  {p:10s} " + " ".join(f"{k}={v}" for k, v in run.delta(p).items()))
    for z in run.zombies():
        print(f"  {z['tag']:12s} " + " ".join(f"{k}={z.get(k)}" for k in MIGRATION_KEYS))
    for s in run.stress:
        if s["tag"].startswith("crowd-"):
            print(f"  {s['tag']:20s} " + " ".join(f"{k}={v}" for k, v in s.items() if k != "tag"))
    for c in crowd:
        for under in (f"crowd-pinned-{c}", f"crowd-free-{c}"):
            if under in run.stats_after and c in run.stats_after[under]:
                b, a = run.stats_before[under][c], run.stats_after[under][c]
                print(f"  {under:20s} " + " ".join(f"{k}={a[k] - b[k]}" for k in STAT_FIELDS))
    if run.numabal:
        print(f"  numa balancing: {run.numabal}")
    bad = problems(run, policies, topo, crowd)
    for b in bad:
        print(f"FAIL: {b}")
    print("qemu_check: " + ("ok" if not bad else f"{len(bad)} problem(s)"))
    return 1 if bad else 0


def print_bench(run: GuestRun, topo: Topology, seconds: int, nr_migrate: int, date: str) -> None:
    """The bench table of one boot: per policy, cross-node passes, ns per pass
    (selection and detach apart, ratio to default), tasks looked at and
    evaluated per pass, moves, empty passes, active moves, the longest pass."""
    runnable = 4 * 16 + 8 * 1
    print(
        f"# overhead: {run.kernel}, QEMU TCG {topo.ncpus} vCPUs in {topo.sockets} nodes, "
        f"{runnable} workers ({runnable / topo.ncpus:.0f} per CPU), {seconds} s per policy, "
        f"sched/nr_migrate {nr_migrate or 'default (32)'}, {date}"
    )
    print(
        f"{'policy':10s} {'passes':>7s} {'ns/pass':>9s} {'select':>8s} {'ratio':>6s} "
        f"{'detach':>8s} {'looked/pass':>11s} {'eval/pass':>9s} {'ratio':>6s} {'moved':>6s} "
        f"{'empty':>6s} {'active':>6s} {'max pass':>9s}"
    )
    base: dict[str, float] = {}
    for p in POLICIES:
        d = run.delta(p)
        passes = max(d["attempts"], 1)
        sel = d["select_ns"] / passes
        det = d["detach_ns"] / passes
        looked = d["visited"] / passes
        # default evaluates by looking: the first movable task is taken
        ev = looked if p == "default" else (d["evaluated"] + d["taken_leader_dst"]) / passes
        if p == "default":
            base = {"sel": sel or 1.0, "ev": ev or 1.0}
        print(
            f"{p:10s} {d['attempts']:7d} {sel + det:9.0f} {sel:8.0f} {sel / base['sel']:6.2f} "
            f"{det:8.0f} {looked:11.2f} {ev:9.2f} {ev / base['ev']:6.2f} {d['migrated']:6d} "
            f"{d['picked_none']:6d} {d['active_moved']:6d} {d['pass_max_ns']:9d}"
        )


def cmd_bench(args: argparse.Namespace) -> int:
    """Per-policy selection cost on one boot, as ratios to default."""
    topo = guest_topology()
    kdir = Path(args.kernel) if args.kernel else kernel_dir(args.variant)
    # 4 multithreaded programs + 8 single-threaded: >= 8 runnable per CPU.
    mix = ",".join(["16:16"] * 4 + ["1:4"] * 8)
    nrm = f"numa_lb_test.nr_migrate={args.nr_migrate}" if args.nr_migrate else ""
    run = boot(
        kdir / "bzImage", list(POLICIES), mix, args.seconds, topo, timeout=1800, extra_append=nrm
    )
    if args.nr_migrate and run.sysctl.get("nr_migrate") != str(args.nr_migrate):
        print(f"qemu_check: sched/nr_migrate not set: {run.sysctl.get('nr_migrate')}")
        return 1
    if args.console_out:
        Path(args.console_out).write_text(run.console)
    bad = problems(run, list(POLICIES), topo)
    if not run.done:
        print("\n".join(bad))
        return 1
    print_bench(run, topo, args.seconds, args.nr_migrate, time.strftime("%Y-%m-%d"))
    if bad:
        print("\n".join(f"note: {b}" for b in bad))
    return 0


FAULT_KERNELS = ("stock", "release", "nokmlb")
RSS_POLICIES = ("tm", "mb", "bce", "mbplus", "mbplus_ff")


def faultbench_boot(bzimage: Path, threads: list[int], seconds: int, reps: int) -> GuestRun:
    """One boot of @bzimage running fault_bench at each thread count, @reps times."""
    args = (
        f"numa_lb_test.faultbench={','.join(map(str, threads))} "
        f"numa_lb_test.seconds={seconds} numa_lb_test.reps={reps}"
    )
    timeout = 300 + 2 * seconds * reps * len(threads)
    return boot_initramfs(bzimage, args, guest_topology(), timeout)


def faultbench_problems(variant: str, run: GuestRun, threads: list[int], reps: int) -> list[str]:
    """What a faultbench boot of @variant must show: every measurement, and
    the policies that kernel offers (stock: no sysctl; nokmlb: the RSS-based
    ones refused with EINVAL and a log line; release: all)."""
    bad = []
    if not run.done:
        bad.append(f"{variant}: guest did not finish (rc {run.returncode})")
    got = sorted((f["threads"], f["rep"]) for f in run.faultbench)
    want = sorted((t, r) for t in threads for r in range(1, reps + 1))
    if got != want:
        bad.append(f"{variant}: FAULTBENCH lines {got}, expected {want}")
    for pol in POLICIES:
        res = run.policy_write.get(pol, "missing")
        if variant == "stock":
            expect = "absent"
        elif variant == "nokmlb" and pol in RSS_POLICIES:
            expect = "Invalid_argument"
        else:
            expect = "ok"
        if res != expect:
            bad.append(f"{variant}: writing {pol} gave {res}, expected {expect}")
    refusals = [ln for ln in run.console.splitlines() if "reads per-node RSS, not tracked" in ln]
    if variant == "nokmlb" and len(refusals) != len(RSS_POLICIES):
        bad.append(f"{variant}: {len(refusals)} refusal log lines, expected {len(RSS_POLICIES)}")
    if variant != "nokmlb" and refusals:
        bad.append(f"{variant}: unexpected refusal log lines {refusals}")
    bad += [f"{variant}: kernel splat: {ln}" for ln in run.splats()]
    return bad


def faultbench_rates(runs: list[GuestRun]) -> dict[int, list[float]]:
    """Faulted pages per second by thread count, over @runs' measurements."""
    rates: dict[int, list[float]] = {}
    for run in runs:
        for f in run.faultbench:
            rates.setdefault(f["threads"], []).append(f["pages"] * 1e9 / f["ns"])
    return rates


def cmd_faultbench(args: argparse.Namespace) -> int:
    """kMLB's cost: page-fault throughput of stock, release and nokmlb kernels,
    the boots interleaved round by round, as cost ratios to stock."""
    threads = [int(t) for t in args.threads.split(",")]
    given = dict(kv.split("=", 1) for kv in args.kernels.split(",") if kv) if args.kernels else {}
    unknown = set(given) - set(FAULT_KERNELS)
    if unknown:
        raise SystemExit(f"--kernels: unknown {sorted(unknown)}; allowed {FAULT_KERNELS}")
    kdirs = {v: Path(given[v]) if v in given else kernel_dir(v) for v in FAULT_KERNELS}
    runs: dict[str, list[GuestRun]] = {v: [] for v in FAULT_KERNELS}
    bad: list[str] = []
    for rnd in range(args.rounds):
        for v in FAULT_KERNELS:
            run = faultbench_boot(kdirs[v] / "bzImage", threads, args.seconds, args.reps)
            runs[v].append(run)
            bad += faultbench_problems(v, run, threads, args.reps)
            print(
                f"# round {rnd + 1}/{args.rounds} {v}: {run.kernel} ({run.seconds:.0f} s) "
                f"{kdirs[v].name}",
                flush=True,
            )
    topo = guest_topology()
    print(
        f"# faultbench: QEMU TCG {topo.ncpus} vCPUs in {topo.sockets} nodes on "
        f"{os.cpu_count()} host CPUs, {args.seconds} s x {args.reps} reps x "
        f"{args.rounds} boots per kernel and thread count, {time.strftime('%Y-%m-%d')}; "
        "TCG timing: ratios compare code paths, not real-hardware contention"
    )
    print(
        "# cost ratio = stock pages/s / kernel pages/s (median of all measurements; "
        ">1: slower than stock); spread = max/min pages/s of that kernel"
    )
    print(f"{'threads':>7s} {'kernel':8s} {'pages/s':>10s} {'spread':>7s} {'cost':>6s}")
    rates = {v: faultbench_rates(runs[v]) for v in FAULT_KERNELS}
    for t in threads:
        base = median(rates["stock"].get(t, [0.0]))
        for v in FAULT_KERNELS:
            xs = rates[v].get(t, [])
            if not xs:
                print(f"{t:7d} {v:8s} {'-':>10s}")
                continue
            m = median(xs)
            cost = base / m if m else float("nan")
            print(f"{t:7d} {v:8s} {m:10.0f} {max(xs) / min(xs):7.3f} {cost:6.3f}")
    for b in bad:
        print(f"problem: {b}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "bench"):
        sp = sub.add_parser(name)
        sp.add_argument("--variant", default="release", choices=["release", "debug"])
        sp.add_argument("--kernel", help="directory with bzImage (default: build the series)")
        sp.add_argument("--seconds", type=int, default=3 if name == "run" else 10)
        sp.add_argument("--console-out", help="save the guest's serial console to this file")
    fb = sub.add_parser("faultbench", help="kMLB's page-fault cost vs the stock kernel")
    fb.add_argument("--threads", default="1,4,8")
    fb.add_argument("--seconds", type=int, default=2)
    fb.add_argument("--reps", type=int, default=3)
    fb.add_argument("--rounds", type=int, default=2, help="boots per kernel, interleaved")
    fb.add_argument(
        "--kernels",
        help="variant=artifact dir,... instead of building the current series "
        "(e.g. stock=~/.cache/numa-lb-study/kernel/artifacts/<id>)",
    )
    sub.choices["run"].add_argument("--policies", default=",".join(POLICIES))
    sub.choices["run"].add_argument("--mix", default="6:16,4:16,3:8,1:4,1:4")
    sub.choices["bench"].add_argument(
        "--nr-migrate",
        type=int,
        default=0,
        help="sched/nr_migrate (debugfs) for the whole boot: the window a balancing pass "
        "looks at (default: the kernel's 32)",
    )
    sub.choices["run"].add_argument(
        "--crowd",
        default="",
        help="policies to run the crowd checks under (comma-separated; init.sh: more "
        "tasks on CPU 0 than the balancer's window, pinned and free)",
    )
    args = ap.parse_args(argv)
    if args.cmd == "faultbench":
        return cmd_faultbench(args)
    return cmd_run(args) if args.cmd == "run" else cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
