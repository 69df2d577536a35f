"""A Slurm dry run prints the job scripts only when the runs' boot checkpoints
are staged; otherwise it refuses in one line naming them (issue 40 item 6).
A real submission would boot a missing checkpoint on the submitting host
first, one after the other (at 4 x 8 about half an hour each on the
development VM), which a dry run must not hide."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from analysis.sweep import backends as bk
from analysis.sweep import driver
from analysis.sweep.point import Provenance
from analysis.sweep.spec import load_spec


@pytest.fixture
def gem5_artifacts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """gem5 artifacts without building anything; the cache (and so the
    checkpoint directory) in tmp_path."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMA_LB_CACHE", str(cache))

    def prepare(backend: str, *args: object, **kwargs: object) -> bk.Artifacts:
        prov = Provenance(
            backend, "kernel-test", "image-test", {"configs": "t"}, "gem5 test", "e" * 64
        )
        paths = {"kernel": "/nonexistent/bzImage", "image": "/nonexistent/img",
                 "gem5": "/nonexistent/gem5.fast"}  # fmt: skip
        return bk.Artifacts(prov, paths)

    monkeypatch.setattr(bk, "prepare", prepare)
    monkeypatch.setattr(driver, "image_problems", lambda spec, meta: None)
    return cache


def dry_run(out: Path) -> tuple[int, str]:
    spec = load_spec(preset="quick", overrides=['sweep.backend="gem5"'])
    buf = io.StringIO()
    code = driver.run_sweep(
        spec, driver.Options(out=out, stream=buf, executor="slurm", dry_run=True)
    )
    return code, buf.getvalue()


def test_missing_checkpoint_refused_then_staged_prints_the_script(
    gem5_artifacts: Path, tmp_path: Path
) -> None:
    code, text = dry_run(tmp_path / "out")
    assert code == driver.EXIT_PREREQ, text
    errors = [x for x in text.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: not staged: 1 boot checkpoint(s)")
    assert "(2 run(s))" in errors[0] and "--stage-only" in errors[0]
    assert "#!/bin/bash" not in text
    key = errors[0].split(": ")[3].split(" ")[0]  # "...checkpoints: KEY (2 run(s))..."
    assert str(gem5_artifacts / "checkpoints") in errors[0]
    assert not (tmp_path / "out").exists()

    (gem5_artifacts / "checkpoints" / key).mkdir(parents=True)
    (gem5_artifacts / "checkpoints" / key / "DONE").write_text("{}")
    code, text = dry_run(tmp_path / "out")
    assert code == driver.EXIT_OK, text
    assert not [x for x in text.splitlines() if x.startswith("error:")]
    assert "#!/bin/bash" in text and "#SBATCH --array=0-1" in text
    assert not (tmp_path / "out").exists()
