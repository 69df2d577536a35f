"""Keep a finding in the repository: a sweep's tidy frames, its report, and
where they came from (issue 15 item 5).

    python3 -m analysis.results.keep SWEEP_DIR [SWEEP_DIR ...] findings/NAME --command "..."

writes ``findings/NAME/frames/{metrics,runs,errors}.parquet``, ``report.md``
(with ``report_files/``) and ``PROVENANCE.md``: the command, the project commit
the sweep ran from (sweep.json ``git``; older sweeps lack it and the file says
so), gem5 version and binary hash, kernel builds, image, configs hash, the
hosts and dates of the runs. Run directories, gem5 outputs and checkpoints stay
in the cache; the report regenerates from the frames alone:

    ./run_all.py report --frames findings/NAME/frames --out findings/NAME
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ..sweep.driver import git_state
from .report import write_report, write_report_from_frames


def _head() -> str:
    return (git_state() or {}).get("commit", "unknown")


def provenance_md(manifest: dict[str, Any], runs: pd.DataFrame, command: str) -> str:
    prov = manifest.get("provenance") or {}
    git = manifest.get("git")
    if git:
        made = f"`{git['commit']}`" + (" (with local changes)" if git.get("dirty") else "")
    else:
        made = ("not recorded (sweep started before sweep.json recorded it); "
                f"kept at `{_head()}`")  # fmt: skip
    built = (manifest.get("kernels") or {}).items()
    kernels = ", ".join(f"{v}: `{k['build_id']}`" for v, k in built)
    kernels = kernels or f"`{prov.get('kernel_build_id', '?')}`"
    states = runs["state"].value_counts().to_dict() if "state" in runs else {}
    hosts = sorted(set(runs["host"].dropna().astype(str))) if "host" in runs else []
    lines = [
        "# Provenance",
        "",
        "Command:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- sweep: `{manifest.get('sweep')}` ({manifest.get('source')}): "
        f"{manifest.get('description', '')}",
        f"- project commit of the sweep: {made}",
        f"- backend: {manifest.get('backend')}; {prov.get('tool_version', '?')} "
        f"(binary sha256 `{prov.get('gem5_sha256', '-')}`)",
        f"- kernels: {kernels or '-'}; image `{prov.get('image_id', '?')}`; "
        f"configs tree `{(prov.get('code_revision') or {}).get('configs', '-')}`",
        f"- runs: {len(runs)} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))}) "
        f"on {', '.join(hosts) or '?'}; sweep manifest written {manifest.get('written_at')}",
        f"- caveat: {manifest.get('caveat', '')}",
        "",
        "Regenerate the report from the frames alone:",
        "",
        "```sh",
        "./run_all.py report --frames findings/<this dir>/frames --out findings/<this dir>",
        "```",
        "",
    ]
    return "\n".join(lines)


def _manifest(sweep: Path) -> dict[str, Any]:
    p = sweep / "sweep.json"
    if not p.is_file():
        raise ValueError(f"{sweep}: no sweep.json (not a sweep output directory)")
    m = json.loads(p.read_text())
    if not isinstance(m, dict):
        raise ValueError(f"{p}: not a JSON object")
    return m


def keep(sweeps: list[Path], dest: Path, command: str) -> Path:
    """One finding from one or more sweeps of the same study (e.g. a sweep and
    the points it was split into): their runs in one frame, each manifest's
    provenance listed."""
    manifests = [(s, _manifest(s)) for s in sweeps]
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_report(list(sweeps), Path(tmp))
        if (dest / "frames").exists():
            shutil.rmtree(dest / "frames")
        shutil.copytree(Path(tmp) / "frames", dest / "frames")
        runs = pd.read_parquet(paths["frame_runs"])
    # the kept report is the one the frames alone give, so it regenerates exactly
    write_report_from_frames(dest / "frames", dest)
    (dest / "report.html").unlink(missing_ok=True)  # Markdown only in git
    parts = []
    for s, m in manifests:
        inside = runs["dir"].map(lambda d, s=s: Path(str(d)).resolve().is_relative_to(s.resolve()))
        mine = runs[inside]
        parts.append(provenance_md(m, mine if len(mine) else runs, command))
    (dest / "PROVENANCE.md").write_text("\n".join(parts))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path, nargs="+", help="sweep dir(s), then the finding dir")
    ap.add_argument("--command", required=True, help="the command that made the sweep")
    a = ap.parse_args(argv)
    try:
        if len(a.sweep) < 2:
            raise ValueError("give at least one sweep dir and the finding dir")
        d = keep(a.sweep[:-1], a.sweep[-1], a.command)
    except (OSError, ValueError) as e:
        print(f"keep: {e}", file=sys.stderr)
        return 2
    print(f"kept: {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
