"""run_all.py's help: every option of every subcommand says what it does, and
the first line of `run` names who chose the backend (issue 41, item 6)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import run_all  # noqa: E402


def _parsers(
    ap: argparse.ArgumentParser, name: str = "run_all.py"
) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, ap)]
    for act in ap._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sub, sp in act.choices.items():
                out += _parsers(sp, f"{name} {sub}")
    return out


def test_every_option_of_every_subcommand_has_help() -> None:
    from analysis.gem5_build import parser as build_gem5_parser  # noqa: PLC0415

    bare = []
    parsers = _parsers(run_all.parser())
    assert {n.split()[-1] for n, _ in parsers[1:]} == set(run_all.COMMANDS)
    # build-gem5's arguments are analysis/gem5_build.py's own parser's
    parsers.append(("run_all.py build-gem5 (analysis/gem5_build.py)", build_gem5_parser()))
    for name, p in parsers:
        for act in p._actions:
            if isinstance(act, argparse._HelpAction | argparse._SubParsersAction):
                continue
            text = act.help or ""
            if not text.strip() or text == argparse.SUPPRESS:
                bare.append(f"{name} {'/'.join(act.option_strings) or act.dest}")
    assert bare == [], f"options without help: {bare}"


def test_every_subcommand_has_help() -> None:
    ap = run_all.parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert set(helps) == set(run_all.COMMANDS)
    assert all(h and h.strip() for h in helps.values()), helps


def _first_line(*args: str) -> tuple[int, str]:
    # no gem5 anywhere: not in the environment, not in a cache (an empty one: every
    # case stops before anything is built, so nothing lands there)
    env = {k: v for k, v in os.environ.items() if k not in ("GEM5", "GEM5_VARIANT")}
    with tempfile.TemporaryDirectory(prefix="numa-lb-empty-cache-") as cache:
        env["NUMA_LB_CACHE"] = cache
        r = subprocess.run(
            [sys.executable, str(ROOT / "run_all.py"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    return r.returncode, (r.stdout.splitlines() or [""])[0]


@pytest.mark.parametrize(
    "args, rc, says",
    [
        # refused (timing preset on qemu) right after the first line: nothing is built
        (
            ["--preset", "paper", "--backend", "qemu"],
            2,
            'requested by --backend: sweep.backend = "qemu"',
        ),
        (
            ["--preset", "paper", "--backend", "gem5", "--set", 'sweep.backend="qemu"'],
            2,
            'requested by --set sweep.backend: sweep.backend = "qemu"',
        ),
        (["--preset", "paper"], 2, "auto: no gem5 configured"),
        # a gem5 preset without gem5: the missing binary is found before any build
        (["--preset", "daemons"], 3, 'requested by preset daemons: sweep.backend = "gem5"'),
    ],
)
def test_first_line_names_who_chose_the_backend(args: list[str], rc: int, says: str) -> None:
    got_rc, line = _first_line(*args)
    assert line.startswith("backend: ") and says in line, line
    assert got_rc == rc


def test_spec_file_origin(tmp_path: Path) -> None:
    spec = tmp_path / "mine.toml"
    spec.write_text((ROOT / "analysis/sweep/presets/daemons.toml").read_text())
    got_rc, line = _first_line("run", str(spec))
    assert f'requested by spec {spec}: sweep.backend = "gem5"' in line, line
    assert got_rc == 3
