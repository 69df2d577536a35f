"""PARSEC tier, in the guest: the image built with PARSEC_SRC booted with our kernel
as a 4-node QEMU guest (4 x 2 vCPUs), one boot per program available at simsmall
(the mix runner's numa-lb launcher, 4 threads, nothing else running), and one boot
running the self-test variants (SPLASH-2x -t, ocean -o) side by side. Outputs are
handed back and checked with parsec_checks; the 1-thread reference runs are made
on this host with the same binaries. QEMU timing is functional, not architectural.
"""

from __future__ import annotations

import json
from pathlib import Path

import build_parsec
import parsec_catalog as cat
import parsec_checks
import pytest
import qemu_boot
from conftest import INPUT, THREADS, record_time, simsmall_programs
from numa_lb.qemu import guest_topology

pytestmark = pytest.mark.qemu
TOPO = guest_topology(nodes=4, cpus_per_node=2, mem_per_node_mib=256, distance=16)
TIMEOUT_S = 900


def job(run_id: str, programs: list[dict]) -> dict:
    return {
        "run_id": run_id,
        "policy": "default",
        "numa_balancing": 0,
        "pinning": "free",
        "timeout_s": TIMEOUT_S,
        "parsec": {"launcher": "numa-lb"},
        "programs": programs,
    }


def boot(kernel: Path, image: Path, j: dict, out: Path) -> dict[str, dict]:
    res = qemu_boot.run(kernel, image, j, out, TOPO, timeout=2 * TIMEOUT_S, echo=False)
    assert res.status == "ok", f"{res.error}\n{res.log_tail}"
    assert not res.splats, res.splats
    recs = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines() if ln]
    return {r["name"]: r for r in recs if r["type"] == "program"}


def guest_out(out: Path, rec: dict) -> parsec_checks.RunOut:
    files = {
        n: (out / o["file"]).read_bytes()
        for n, o in (rec.get("outputs") or {}).items()
        if "file" in o
    }
    return parsec_checks.RunOut(
        rec["exit_code"],
        (out / rec["stdout"]).read_text(),
        (out / rec["stderr"]).read_text(),
        files,
    )


def in_guest(v: parsec_checks.Variant) -> bool:
    return v.threads in (None, THREADS)


@pytest.fixture(scope="module")
def selftests(
    kernel: Path, image: Path, parsec_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, dict]]:
    """One boot: every guest-side variant (its own self-test switch) as a cmd program."""
    man = build_parsec.manifest(parsec_build)
    progs = []
    for pkg in simsmall_programs():
        for v in parsec_checks.CHECKS[pkg].variants:
            if in_guest(v):
                r = cat.installed_command(
                    cat.lookup(pkg), INPUT, THREADS, "/tmp", cat.NUMA_LB_PARSEC_ROOT, man
                )
                progs.append(
                    {
                        "name": f"{cat.lookup(pkg).name}.{v.name}",
                        "threads": THREADS,
                        "cmd": r.argv + list(v.extra_args),
                    }
                )
    out = tmp_path_factory.mktemp("qemu-parsec-selftests")
    return out, boot(kernel, image, job("parsec-tier-selftests", progs), out)


@pytest.mark.parametrize("package", simsmall_programs())
def test_simsmall_in_the_guest(
    kernel: Path,
    image: Path,
    parsec_build: Path,
    tmp_path: Path,
    selftests: tuple[Path, dict[str, dict]],
    package: str,
) -> None:
    name = cat.lookup(package).name
    recs = boot(
        kernel,
        image,
        job(
            f"parsec-tier-{name}",
            [{"name": name, "parsec": package, "input": INPUT, "threads": THREADS}],
        ),
        tmp_path,
    )
    rec = recs[name]
    record_time("qemu", package, seconds=rec["elapsed_s"], roi_s=rec["roi_s"], input=INPUT)
    assert rec["parsec"]["launcher"] == "numa-lb" and rec["threads_max"] >= THREADS
    variants = {}
    st_out, st_recs = selftests
    for v in parsec_checks.CHECKS[package].variants:
        if in_guest(v):
            variants[v.name] = guest_out(st_out, st_recs[f"{name}.{v.name}"])
        else:  # the 1-thread reference, on this host with the same binary
            r = build_parsec.run_native(
                parsec_build,
                package,
                INPUT,
                v.threads or THREADS,
                tmp_path / f"ref-{v.name}",
                list(v.extra_args),
            )
            variants[v.name] = parsec_checks.native_out(r)
    problems, _ = parsec_checks.check(
        package,
        guest_out(tmp_path, rec),
        variants,
        parsec_checks.input_files(parsec_build, package, INPUT),
    )
    assert not problems, f"{package}: {problems} ({parsec_checks.CHECKS[package].what})"
