"""Unit tests for our PARSEC build without a PARSEC tree: the catalog's availability
table and installed layout, the tree readers on a miniature tree written here (our
own text in PARSEC's file formats, not PARSEC's files), the Black-Scholes reference,
the mix runner's numa-lb launcher on a fake build, and the image key with and
without PARSEC_SRC. The real build and runs are the parsec tier (tests/parsec).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for p in (REPO / "workloads" / "parsec", REPO / "workloads", REPO / "disk-image"):
    sys.path.insert(0, str(p))
import build_parsec  # noqa: E402
import parsec_catalog as cat  # noqa: E402
import parsec_checks  # noqa: E402
import parsec_tree as pt  # noqa: E402
from numa_lb.roi import ROI_WORK_ID  # noqa: E402


def test_parsec_work_id_is_not_the_mix_roi() -> None:
    init_default = 1  # disk-image/init: roi_workid defaults to 1
    assert cat.PARSEC_WORK_ID != ROI_WORK_ID == init_default
    src = (REPO / "workloads/parsec/hooks_m5.c").read_text()
    assert "NLS_PARSEC_WORK_ID" in src and "#error" in src  # no default of its own


def test_availability_table() -> None:
    simsmall = [p.name for p in cat.available_programs("simsmall")]
    assert simsmall == [
        "blackscholes",
        "streamcluster",
        "swaptions",
        "fft",
        "lu_cb",
        "lu_ncb",
        "ocean_cp",
        "ocean_ncp",
        "radiosity",
        "radix",
        "volrend",
    ]
    more = {p.name for p in cat.available_programs("simsmall", official_inputs=True)}
    assert more - set(simsmall) == {"barnes", "fmm", "water_nsquared", "water_spatial"}
    for p in cat.PROGRAMS:
        for s in cat.INPUTS:
            src = cat.input_source(p, s)
            assert src in cat.SOURCES
            assert (
                src != cat.NO_RECIPE
                or not cat.buildable(p)
                or (p.name, s) == ("ocean_ncp", "native")
            )
    bs = cat.lookup("blackscholes")
    assert cat.input_source(bs, "test") == cat.TREE
    assert cat.input_source(bs, "native") == cat.GENERATED
    assert cat.input_source(cat.lookup("canneal"), "simsmall") == cat.NO_RECIPE
    assert not cat.available(cat.lookup("canneal"), "simsmall", official_inputs=True)
    assert all(s in cat.INPUTS for _, s in cat.TREE_FILES_TARBALL)


def test_every_recipe_is_buildable_and_back() -> None:
    import parsec_recipes  # noqa: PLC0415

    assert set(parsec_recipes.RECIPES) == {p.package for p in cat.PROGRAMS if cat.buildable(p)}


MANIFEST = {
    "schema": 1,
    "config": cat.NUMA_LB_PARSEC_CONFIG,
    "programs": {
        "splash2x.water_spatial": {
            "exe": "bin/water_spatial",
            "inputs": {
                "test": {
                    "args": ["{threads}"],
                    "dir": "inputs/water_spatial/test",
                    "files": ["input.template", "random.in"],
                    "stdin": "input_{threads}",
                    "generate": [
                        {
                            "name": "input_{threads}",
                            "text": "a NUMPROCS b\n",
                            "subst": {"NUMPROCS": "{threads}"},
                        }
                    ],
                    "outputs": [],
                }
            },
        },
        "parsec.blackscholes": {
            "exe": "bin/blackscholes",
            "inputs": {
                "simsmall": {
                    "args": ["{threads}", "in_4K.txt", "prices.txt"],
                    "dir": "inputs/blackscholes/simsmall",
                    "files": ["in_4K.txt"],
                    "generate": [],
                    "stdin": None,
                    "outputs": ["prices.txt", "frame_[0-9]"],
                }
            },
        },
    },
}


def test_installed_command_and_workdir(tmp_path: Path) -> None:
    root = str(tmp_path / "parsec")
    r = cat.installed_command(
        cat.lookup("water_spatial"), "test", 3, str(tmp_path / "w"), root, MANIFEST
    )
    assert r.argv == [
        "/bin/sh",
        "-c",
        'exec "$@" <"$0"',
        "input_3",
        f"{root}/bin/water_spatial",
        "3",
    ]
    assert r.links == {
        n: f"{root}/inputs/water_spatial/test/{n}" for n in ("input.template", "random.in")
    }
    assert r.generate == {"input_3": "a 3 b\n"}
    cat.prepare_workdir(r)
    assert os.readlink(tmp_path / "w" / "random.in") == r.links["random.in"]
    assert (tmp_path / "w" / "input_3").read_text() == "a 3 b\n"
    cat.prepare_workdir(r)  # again: idempotent
    with pytest.raises(ValueError, match="no simsmall input"):
        cat.installed_command(cat.lookup("water_spatial"), "simsmall", 3, "/w", root, MANIFEST)
    with pytest.raises(ValueError, match="not in the PARSEC build"):
        cat.installed_command(cat.lookup("fft"), "simsmall", 3, "/w", root, MANIFEST)
    with pytest.raises(FileNotFoundError, match="PARSEC_SRC"):
        cat.load_manifest(str(tmp_path / "nothing"))


def test_mixrunner_numa_lb_launcher(tmp_path: Path) -> None:
    """A fake build: 'blackscholes' is a shell script that copies its input to its output."""
    root = tmp_path / "parsec"
    (root / "bin").mkdir(parents=True)
    (root / "inputs/blackscholes/simsmall").mkdir(parents=True)
    (root / "inputs/blackscholes/simsmall/in_4K.txt").write_text("options\n")
    exe = root / "bin/blackscholes"
    exe.write_text(
        '#!/bin/sh\necho "threads $1"\necho "[HOOKS] Total time spent in ROI: 0.5s"\n'
        'cat "$2" > "$3"\necho a > frame_1\necho b > frame_2\n'
    )
    exe.chmod(0o755)
    (root / cat.MANIFEST_NAME).write_text(json.dumps(MANIFEST))
    job = {
        "run_id": "u",
        "parsec": {"launcher": "numa-lb", "root": str(root)},
        "programs": [{"name": "bs", "parsec": "blackscholes", "threads": 2}],
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "workloads/mixrunner.py"),
            str(tmp_path / "job.json"),
            "--outdir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    prog = next(r for r in recs if r["type"] == "program")
    assert prog["exit_code"] == 0 and prog["roi_s"] == 0.5
    assert prog["parsec"]["launcher"] == "numa-lb"
    assert prog["parsec"]["config"] == cat.NUMA_LB_PARSEC_CONFIG
    assert prog["outputs"] == {
        "prices.txt": {"file": "prog-00-bs.prices.txt", "bytes": 8},
        "frame_1": {"file": "prog-00-bs.frame_1", "bytes": 2},
        "frame_2": {"file": "prog-00-bs.frame_2", "bytes": 2},
    }
    assert (out / "prog-00-bs.prices.txt").read_text() == "options\n"
    assert (out / "prog-00-bs.out").read_text().startswith("threads 2\n")


# ------------------------------------------------------------------ a miniature tree


def mini_tree(base: Path) -> Path:
    t = base / "parsec-3.0"
    (t / pt.HOOKS_SRC / "include").mkdir(parents=True)
    (t / pt.HOOKS_SRC / "hooks.c").write_text("/* stand-in */\n")
    (t / "pkgs/libs/parmacs/src/m4").mkdir(parents=True)
    (t / "ext/splash2x/kernels/fft/parsec").mkdir(parents=True)
    (t / "ext/splash2x/kernels/fft/src").mkdir(parents=True)
    (t / "ext/splash2x/kernels/fft/parsec/simsmall.runconf").write_text(
        'run_exec="bin/run.sh"\nrun_args="$NTHREADS simsmall"\n'
    )
    (t / "ext/splash2x/kernels/fft/src/run.sh").write_text(
        'TARGET=fft\ncase "${INPUTSIZE}" in\n"test"\t) \n\tPROGARGS="-m4 -p${NUMPROCS}";;\n'
        '"simsmall"\t) \n\tPROGARGS="-m8 -p${NUMPROCS}";;\nesac\n'
    )
    (t / "ext/splash2x/apps/fmm/parsec").mkdir(parents=True)
    (t / "ext/splash2x/apps/fmm/src").mkdir(parents=True)
    (t / "ext/splash2x/apps/fmm/parsec/test.runconf").write_text(
        'run_exec="bin/run.sh"\nrun_args="$NTHREADS test"\n'
    )
    (t / "ext/splash2x/apps/fmm/src/run.sh").write_text(
        'TARGET=fmm\nINPUTTEMPLATE="input.template"\nINPUTFILE="input_${NUMPROCS}"\n'
        'PROGARGS="${NUMPROCS} < ${INPUTFILE}"\n'
        "cat ${INPUTTEMPLATE} | sed s/NUMPROCS/$NUMPROCS/ > ${INPUTFILE}\n"
    )
    (t / "pkgs/apps/blackscholes/parsec").mkdir(parents=True)
    (t / "pkgs/apps/blackscholes/parsec/simsmall.runconf").write_text(
        '# comment\nrun_exec="bin/blackscholes"\nrun_args="${NTHREADS} in_4K.txt prices.txt"\n'
    )
    return t


def test_tree_readers(tmp_path: Path) -> None:
    t = mini_tree(tmp_path)
    assert pt.find_tree(tmp_path) == t.resolve() == pt.find_tree(t)
    with pytest.raises(pt.TreeError, match="not a PARSEC 3.0 tree"):
        pt.find_tree(tmp_path / "parsec-3.0" / "pkgs")
    bs = pt.run_command(t, "pkgs/apps/blackscholes", "simsmall")
    assert (bs.exe, bs.args, bs.stdin) == (
        "blackscholes",
        ["{threads}", "in_4K.txt", "prices.txt"],
        None,
    )
    fft = pt.run_command(t, "ext/splash2x/kernels/fft", "simsmall")
    assert (fft.exe, fft.args) == ("fft", ["-m8", "-p{threads}"])
    fmm = pt.run_command(t, "ext/splash2x/apps/fmm", "test")
    assert (fmm.args, fmm.stdin, fmm.template) == (
        ["{threads}"],
        "input_{threads}",
        "input.template",
    )
    with pytest.raises(pt.TreeError):
        pt.run_command(t, "ext/splash2x/kernels/fft", "native")
    ident = pt.identity(t, ["ext/splash2x/kernels/fft"])
    (t / "ext/splash2x/kernels/fft/src/run.sh").write_text("changed\n")
    assert pt.identity(t, ["ext/splash2x/kernels/fft"]) != ident
    (t / "ext/splash2x/kernels/fft/obj").mkdir()  # build products are not sources
    (t / "ext/splash2x/kernels/fft/obj/x.o").write_text("x")
    assert pt.identity(t, ["ext/splash2x/kernels/fft"]) == pt.identity(
        t, ["ext/splash2x/kernels/fft"]
    )


def test_extract_refuses_unsafe_members(tmp_path: Path) -> None:
    good = tmp_path / "good.tar"
    (tmp_path / "a.txt").write_text("a")
    with tarfile.open(good, "w") as tf:
        tf.add(tmp_path / "a.txt", "dir/a.txt")
    assert pt.extract(good, tmp_path / "out") == ["dir"]
    for name, kind in (("../evil", tarfile.REGTYPE), ("link", tarfile.SYMTYPE)):
        bad = tmp_path / "bad.tar"
        with tarfile.open(bad, "w") as tf:
            ti = tarfile.TarInfo(name)
            ti.type = kind
            ti.linkname = "/etc/passwd"
            tf.addfile(ti)
        with pytest.raises(pt.TreeError):
            pt.extract(bad, tmp_path / "out2")


def test_blackscholes_reference() -> None:
    # Hull's textbook example: S=42, K=40, r=10 %, sigma=20 %, T=0.5
    assert math.isclose(
        parsec_checks.black_scholes(42, 40, 0.1, 0.2, 0.5, True), 4.7594, abs_tol=1e-4
    )
    assert math.isclose(
        parsec_checks.black_scholes(42, 40, 0.1, 0.2, 0.5, False), 0.8086, abs_tol=1e-4
    )
    opts = (
        "2\n42.00 40.00 0.1000 0.00 0.20 0.50 C 0.00 4.759423\n"
        "42.00 40.00 0.1000 0.00 0.20 0.50 P 0.00 0.808600\n"
    )
    assert parsec_checks.check_blackscholes(opts, "2\n4.759418\n0.808598\n")[0] == []
    assert parsec_checks.check_blackscholes(opts, "2\n4.76\n0.9\n")[0]
    assert parsec_checks.check_blackscholes(opts, "1\n4.759418\n")[0]


def test_blackscholes_option_counts() -> None:
    import parsec_inputs  # noqa: PLC0415

    assert [
        parsec_inputs.blackscholes_count(n)
        for n in ("in_4.txt", "in_4K.txt", "in_16K.txt", "in_64K.txt", "in_10M.txt")
    ] == [4, 4096, 16384, 65536, 10_000_000]
    with pytest.raises(parsec_inputs.InputError):
        parsec_inputs.blackscholes_count("prices.txt")


def test_build_id_follows_tree_and_selection(tmp_path: Path, monkeypatch) -> None:
    t = mini_tree(tmp_path)
    monkeypatch.delenv("PARSEC_INPUTS", raising=False)
    with pytest.raises(build_parsec.BuildError, match="PARSEC_SRC"):
        monkeypatch.delenv("PARSEC_SRC", raising=False)
        build_parsec.Selection.make()
    sel = build_parsec.Selection.make(str(t), programs=["fft"])
    bid = build_parsec.build_id(sel)
    assert bid == build_parsec.build_id(build_parsec.Selection.make(str(t), programs=["fft"]))
    assert bid != build_parsec.build_id(
        build_parsec.Selection.make(str(t), programs=["fft"], sizes=["simsmall"])
    )
    (t / "ext/splash2x/kernels/fft/src/fft.C").write_text("/* changed */\n")
    assert build_parsec.build_id(sel) != bid
    with pytest.raises(build_parsec.BuildError, match="no build recipe"):
        build_parsec.Selection.make(str(t), programs=["canneal"])
    assert str(build_parsec.cache_base()).startswith(str(Path.home())) or os.environ.get(
        "NUMA_LB_CACHE"
    )


def test_image_key_with_and_without_parsec(tmp_path: Path, monkeypatch) -> None:
    import build_image  # noqa: PLC0415

    monkeypatch.delenv("PARSEC_SRC", raising=False)
    files = build_image.input_files()
    assert not [n for n in files if n.startswith("workloads/parsec/")]  # not in the image
    assert build_image.parsec_build_id() is None
    key = build_image.image_key("r" * 16, files)
    assert key == build_image.image_key("r" * 16, files, parsec=None)
    assert key != build_image.image_key("r" * 16, files, parsec="0123456789abcdef")
    monkeypatch.setenv("PARSEC_SRC", str(mini_tree(tmp_path)))
    pid = build_image.parsec_build_id()
    assert pid and build_image.image_key("r" * 16, files) == build_image.image_key(
        "r" * 16, files, parsec=pid
    )


# ------------------------------------------------------------------ sweep specs


def _paper_doc() -> dict:
    from analysis.sweep import spec  # noqa: PLC0415

    return spec.load_toml(spec.preset_path("paper"))


def test_paper_preset_runs_our_parsec_build() -> None:
    from analysis.sweep import spec  # noqa: PLC0415

    s = spec.validate(_paper_doc(), "paper")
    assert s.axes["mix"] == ["table2-subset"]
    assert (s.job["parsec_launcher"], s.job["parsec_root"], s.job["parsec_config"]) == (
        "numa-lb",
        cat.NUMA_LB_PARSEC_ROOT,
        cat.NUMA_LB_PARSEC_CONFIG,
    )
    sub = [p["parsec"] for p in s.mixes["table2-subset"]]
    assert sub == [p.package for p in cat.available_programs("simsmall")]
    assert "SUBSET" in s.mix_descriptions["table2-subset"]
    assert len(s.mixes["parsec4"]) == 4 and len(s.mixes["parsec-available"]) == len(sub)
    sw = next(p for p in s.mixes["table2-subset"] if p["parsec"] == "parsec.swaptions")
    assert sw["input"] == "simmedium"  # 32 threads need 32 swaptions
    assert len(s.mixes["parsec-gem5-image"]) == 13  # the x86-parsec option stays


def test_thread_limits_and_inputs_table() -> None:
    from analysis.sweep import spec  # noqa: PLC0415

    doc = _paper_doc()
    del doc["mixes"]["table2-subset"]["inputs"]
    with pytest.raises(spec.SpecError, match="at most 16 threads"):
        spec.validate(doc, "paper")
    doc["axes"]["threads"] = [1, 16]
    spec.validate(doc, "paper")
    doc["mixes"]["table2-subset"]["inputs"] = {"canneal": "simsmall"}
    with pytest.raises(spec.SpecError, match="not in the mix"):
        spec.validate(doc, "paper")
    doc["mixes"]["table2-subset"]["inputs"] = {"barnes": "simsmall"}
    with pytest.raises(spec.SpecError, match="not in the mix"):
        spec.validate(doc, "paper")
    assert cat.max_threads(cat.lookup("swaptions"), "simsmall") == 16
    assert cat.max_threads(cat.lookup("fft"), "simsmall") is None


def test_parsec_image_problem() -> None:
    from analysis.sweep import spec  # noqa: PLC0415

    s = spec.validate(_paper_doc(), "paper")
    assert spec.parsec_image_problem(s, None) is None  # no image.json yet (dry run)
    assert "PARSEC_SRC" in spec.parsec_image_problem(s, {"image_key": "k", "parsec": None})
    have = {p["parsec"]: {p["input"]: "x"} for p in s.mixes["table2-subset"]}
    assert spec.parsec_image_problem(s, {"parsec": {"programs": have}}) is None
    del have["splash2x.fft"]
    assert "splash2x.fft simsmall" in spec.parsec_image_problem(s, {"parsec": {"programs": have}})
    doc = _paper_doc()
    doc["job"]["parsec_launcher"] = "parsecmgmt"
    doc["axes"]["mix"] = ["parsec-gem5-image"]
    doc["axes"]["threads"] = [1, 16]
    s2 = spec.validate(doc, "paper")
    assert s2.job["parsec_root"] == cat.GEM5_PARSEC_ROOT
    assert spec.parsec_image_problem(s2, {"parsec": None}) is None
