"""The baselines of issue 10: the stock kernel (none of the study's patches,
only the platform patch 0025) and the series without kMLB (nokmlb), each
booted once under QEMU with the page-fault
benchmark boot of the test initramfs.

stock has no policy sysctl; nokmlb refuses tm, mb, bce and mbplus with
EINVAL and one kernel log line each, and takes default, excl_base, excl, excl_ff, null.
Both run the fault benchmark to the end with a clean console.
"""

import pytest
import qemu_check
from numa_lb.qemu import guest_topology


@pytest.fixture(scope="module", params=["stock", "nokmlb"])
def variant_run(request: pytest.FixtureRequest) -> tuple[str, qemu_check.GuestRun]:
    kdir = qemu_check.kernel_dir(request.param)
    run = qemu_check.faultbench_boot(kdir / "bzImage", [1, 2], seconds=1, reps=1)
    assert run.done, f"guest did not finish (rc {run.returncode}):\n{run.console[-4000:]}"
    return request.param, run


def test_kernel_names_its_variant(variant_run: tuple[str, qemu_check.GuestRun]) -> None:
    variant, run = variant_run
    assert f"-numalb-{variant}" in run.kernel


def test_policies_offered_and_refused(variant_run: tuple[str, qemu_check.GuestRun]) -> None:
    variant, run = variant_run
    assert qemu_check.faultbench_problems(variant, run, [1, 2], reps=1) == []
    if variant == "stock":
        assert set(run.policy_write.values()) == {"absent"}
    else:
        assert {p for p, r in run.policy_write.items() if r == "ok"} == {
            "default",
            "excl_base",
            "excl",
            "excl_ff",
            "null",
        }


def test_fault_benchmark_measures(variant_run: tuple[str, qemu_check.GuestRun]) -> None:
    _, run = variant_run
    assert {f["threads"] for f in run.faultbench} == {1, 2}
    assert all(f["pages"] > 0 and f["ns"] >= 1e9 for f in run.faultbench)


def test_every_variant_carries_the_platform_patch(
    variant_run: tuple[str, qemu_check.GuestRun],
) -> None:
    # patch 0025 (kernel-patches/platform) is in stock too: its HLT row is
    # in /proc/interrupts, 0 on every CPU under QEMU (STI shadow modelled)
    _, run = variant_run
    assert qemu_check.idle_hlt_problems(run, guest_topology()) == []
