"""gem5 stats.txt / config.json parsers, on files captured from a real gem5 run only.

The fixture directory tests/fixtures/gem5-run/ is a real run directory of the
gem5-small preset (gem5 v24.0.0.1 X86 MOESI_hammer, configs/numa_run.py),
never hand-written; its m5out/stats.txt (ROI dump + exit dump) and
m5out/config.json are stored xz-compressed and unpacked here.
"""

from __future__ import annotations

import lzma
import math
import re
import shutil
import tempfile
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "fixtures" / "gem5-run"
if not (SRC / "m5out" / "stats.txt.xz").is_file():
    pytest.skip("no real gem5 stats fixture yet", allow_module_level=True)


def _unpack(src: Path) -> Path:
    """The fixture run dir with its xz-compressed gem5 files (kept small in git)
    decompressed, in a temporary directory."""
    dst = Path(tempfile.mkdtemp(prefix="gem5-run-")) / "run"
    shutil.copytree(src, dst)
    for xz in dst.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    return dst


FIX = _unpack(SRC)
STATS = FIX / "m5out" / "stats.txt"
CONFIG = FIX / "m5out" / "config.json"

from analysis.results.frames import load_run  # noqa: E402
from analysis.results.gem5stats import (  # noqa: E402
    StatsError,
    core_counters,
    load_config,
    parse_stats_file,
    parse_stats_text,
    remote_requests,
    roi_dump,
    roi_dump_index,
)
from analysis.results.metrics import gem5_metrics  # noqa: E402


def test_every_dump_is_complete_and_every_value_line_is_read() -> None:
    text = STATS.read_text()
    dumps = parse_stats_file(STATS)
    assert len(dumps) == text.count("Begin Simulation Statistics") >= 1
    assert all(d.complete for d in dumps)
    # independent count: lines inside a dump whose second field is a number or nan
    blocks = re.findall(r"Begin Simulation Statistics -+\n(.*?)\n-+ End", text, re.S)
    for block, d in zip(blocks, dumps, strict=True):
        want = 0
        for line in block.splitlines():
            body = line.split("#", 1)[0]
            if "|" in body:
                want += sum(1 for c in body.split("|")[1:] if c.split())
                continue
            toks = body.split()
            if len(toks) >= 2 and re.fullmatch(r"-?(nan|inf|[0-9.eE+-]+)%?", toks[1]):
                want += 1
        assert len(d.values) == want


def test_nan_vectors_and_distributions_are_kept() -> None:
    d = roi_dump(parse_stats_file(STATS))
    assert "simSeconds" in d.values
    assert any("::" in k for k in d.values)  # vectors / distributions
    nan_lines = [ln for ln in STATS.read_text().splitlines() if re.search(r"\s-?nan\s", ln)]
    if nan_lines:
        name = nan_lines[0].split()[0]
        assert any(math.isnan(v) for k, v in d.values.items() if k == name) or name not in d.values


def test_truncated_stats_is_an_error_entry_not_a_crash(tmp_path: Path) -> None:
    text = STATS.read_text()
    cut = text[: text.rfind("End Simulation Statistics") - 200]
    dumps = parse_stats_text(cut)
    assert not dumps[-1].complete
    if len(dumps) == 1:
        with pytest.raises(StatsError, match="truncated"):
            roi_dump(dumps)
    run = tmp_path / "run"
    shutil.copytree(FIX, run)
    (run / "m5out" / "stats.txt").write_text(text[: len(text) // 3])
    rec, rows, errors = load_run(run)
    if rec.get("state") == "done":
        assert any(src == "m5out/stats.txt" for src, _ in errors) or rows


def test_config_json_and_core_counters() -> None:
    cfg = load_config(CONFIG)
    assert isinstance(cfg, dict)
    c = core_counters(roi_dump(parse_stats_file(STATS)).values)
    assert c["insts"], "per-CPU committed instructions found"


def test_the_roi_dump_is_the_one_roi_json_names() -> None:
    dumps = parse_stats_file(STATS)
    idx = roi_dump_index(FIX / "m5out")
    assert idx == 0 and len(dumps) == 2  # the ROI dump at workend, gem5's dump at exit
    roi, last = roi_dump(dumps, idx), roi_dump(dumps)
    assert roi is dumps[0] and last is dumps[1]
    # the exit dump covers the ROI and the hand back after it
    assert last.values["simInsts"] > roi.values["simInsts"] > 0
    with pytest.raises(StatsError, match="truncated"):
        roi_dump(dumps, 2)


def test_ipc_mpki_and_remote_ratio_from_the_real_run() -> None:
    values = roi_dump(parse_stats_file(STATS), roi_dump_index(FIX / "m5out")).values
    cfg = load_config(CONFIG)
    rows = {(r[0], r[2]): r[3] for r in gem5_metrics(values, cfg, "tiny", 1) if r[0] == "mix"}
    for metric in ("instructions", "cycles", "ipc", "llc_mpki", "remote_ratio"):
        assert ("mix", metric) in rows, metric
    assert 0 < rows[("mix", "ipc")] < 4
    assert 0 <= rows[("mix", "remote_ratio")] <= 1
    rr = remote_requests(values, cfg)
    assert rr is not None and rr["consistent"]
    # every request reaching a directory is either local or remote: nothing lost
    assert rr["local_total"] + rr["remote_total"] == sum(rr["dir_requests"].values())
    # 4 sockets fully connected: 12 directed links, each counted
    assert len(rr["remote_by_link"]) == 12
