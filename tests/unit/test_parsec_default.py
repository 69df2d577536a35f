"""Which image a sweep gets does not follow the cache's contents (PLAN.md amendment 9
of the verdict pilot): `run_all.py run` defaults PARSEC_SRC to the cache's PARSEC
tree only for a spec that runs a PARSEC program from our build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import run_all
from analysis.sweep.spec import load_spec, needs_parsec_build

ROOT = Path(__file__).resolve().parents[2]
PILOT = ROOT / "findings" / "2026-11-28-verdict-pilot" / "verdict-pilot4.toml"


def test_which_specs_need_our_parsec_build() -> None:
    assert needs_parsec_build(load_spec(None, "paper", []))  # table2-subset, numa-lb launcher
    assert not needs_parsec_build(load_spec(None, "quick", []))
    assert not needs_parsec_build(load_spec(str(PILOT), None, []))  # the verdict's synthetic mixes
    # the x86-parsec overlay's launcher: PARSEC programs, but not from our build
    overlay = [
        "job.parsec_launcher=parsecmgmt",
        'axes.mix=["parsec-gem5-image"]',
        "axes.threads=[16]",
    ]
    assert not needs_parsec_build(load_spec(None, "paper", overlay))


@pytest.fixture
def cache_with_parsec_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tree = tmp_path / "cache" / "parsec" / "src"
    tree.mkdir(parents=True)
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PARSEC_SRC", "x")  # recorded: whatever run_all sets is undone after
    monkeypatch.delenv("PARSEC_SRC")
    return tree


def _image_line(cache: Path, out: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PARSEC_SRC"}
    env["NUMA_LB_CACHE"] = str(cache)
    r = subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), "run", "--preset", "quick", "--dry-run",
         "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "unbuilt-image-" in ln]
    return line


def test_a_synthetic_sweep_gets_the_same_image_whatever_the_cache_holds(
    cache_with_parsec_tree: Path, tmp_path: Path
) -> None:
    """The whole command, as a user runs it. Before the fix run_all.py set
    PARSEC_SRC for every command, so with a PARSEC tree in the cache (here an
    empty one) the quick preset's image needed that tree: the dry run failed
    (`not a PARSEC 3.0 tree`), and with a real tree it planned another image."""
    bare = tmp_path / "bare-cache"
    bare.mkdir()
    with_tree = _image_line(cache_with_parsec_tree.parents[1], tmp_path / "o1")
    assert with_tree == _image_line(bare, tmp_path / "o2")


def test_a_parsec_sweep_gets_the_cache_tree(
    cache_with_parsec_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEM5", str(tmp_path / "no-gem5"))  # the dry run may stop there: fine
    run_all.main(["run", "--preset", "paper", "--dry-run", "--out", str(tmp_path / "o")])
    assert os.environ.get("PARSEC_SRC") == str(cache_with_parsec_tree)


def test_an_explicit_parsec_src_still_wins(
    cache_with_parsec_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a spec that runs our PARSEC build (so the default would apply)."""
    monkeypatch.setenv("PARSEC_SRC", str(tmp_path / "mine"))
    monkeypatch.setenv("GEM5", str(tmp_path / "no-gem5"))  # the dry run may stop there: fine
    run_all.main(["run", "--preset", "paper", "--dry-run", "--out", str(tmp_path / "o")])
    assert os.environ["PARSEC_SRC"] == str(tmp_path / "mine")
