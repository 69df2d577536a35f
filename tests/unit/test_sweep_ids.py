"""Run ids: stable, canonical, and sensitive to every input that changes a result."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.sweep.matrix import build_runs, points
from analysis.sweep.point import Provenance, SweepPoint, canonical_json, run_id
from analysis.sweep.provenance import tree_hash
from analysis.sweep.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
PROV = Provenance(
    backend="qemu",
    kernel_build_id="f5395eb52d8fe2a9",
    image_id="6dd2729691b9c4ac",
    code_revision={"configs": "c" * 64, "qemu_boot": "q" * 64},
    tool_version="QEMU emulator version 7.2.22",
)


def point() -> SweepPoint:
    return points(load_spec(preset="quick"), "qemu")[1]


def test_point_round_trips_through_json() -> None:
    p = point()
    q = SweepPoint.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p
    assert run_id(q, PROV) == run_id(p, PROV)


def test_run_id_is_pinned() -> None:
    """A change here means every existing result would be orphaned: do it on purpose only.

    Pinned for the quick preset's excl point; update together with POINT_SCHEMA when
    the point's fields change."""
    assert run_id(point(), PROV) == PINNED


# 2026-11-23: machine gained link_bandwidth (GB/s per direction, None = HT3 default);
# POINT_SCHEMA 2: numa_balancing is a point field
# 2026-11-24: job options gained sched_domain (None = balancing intervals untouched)
PINNED = "3101326f8856d80fab90421e0b73c4f14b5a661de7a5a07d09ad4e432c58f088"


def test_run_id_is_stable_across_processes() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.unit.test_sweep_ids import point, PROV;"
        "from analysis.sweep.point import run_id;"
        "print(run_id(point(), PROV))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == run_id(point(), PROV)


@pytest.mark.parametrize(
    "field, value",
    [
        ("policy", "mbplus"),
        ("sockets", 2),
        ("cores_per_socket", 4),
        ("numa_factor", 2.0),
        ("threads", 8),
        ("mix", "other"),
        ("repeat", 1),
        ("kernel_variant", "debug"),
        ("backend", "gem5"),
    ],
)
def test_every_point_field_changes_the_id(field: str, value: object) -> None:
    p = point()
    assert run_id(dataclasses.replace(p, **{field: value}), PROV) != run_id(p, PROV)


def test_nested_point_settings_change_the_id() -> None:
    p = point()
    base = run_id(p, PROV)
    q = dataclasses.replace(p, programs=[dict(p.programs[0], args=["--size=32M"]), p.programs[1]])
    assert run_id(q, PROV) != base
    q = dataclasses.replace(p, machine={**p.machine, "mem_per_node": "512MiB"})
    assert run_id(q, PROV) != base
    q = dataclasses.replace(p, job_options={**p.job_options, "pinning": "direct"})
    assert run_id(q, PROV) != base


@pytest.mark.parametrize(
    "field, value",
    [
        ("kernel_build_id", "0000000000000000"),
        ("image_id", "1111111111111111"),
        ("code_revision", {"configs": "d" * 64, "qemu_boot": "q" * 64}),
        ("tool_version", "QEMU emulator version 8.0"),
        ("gem5_sha256", "e" * 64),
    ],
)
def test_every_provenance_field_changes_the_id(field: str, value: object) -> None:
    assert run_id(point(), dataclasses.replace(PROV, **{field: value})) != run_id(point(), PROV)


def test_resources_do_not_change_the_id() -> None:
    a = build_runs(load_spec(preset="quick"), "qemu", PROV)
    b = build_runs(
        load_spec(
            preset="quick", overrides=['resources.time_limit="1h"', "resources.cpus_per_run=4"]
        ),
        "qemu",
        PROV,
    )
    assert [r.run_id for r in a] == [r.run_id for r in b]
    assert a[0].resources.time_limit_s != b[0].resources.time_limit_s


def test_run_ids_unique_over_a_big_matrix() -> None:
    runs = build_runs(
        load_spec(preset="sensitivity"), "gem5", dataclasses.replace(PROV, backend="gem5")
    )
    assert len({r.run_id for r in runs}) == len(runs) == 300
    assert len({r.dirname for r in runs}) == len(runs)


def test_canonical_json_is_order_independent_and_rejects_nan() -> None:
    assert canonical_json({"b": 1, "a": [1.5, None]}) == canonical_json({"a": [1.5, None], "b": 1})
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_tree_hash_covers_content_and_names_not_caches(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    h = tree_hash(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"junk")
    (tmp_path / "notes.txt").write_text("not code")
    assert tree_hash(tmp_path) == h
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    assert tree_hash(tmp_path) != h
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")
    assert tree_hash(tmp_path) != h
