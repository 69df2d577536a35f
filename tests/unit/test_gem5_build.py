"""build-gem5 (analysis/gem5_build.py) and the cache defaults (analysis/cache.py).

Refusals before SCons, extraction from a real git repository, the provenance
writer on a real ELF, signal forwarding to a real child, the GEM5 / PARSEC_SRC
defaults; and, when gem5's source is in the cache, a real defconfig + setconfig
of a fresh build directory (about 30 s; no binary is built).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from analysis import cache
from analysis import gem5_build as gb
from analysis import gem5_source as gs
from analysis.sweep import provenance as pv

ROOT = Path(__file__).resolve().parents[2]
VERSION_CC = 'const char *gem5Version = "{v}";\n'


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    monkeypatch.setenv("NUMA_LB_CACHE", str(c))
    for var in ("GEM5", "GEM5_VARIANT", "PARSEC_SRC"):
        monkeypatch.setenv(var, "")  # recorded: whatever a test sets is undone afterwards
        monkeypatch.delenv(var)
    return c


def fake_tree(root: Path, version: str = "24.0.0.1") -> Path:
    (root / "src" / "base").mkdir(parents=True)
    (root / "SConstruct").write_text("# not gem5's\n")
    (root / "src" / "base" / "version.cc").write_text(VERSION_CC.format(v=version))
    return root


def spy_scons(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `scons` records that it was started (it must not be)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mark = tmp_path / "scons-started"
    (bin_dir / "scons").write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    (bin_dir / "scons").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return env, mark


def build_gem5(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), "build-gem5", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2024-01-01T00:00:00", "GIT_COMMITTER_DATE":
           "2024-01-01T00:00:00"}  # fmt: skip
    ident = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    r = subprocess.run(["git", *ident, *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def tiny_repo(root: Path, version: str = "24.0.0.1", tag: str | None = "v24.0.0.1") -> str:
    """A git work tree that looks like gem5 (SConstruct, version.cc, a test binary)."""
    fake_tree(root, version)
    (root / "src" / "sim").mkdir()
    (root / "src" / "sim" / "main.cc").write_text("int main() { return 0; }\n")
    (root / "tests" / "test-progs" / "hello").mkdir(parents=True)
    (root / "tests" / "test-progs" / "hello" / "hello").write_bytes(b"\x7fELF binary")
    git("init", "-q", ".", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "gem5", cwd=root)
    if tag:
        git("tag", "-a", tag, "-m", tag, cwd=root)
    return git("rev-parse", "HEAD", cwd=root)


# ------------------------------------------------------------ refusals (exit 2/3)
def test_a_dir_that_is_not_gem5_is_refused_before_scons(tmp_path: Path, cache_dir: Path) -> None:
    env, mark = spy_scons(tmp_path)
    (tmp_path / "notgem5").mkdir()
    r = build_gem5(["--src", str(tmp_path / "notgem5")], env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a gem5 source tree" in lines[0]
    assert not mark.exists()


def test_another_gem5_version_is_refused_with_one_line(tmp_path: Path, cache_dir: Path) -> None:
    env, mark = spy_scons(tmp_path)
    tree = fake_tree(tmp_path / "gem5-23", "23.1.0.0")
    r = build_gem5(["--src", str(tree), "--variant", "opt"], env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "is gem5 23.1.0.0, not 24.0.0.1" in lines[0]
    assert not mark.exists()


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--src", "/nonexistent/gem5"], "no such directory"),
        (["--build-dir", "/tmp/not-a-build-dir"], "needs a directory named build/<name>"),
        (["--jobs", "0"], "--jobs must be >= 1"),
    ],
)
def test_bad_arguments_exit_2(
    tmp_path: Path, cache_dir: Path, args: list[str], expect: str
) -> None:
    env, mark = spy_scons(tmp_path)
    r = build_gem5(args, env)
    assert r.returncode == 2 and expect in r.stderr
    assert not mark.exists()


def test_a_git_tree_at_another_commit_without_the_tag_is_refused(
    tmp_path: Path, cache_dir: Path
) -> None:
    env, mark = spy_scons(tmp_path)
    repo = tmp_path / "clone"
    repo.mkdir()
    head = tiny_repo(repo, tag=None)
    r = build_gem5(["--src", str(repo)], env)
    assert r.returncode == 2
    assert f"is at commit {head[:12]}, not v24.0.0.1" in r.stderr
    assert not mark.exists()


def test_a_tag_v24_that_is_not_gems_commit_is_refused(tmp_path: Path, cache_dir: Path) -> None:
    env, mark = spy_scons(tmp_path)
    repo = tmp_path / "clone"
    repo.mkdir()
    head = tiny_repo(repo)
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", str(repo), str(bare), cwd=tmp_path)
    for src in (repo, bare):
        r = build_gem5(["--src", str(src)], env)
        assert r.returncode == 2
        assert f"tag v24.0.0.1 is commit {head[:12]}, not gem5's b1a44b89c7ba" in r.stderr
    assert not mark.exists() and not (cache_dir / "gem5" / "src").exists()


def test_no_source_and_no_network_is_a_missing_prerequisite(
    tmp_path: Path, cache_dir: Path
) -> None:
    env, mark = spy_scons(tmp_path)
    r = build_gem5(["--clone-url", f"file://{tmp_path}/no-such-repo"], env)
    assert r.returncode == 3
    assert "cannot fetch v24.0.0.1" in r.stderr and "pass --src" in r.stderr
    assert not mark.exists()


def test_a_running_scons_on_the_build_dir_is_seen(tmp_path: Path) -> None:
    bdir = tmp_path / "build" / "X86_MOESI_hammer"
    fake = tmp_path / "scons"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    proc = subprocess.Popen([str(fake), f"{bdir}/gem5.fast", "-j2"])
    try:
        time.sleep(0.3)
        assert proc.pid in gb.running_builds(bdir)
        assert proc.pid not in gb.running_builds(tmp_path / "build" / "OTHER")
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------- extraction from git
def test_extract_leaves_test_progs_out_and_marks_the_commit(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "clone"
    repo.mkdir()
    head = tiny_repo(repo)
    git("checkout", "-q", "--detach", "HEAD~0", cwd=repo)
    (repo / "src" / "sim" / "main.cc").write_text("// local edit\n")  # HEAD != tag after this
    git("commit", "-qam", "local", cwd=repo)
    monkeypatch.setattr(cache, "GEM5_COMMIT", head)  # this repo's tag stands for gem5's
    src = gs.resolve_source(str(repo), None)
    dest = cache_dir / "gem5" / "src" / "v24.0.0.1"
    assert src.tree == dest and src.commit == head
    assert (dest / "src" / "sim" / "main.cc").read_text() == "int main() { return 0; }\n"
    assert not (dest / "tests" / "test-progs").exists()
    assert json.loads((dest / gs.MARKER).read_text())["commit"] == head
    # rerun: reused as it is; a plain --src of it knows its commit from the marker
    assert gs.resolve_source(str(repo), None).tree == dest
    assert gs.resolve_source(str(dest), None).commit == head
    # a cached tree that differs from the tag (no marker) is refused, not overwritten
    (dest / gs.MARKER).unlink()
    (dest / "src" / "sim" / "main.cc").write_text("// patched gem5\n")
    with pytest.raises(gs.BuildError, match=r"differs from v24.0.0.1 in 1 files \(e.g. src/sim"):
        gs.resolve_source(str(repo), None)
    (dest / "src" / "sim" / "main.cc").write_text("int main() { return 0; }\n")
    assert gs.resolve_source(str(repo), None).commit == head  # verified, marker rewritten
    assert json.loads((dest / gs.MARKER).read_text())["how"].startswith("verified")


def test_a_clean_clone_at_the_tag_is_built_in_place_a_modified_one_refused(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "clone"
    repo.mkdir()
    head = tiny_repo(repo)
    monkeypatch.setattr(cache, "GEM5_COMMIT", head)
    src = gs.resolve_source(str(repo), None)
    assert src.tree == repo and src.commit == head and "clean" in src.commit_how
    (repo / "src" / "sim" / "main.cc").write_text("// patched\n")
    with pytest.raises(gs.BuildError, match="1 tracked files modified") as e:
        gs.resolve_source(str(repo), None)
    assert e.value.code == 2


# ------------------------------------------------------------- provenance
def test_provenance_of_a_real_elf(tmp_path: Path, cache_dir: Path) -> None:
    bdir = cache.gem5_build_dir()
    (bdir / "gem5.build").mkdir(parents=True)
    (bdir / "gem5.build" / "config").write_text(
        '# comment\nRUBY=y\nPROTOCOL="MOESI_hammer"\nRUBY_PROTOCOL_MOESI_HAMMER=y\n'
        "USE_X86_ISA=y\nUSE_ARM_ISA=n\n"
    )
    binary = bdir / "gem5.fast"
    shutil.copy2("/bin/true", binary)
    tree = fake_tree(tmp_path / "tree")
    source = gs.Source(tree, None, "unknown", str(tree))
    inv = gb.Invocation(["scons", str(binary)], gs.now_iso(), 12.5, 20.0, 0, False)
    gb.append_history(binary, inv)
    rec = gb.provenance_record(binary, source, bdir, "fast", {"build": inv.argv}, {"jobs": 2})
    out = gb.write_provenance(binary, rec)
    assert out == bdir / "gem5.fast.provenance.json"
    got = json.loads(out.read_text())
    assert got["binary_sha256"] == hashlib.sha256(Path("/bin/true").read_bytes()).hexdigest()
    assert got["tcmalloc"] is False
    assert any(lib.startswith("libc.so") for lib in got["linked_libraries"])
    assert got["gem5_version"] == "24.0.0.1" and got["source"]["commit"] is None
    assert got["kconfig"] == {
        "RUBY": "y",
        "PROTOCOL": "MOESI_hammer",
        "RUBY_PROTOCOL_MOESI_HAMMER": "y",
        "USE_X86_ISA": "y",
    }
    assert got["build"]["wall_s"] == 12.5 and got["build"]["cpu_s"] == 20.0
    assert got["compiler"]["cxx_version"]  # g++ --version's first line
    assert gb.kconfig_ok(bdir)
    # a rerun on the same binary needs no SCons; a changed binary does
    assert gb.still_built(binary, source) is not None
    # the cache now offers it as the default gem5, and the sweep records its provenance
    assert cache.default_gem5() == (str(binary), "the cached build (default: fast)")
    sp = pv.gem5_build_provenance(binary)
    assert sp is not None and sp["records_this_binary"] is True
    assert sp["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert sp["content"]["binary_sha256"] == got["binary_sha256"]
    with open(binary, "ab") as f:
        f.write(b"\0")
    assert gb.still_built(binary, source) is None
    sp = pv.gem5_build_provenance(binary)
    assert sp is not None and sp["records_this_binary"] is False
    assert pv.gem5_build_provenance(tmp_path / "tree" / "SConstruct") is None


def test_elf_comments_name_the_compiler(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("SKIPPED elf-comment: gcc not found")
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "m"), str(tmp_path / "m.c")], check=True)
    assert any(c.startswith("GCC:") for c in gb.elf_comments(tmp_path / "m"))


# --------------------------------------------------------- signal forwarding
STANDIN = textwrap.dedent(
    """\
    import signal, sys, time
    from pathlib import Path
    def stop(signum, frame):
        Path(sys.argv[1]).write_text(str(signum))  # what SCons does: save, then exit 2
        sys.exit(2)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(9))
    Path(sys.argv[1] + ".ready").touch()
    time.sleep(60)
    """
)
DRIVER = textwrap.dedent(
    """\
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from analysis import gem5_build as gb
    inv = gb.run_scons([sys.executable, sys.argv[2], sys.argv[3]], Path("."), {})
    print(json.dumps({"rc": inv.exit_code, "interrupted": inv.interrupted}))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_reach_scons_as_sigint(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "standin.py").write_text(STANDIN)
    (tmp_path / "driver.py").write_text(DRIVER)
    got = tmp_path / "got"
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), str(ROOT), str(tmp_path / "standin.py"),
         str(got)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not Path(f"{got}.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"rc": 2, "interrupted": True}
    assert got.read_text() == str(int(signal.SIGINT))
    assert "asking SCons to stop (SIGINT)" in err


# ---------------------------------------------------------------- defaults
def install(binary: Path, provenance: bool = True) -> Path:
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2("/bin/true", binary)
    if provenance:
        cache.provenance_path(binary).write_text("{}\n")
    return binary


def test_gem5_default_resolution(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, why = cache.default_gem5()
    assert path is None and "build-gem5" in why and str(cache.gem5_build_dir()) in why
    opt = install(cache.gem5_binary("opt"))
    assert cache.default_gem5() == (str(opt), "the cached build (default: opt)")
    fast = install(cache.gem5_binary("fast"), provenance=False)  # not finished: not chosen
    assert cache.default_gem5()[0] == str(opt)
    install(fast)
    assert cache.default_gem5() == (str(fast), "the cached build (default: fast)")
    monkeypatch.setenv("GEM5_VARIANT", "opt")
    assert cache.default_gem5() == (str(opt), "the cached build (GEM5_VARIANT: opt)")
    monkeypatch.setenv("GEM5_VARIANT", "debug")
    assert cache.default_gem5()[0] is None and "GEM5_VARIANT='debug'" in cache.default_gem5()[1]
    monkeypatch.setenv("GEM5", "/opt/my/gem5.opt")  # an explicit GEM5 always wins
    assert cache.default_gem5() == ("/opt/my/gem5.opt", "$GEM5")
    assert cache.default_gem5("/x/gem5.fast") == ("/x/gem5.fast", "--gem5")
    monkeypatch.delenv("GEM5")
    monkeypatch.setenv("GEM5_VARIANT", "fast")
    cache.provenance_path(fast).unlink()
    assert cache.default_gem5()[0] is None  # the named variant only


def test_backend_auto_uses_the_cached_gem5(cache_dir: Path) -> None:
    from analysis.sweep.backends import resolve_backend

    assert resolve_backend("auto", None)[0] == "qemu"
    fast = install(cache.gem5_binary("fast"))
    backend, why = resolve_backend("auto", None)
    assert backend == "gem5" and str(fast) in why and "the cached build" in why


def test_parsec_src_default(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache.parsec_src() is None and cache.export_parsec_default() is None
    assert "PARSEC_SRC" not in os.environ
    tree = cache.parsec_src_dir()
    tree.mkdir(parents=True)
    assert cache.default_parsec_src() == (str(tree), "the cached tree")
    assert cache.export_parsec_default() == str(tree) and os.environ["PARSEC_SRC"] == str(tree)
    monkeypatch.setenv("PARSEC_SRC", "/elsewhere")
    assert cache.parsec_src() == "/elsewhere" and cache.export_parsec_default() is None


def test_cache_cli(cache_dir: Path) -> None:
    def cli(what: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "analysis.cache", what],
            capture_output=True, text=True, cwd=ROOT, env=dict(os.environ),
        )  # fmt: skip

    r = cli("gem5")
    assert r.returncode == 1 and r.stdout == "" and "build-gem5" in r.stderr
    fast = install(cache.gem5_binary("fast"))
    assert cli("gem5").stdout.strip() == str(fast)
    assert cli("root").stdout.strip() == str(cache_dir)
    assert cli("bogus").returncode == 2


def test_empty_numa_lb_cache_means_the_default() -> None:
    env = {**os.environ, "NUMA_LB_CACHE": ""}
    r = subprocess.run(
        [sys.executable, "-m", "analysis.cache", "root"],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert r.stdout.strip() == str(Path.home() / ".cache" / "numa-lb-study")


# --------------------------------------------------- real gem5 configuration
def test_real_defconfig_and_setconfig_of_a_new_build_dir(tmp_path: Path) -> None:
    """gem5's own defconfig + setconfig from the cached source (read only), ~30 s."""
    src = cache.gem5_src_dir()
    if not (src / "SConstruct").is_file():
        pytest.skip(f"SKIPPED gem5-configure: no gem5 source at {src} (build-gem5 puts it there)")
    if shutil.which("scons") is None or not Path("/usr/bin/python3-config").is_file():
        pytest.skip("SKIPPED gem5-configure: scons or python3-dev missing (README: gem5)")
    bdir = tmp_path / "build" / "X86_MOESI_hammer"
    env = {**os.environ, "NUMA_LB_CACHE": str(tmp_path / "cache")}
    args = ["--src", str(src), "--build-dir", str(bdir), "--configure-only", "--jobs", "1"]
    r = build_gem5(args, env)
    assert r.returncode == 0, r.stderr[-2000:]
    cfg = (bdir / "gem5.build" / "config").read_text()
    assert 'PROTOCOL="MOESI_hammer"' in cfg.splitlines()
    assert "USE_X86_ISA=y" in cfg.splitlines() and "RUBY=y" in cfg.splitlines()
    assert "$ nice -n 19" in r.stderr and "defconfig" in r.stderr and "setconfig" in r.stderr
    # configured already: a rerun starts no SCons
    r = build_gem5(args, env)
    assert r.returncode == 0 and "$ " not in r.stderr and "configured:" in r.stderr


def test_a_rerun_on_a_finished_build_starts_no_scons(tmp_path: Path, cache_dir: Path) -> None:
    env, mark = spy_scons(tmp_path)
    env["NUMA_LB_CACHE"] = str(cache_dir)
    tree = fake_tree(tmp_path / "tree")
    bdir = cache.gem5_build_dir()
    (bdir / "gem5.build").mkdir(parents=True)
    (bdir / "gem5.build" / "config").write_text('RUBY=y\nPROTOCOL="MOESI_hammer"\nUSE_X86_ISA=y\n')
    binary = install(cache.gem5_binary("fast"), provenance=False)
    source = gs.Source(tree, None, "unknown", str(tree))
    steps = {"build": ["scons", str(binary), "-j2"]}
    gb.write_provenance(
        binary, gb.provenance_record(binary, source, bdir, "fast", steps, {"jobs": 2, "nice": 19})
    )
    r = build_gem5(["--src", str(tree), "--jobs", "1"], env)
    assert r.returncode == 0, r.stderr
    assert "is built (sha256" in r.stderr and not mark.exists()
    rec = json.loads(cache.provenance_path(binary).read_text())
    assert rec["scons"] == {"steps": steps, "jobs": 2, "nice": 19}  # how it was built
    # the binary changed since: SCons runs (here a stand-in that fails), and it is recorded
    with open(binary, "ab") as f:
        f.write(b"\0")
    r = build_gem5(["--src", str(tree), "--jobs", "1"], env)
    assert r.returncode == 1 and "scons gem5.fast failed (exit 1)" in r.stderr
    assert mark.exists()
    hist = gb.read_history(binary)
    assert [h["exit_code"] for h in hist] == [1] and hist[0]["argv"][-1] == "-j1"
