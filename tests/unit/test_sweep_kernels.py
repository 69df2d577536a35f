"""Kernel variants of a sweep: the stock policy boots the unmodified kernel,
its run ids carry that kernel's build id, and nokmlb refuses the policies
that read per-node RSS."""

from __future__ import annotations

import pytest

from analysis.sweep import backends as bk
from analysis.sweep.matrix import build_runs, kernel_variants
from analysis.sweep.point import Provenance
from analysis.sweep.spec import SpecError, load_spec

PROV = Provenance("qemu", "r" * 16, "i" * 16, {"configs": "c" * 64}, "QEMU 7.2")
IDS = {"release": "r" * 16, "stock": "s" * 16}


def test_stock_points_boot_the_stock_kernel_and_hash_its_id() -> None:
    spec = load_spec(preset="quick", overrides=["axes.policy=stock,excl"])
    assert kernel_variants(spec) == ["release", "stock"]
    runs = build_runs(spec, "qemu", PROV, IDS)
    by_policy = {r.point.policy: r for r in runs}
    # the point keeps the sweep's variant (its configuration); the policy boots
    assert by_policy["stock"].point.kernel_variant == "release"
    assert by_policy["stock"].point.boot_kernel == "stock"
    assert by_policy["excl"].point.boot_kernel == "release"
    # the same point hashed with another stock kernel is another run
    other = build_runs(spec, "qemu", PROV, {**IDS, "stock": "t" * 16})
    assert {r.point.policy: r.run_id for r in other}["stock"] != by_policy["stock"].run_id
    assert {r.point.policy: r.run_id for r in other}["excl"] == by_policy["excl"].run_id
    # a stock point without the stock kernel's id cannot be given an id
    with pytest.raises(ValueError, match="no kernel build id for variant stock"):
        build_runs(spec, "qemu", PROV)


def test_artifacts_give_each_run_its_kernel() -> None:
    art = bk.Artifacts(
        PROV,
        {"kernel": "/r/bzImage", "kernel_dir": "/r", "image": "/i.img"},
        kernels={
            "release": {"build_id": "r" * 16, "kernel_dir": "/r", "kernel": "/r/bzImage"},
            "stock": {"build_id": "s" * 16, "kernel_dir": "/s", "kernel": "/s/bzImage"},
        },
    )
    assert art.paths_for("stock") == {"kernel": "/s/bzImage", "kernel_dir": "/s", "image": "/i.img"}
    assert art.provenance_for("stock").kernel_build_id == "s" * 16
    assert art.provenance_for("release") == PROV
    assert art.kernel_ids() == IDS


@pytest.mark.parametrize("policy", ["tm", "mb", "bce", "mbplus"])
def test_nokmlb_refuses_the_rss_policies(policy: str) -> None:
    with pytest.raises(SpecError, match="per-node RSS"):
        load_spec(
            preset="quick",
            overrides=["sweep.kernel_variant=nokmlb", f"axes.policy=excl,{policy}"],
        )
    spec = load_spec(
        preset="quick", overrides=["sweep.kernel_variant=nokmlb", "axes.policy=stock,excl"]
    )
    assert kernel_variants(spec) == ["nokmlb", "stock"]
