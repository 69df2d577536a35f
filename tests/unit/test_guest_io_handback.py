"""disk-image/guest_io.py: the gem5 hand back's results tar, old and new run dirs.

The files are a real run's (tests/fixtures/gem5-run/guest, captured from gem5),
packed with the init's own pack_results, as the guest does in the "tar" mode.
The bad tars are those files with one member renamed, linked or enlarged.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "disk-image"))

import guest_io  # noqa: E402

init = guest_io.init
GUEST = ROOT / "tests" / "fixtures" / "gem5-run" / "guest"


def captured() -> tuple[dict[str, bytes], dict]:
    files = {p.name: p.read_bytes() for p in sorted(GUEST.iterdir()) if p.name != "handback.json"}
    return files, json.loads(files[init.STATUS_FILE])


def retar(data: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    """DATA (a results tar) rewritten member by member through CHANGE(TarInfo, bytes)."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data)) as src,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst,
    ):
        for m in src.getmembers():
            blob = src.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
            m, blob = change(m, blob)
            dst.addfile(m, io.BytesIO(blob) if m.isfile() else None)
    return out.getvalue()


def test_a_results_tar_comes_back_whole(tmp_path: Path) -> None:
    files, status = captured()
    m5out = tmp_path / "m5out"
    m5out.mkdir()
    (m5out / ("guest-" + init.GEM5_TAR)).write_bytes(init.pack_results(files, status))
    st = guest_io.collect_gem5(m5out, tmp_path / "guest")
    assert st == status
    for name, blob in files.items():
        assert (tmp_path / "guest" / name).read_bytes() == blob, name
    assert json.loads((tmp_path / "guest" / "handback.json").read_text()) == {"via": "tar"}
    assert sorted(p.name for p in (tmp_path / "guest").iterdir()) == sorted(
        [*files, "handback.json"]
    )


def test_an_old_run_dir_of_per_file_writefiles_still_comes_back(tmp_path: Path) -> None:
    files, status = captured()
    m5out = tmp_path / "m5out"
    m5out.mkdir()
    for name, blob in files.items():
        (m5out / ("guest-" + name)).write_bytes(blob)
    assert guest_io.collect_gem5(m5out, tmp_path / "guest") == status
    assert json.loads((tmp_path / "guest" / "handback.json").read_text()) == {"via": "writefile"}
    assert (tmp_path / "guest" / "results.jsonl").read_bytes() == files["results.jsonl"]


def _rename(new: str):  # type: ignore[no-untyped-def]
    def change(m: tarfile.TarInfo, blob: bytes):  # type: ignore[no-untyped-def]
        if m.name == "prog-00-lft.out":
            m.name = new
        return m, blob

    return change


def _symlink(m: tarfile.TarInfo, blob: bytes):  # type: ignore[no-untyped-def]
    if m.name == "prog-00-lft.out":
        m.type, m.linkname, m.size = tarfile.SYMTYPE, "/etc/passwd", 0
        blob = b""
    return m, blob


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (_rename("../escaped.out"), "'../escaped.out'"),
        (_rename("/tmp/h38-absolute.out"), "'/tmp/h38-absolute.out'"),
        (_rename("sub/dir.out"), "'sub/dir.out'"),
        (_rename(".hidden"), "'.hidden'"),
        (_symlink, "'prog-00-lft.out'"),
    ],
)
def test_a_bad_member_is_refused_and_nothing_is_written(
    tmp_path: Path,
    change,
    why: str,  # type: ignore[no-untyped-def]
) -> None:
    files, status = captured()
    bad = tmp_path / "m5out" / ("guest-" + init.GEM5_TAR)
    bad.parent.mkdir()
    bad.write_bytes(retar(init.pack_results(files, status), change))
    dest = tmp_path / "box" / "dest"
    with pytest.raises(init.JobError, match="refusing member " + why.replace(".", r"\.")):
        guest_io.extract_results_tar(bad, dest)
    assert not dest.exists()  # nothing written, in DEST or beside it
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["guest-results.tar", "m5out"]
    assert not Path("/tmp/h38-absolute.out").exists()
    # collect_gem5: refused with the reason in handback.json, no status
    assert guest_io.collect_gem5(bad.parent, tmp_path / "guest") is None
    hb = json.loads((tmp_path / "guest" / "handback.json").read_text())
    assert hb["via"] is None and "refusing member" in hb["tar_error"]
    assert sorted(p.name for p in (tmp_path / "guest").iterdir()) == ["handback.json"]


def test_an_oversized_member_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files, status = captured()
    biggest = max(files, key=lambda n: len(files[n]))
    # the limit just under the biggest captured file (the real one is 256 MiB)
    monkeypatch.setattr(sys.modules["init_formats"], "MAX_MEMBER", len(files[biggest]) - 1)
    bad = tmp_path / "results.tar"
    bad.write_bytes(init.pack_results(files, status))
    with pytest.raises(init.JobError, match=f"refusing member '{biggest}'"):
        guest_io.extract_results_tar(bad, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_a_tar_cut_short_is_refused(tmp_path: Path) -> None:
    files, status = captured()
    data = init.pack_results(files, status)
    bad = tmp_path / "results.tar"
    for cut in (len(data) // 2 // 512 * 512, len(data) // 2 + 100):
        bad.write_bytes(data[:cut])
        with pytest.raises(init.JobError, match="results tar"):
            guest_io.extract_results_tar(bad, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
