"""kernel-patches/kbuild.py: series, config checking and build identity."""

from pathlib import Path

import kbuild
import pytest

HERE = Path(kbuild.__file__).resolve().parent


def test_series_lists_every_patch_once_in_order() -> None:
    listed = [p.name for p in kbuild.series()]
    on_disk = sorted(p.name for p in HERE.glob("*.patch"))
    assert listed == on_disk
    assert len(set(listed)) == len(listed)


def test_patches_are_format_patch_with_signoff() -> None:
    for p in kbuild.series():
        text = p.read_text()
        assert text.startswith("From "), p.name
        assert "Signed-off-by: " in text, p.name
        assert "\n---\n" in text, p.name


def test_check_config_catches_dropped_symbol(tmp_path: Path) -> None:
    cfg = tmp_path / ".config"
    cfg.write_text("CONFIG_NUMA=y\n# CONFIG_SCHED_NUMA_LB is not set\nCONFIG_NODES_SHIFT=3\n")
    kbuild.check_config(cfg, {"CONFIG_NUMA": "y", "CONFIG_NODES_SHIFT": "3"})
    with pytest.raises(kbuild.BuildError, match="CONFIG_SCHED_NUMA_LB: want y, got n"):
        kbuild.check_config(cfg, {"CONFIG_SCHED_NUMA_LB": "y"})
    with pytest.raises(kbuild.BuildError, match="CONFIG_KASAN"):
        kbuild.check_config(cfg, {"CONFIG_KASAN": "y"})
    # asking for "n" is satisfied by absence
    kbuild.check_config(cfg, {"CONFIG_KASAN": "n"})


def test_fragments_ask_for_the_study_options() -> None:
    want = kbuild.fragment_symbols(kbuild.config_fragments("release"))
    for sym in (
        "CONFIG_NUMA",
        "CONFIG_ACPI_NUMA",
        "CONFIG_SCHED_NUMA_LB",
        "CONFIG_MM_NUMA_RSS",
        "CONFIG_SCHEDSTATS",
        "CONFIG_SCHED_DEBUG",
        "CONFIG_NUMA_BALANCING",
        "CONFIG_SERIAL_8250_CONSOLE",
        "CONFIG_ATA_PIIX",
        "CONFIG_EXT4_FS",
    ):
        assert want[sym] == "y", sym
    assert want["CONFIG_NUMA_BALANCING_DEFAULT_ENABLED"] == "n"
    debug = kbuild.fragment_symbols(kbuild.config_fragments("debug"))
    for sym in ("CONFIG_PROVE_LOCKING", "CONFIG_KASAN", "CONFIG_DEBUG_VM"):
        assert debug[sym] == "y", sym
    with pytest.raises(kbuild.BuildError, match="unknown variant"):
        kbuild.config_fragments("fast")


def test_build_id_covers_source_series_config_and_variant(tmp_path: Path) -> None:
    a, b = tmp_path / "0001-a.patch", tmp_path / "base.config"
    a.write_text("one")
    b.write_text("CONFIG_NUMA=y\n")
    first = kbuild.build_id("6.1.192", [a], [b], "release")
    assert kbuild.build_id("6.1.192", [a], [b], "release") == first
    assert kbuild.build_id("6.1.193", [a], [b], "release") != first
    assert kbuild.build_id("6.1.192", [a], [b], "debug") != first
    a.write_text("two")
    assert kbuild.build_id("6.1.192", [a], [b], "release") != first


def test_missing_tarball_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(kbuild.BuildError, match="not found"):
        kbuild.find_source(str(tmp_path / "linux-6.1.999.tar.xz"))


def test_bisect_builds_tolerate_symbols_a_later_patch_adds(tmp_path: Path) -> None:
    cfg = tmp_path / ".config"
    cfg.write_text("CONFIG_NUMA=y\n# CONFIG_MM_NUMA_RSS is not set\n")
    want = {"CONFIG_NUMA": "y", "CONFIG_SCHED_NUMA_LB": "y"}
    kbuild.check_config(cfg, want, partial_series=True)
    with pytest.raises(kbuild.BuildError, match="CONFIG_SCHED_NUMA_LB"):
        kbuild.check_config(cfg, want)
    # a symbol that exists but was dropped is still an error
    with pytest.raises(kbuild.BuildError, match="CONFIG_MM_NUMA_RSS"):
        kbuild.check_config(cfg, {"CONFIG_MM_NUMA_RSS": "y"}, partial_series=True)


def test_stock_applies_only_the_platform_patches_and_nokmlb_drops_only_the_rss_tracking() -> None:
    platform = kbuild.variant_patches("stock")
    assert [p.name[:4] for p in platform] == ["0025"]  # the idle-HLT step-over
    assert all(p in kbuild.series() for p in platform)
    assert "x86/idle" in platform[0].read_text()
    assert kbuild.variant_patches("release") == kbuild.series()
    assert kbuild.variant_patches("nokmlb") == kbuild.series()
    release = kbuild.fragment_symbols(kbuild.config_fragments("release"))
    stock = kbuild.fragment_symbols(kbuild.config_fragments("stock"))
    nokmlb = kbuild.fragment_symbols(kbuild.config_fragments("nokmlb"))
    # the same config but for the series' own symbols (and the release name)
    differ = {k for k in release if release[k] != stock.get(k)} - {"CONFIG_LOCALVERSION"}
    assert differ == {"CONFIG_MM_NUMA_RSS", "CONFIG_SCHED_NUMA_LB"}
    assert stock["CONFIG_SCHED_NUMA_LB"] == stock["CONFIG_MM_NUMA_RSS"] == "n"
    assert nokmlb["CONFIG_SCHED_NUMA_LB"] == "y" and nokmlb["CONFIG_MM_NUMA_RSS"] == "n"
    ids = {
        v: kbuild.build_id("6.1.0", kbuild.variant_patches(v), kbuild.config_fragments(v), v)
        for v in kbuild.VARIANTS
    }
    assert len(set(ids.values())) == len(ids)
    with pytest.raises(kbuild.BuildError, match="nothing to bisect"):
        kbuild.bisect("stock", None)
    with pytest.raises(kbuild.BuildError, match="unknown variant"):
        kbuild.variant_patches("vanilla")


def test_a_platform_patch_outside_the_series_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listing = tmp_path / "platform"
    listing.write_text("# comment\n0099-not-in-the-series.patch\n")
    monkeypatch.setattr(kbuild, "PLATFORM_FILE", listing)
    with pytest.raises(kbuild.BuildError, match=r"not in the series: \['0099-not-in"):
        kbuild.variant_patches("stock")
    assert kbuild.variant_patches("release") == kbuild.series()  # unaffected
