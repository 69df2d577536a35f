"""The project's artifact cache: its root, and where the external prerequisites live in it.

    python3 -m analysis.cache root|gem5|gem5-src|parsec-src

prints the path (exit 0), or on stderr why there is none (exit 1); ``tests/run``
uses it to pick its defaults. Standard library only: the sweep engine, the test
tiers and the build tools (disk-image/, workloads/parsec/) import it.

Layout under ``$NUMA_LB_CACHE`` (default ``~/.cache/numa-lb-study``; an empty
value counts as unset):

* ``gem5/src/v24.0.0.1/``: gem5's source tree (``./run_all.py build-gem5``
  extracts it from a git dir or clone; ``.numa-lb-source.json`` records the
  commit it was extracted from).
* ``gem5/v24.0.0.1/build/X86_MOESI_hammer/``: the out-of-tree build; the
  binaries ``gem5.fast`` and ``gem5.opt``, each with ``<binary>.provenance.json``
  beside it, written by build-gem5 after a successful build.
* ``parsec/src/``: a PARSEC 3.0 tree (e.g. a checkout of bamos/parsec-benchmark),
  put there by the user; ``parsec/build/`` holds what build_parsec.py made of it.

Defaults (an explicit value always wins):

* gem5 binary: ``--gem5`` > ``$GEM5`` > the cached build. Of the cached binaries
  only those with their provenance file count (a binary build-gem5 finished, not
  one a build is still writing); ``$GEM5_VARIANT`` (``fast`` or ``opt``) picks
  one, else ``gem5.fast`` (the sweep binary), else ``gem5.opt`` (the debugging
  binary, which also runs every sweep).
* PARSEC tree: ``$PARSEC_SRC`` > ``<cache>/parsec/src`` when it is a directory
  (``export_parsec_default``: through the environment, see there).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

GEM5_VERSION = "24.0.0.1"
GEM5_TAG = "v24.0.0.1"
GEM5_COMMIT = "b1a44b89c7bae73fae2dc547bc1f871452075b85"  # the tag's commit
GEM5_BUILD_NAME = "X86_MOESI_hammer"
GEM5_VARIANTS = ("fast", "opt")  # the order is the default preference
PROVENANCE_SUFFIX = ".provenance.json"


def cache_root() -> Path:
    """``$NUMA_LB_CACHE`` or ``~/.cache/numa-lb-study``."""
    env = os.environ.get("NUMA_LB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "numa-lb-study"


# ---------------------------------------------------------------------- gem5
def gem5_src_dir() -> Path:
    return cache_root() / "gem5" / "src" / GEM5_TAG


def gem5_build_dir() -> Path:
    """The build directory gem5's SCons configures (``.../build/<name>``)."""
    return cache_root() / "gem5" / GEM5_TAG / "build" / GEM5_BUILD_NAME


def gem5_binary(variant: str, build_dir: Path | None = None) -> Path:
    return (build_dir or gem5_build_dir()) / f"gem5.{variant}"


def provenance_path(binary: Path) -> Path:
    """The build provenance beside a gem5 binary (``gem5.fast.provenance.json``)."""
    return binary.with_name(binary.name + PROVENANCE_SUFFIX)


def cached_gem5(variant: str) -> Path | None:
    """The cached binary of @variant when build-gem5 finished it, else None."""
    b = gem5_binary(variant)
    if b.is_file() and os.access(b, os.X_OK) and provenance_path(b).is_file():
        return b
    return None


def default_gem5(flag: str | None = None) -> tuple[str | None, str]:
    """(gem5 binary or None, how it was chosen / why there is none)."""
    if flag:
        return flag, "--gem5"
    env = os.environ.get("GEM5")
    if env:
        return env, "$GEM5"
    want = os.environ.get("GEM5_VARIANT") or None
    if want is not None and want not in GEM5_VARIANTS:
        return None, f"GEM5_VARIANT={want!r} is neither of {', '.join(GEM5_VARIANTS)}"
    for v in (want,) if want else GEM5_VARIANTS:
        b = cached_gem5(v)
        if b is not None:
            return str(b), f"the cached build ({'GEM5_VARIANT' if want else 'default'}: {v})"
    which = f"gem5.{want}" if want else " or ".join(f"gem5.{v}" for v in GEM5_VARIANTS)
    return None, (
        f"GEM5 is unset and the cache holds no finished {which} in {gem5_build_dir()} "
        "(build it with `./run_all.py build-gem5`)"
    )


# -------------------------------------------------------------------- PARSEC
def parsec_src_dir() -> Path:
    return cache_root() / "parsec" / "src"


def default_parsec_src() -> tuple[str | None, str]:
    """(PARSEC tree or None, how it was chosen / why there is none)."""
    env = os.environ.get("PARSEC_SRC")
    if env:
        return env, "$PARSEC_SRC"
    d = parsec_src_dir()
    if d.is_dir():
        return str(d), "the cached tree"
    return None, (
        f"PARSEC_SRC is unset and {d} does not exist (a PARSEC 3.0 tree, e.g. a checkout "
        "of bamos/parsec-benchmark; README: PARSEC)"
    )


def parsec_src() -> str | None:
    return default_parsec_src()[0]


def export_parsec_default() -> str | None:
    """Set $PARSEC_SRC to the cached tree when it is unset and the tree is there;
    returns the path set, else None.

    The default goes through the environment, not into the tools' code:
    disk-image/build_image.py and workloads/parsec/build_parsec.py are hashed
    into the image key and the PARSEC build id (so into every run id), and
    every tool they start reads $PARSEC_SRC. run_all.py, tests/run and the
    parsec tier call this; run by hand, those two tools need PARSEC_SRC (or
    --src / --parsec-src) as before.
    """
    if os.environ.get("PARSEC_SRC"):
        return None
    path, _ = default_parsec_src()
    if path is not None:
        os.environ["PARSEC_SRC"] = path
    return path


# ----------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    what = argv[0] if len(argv) == 1 else ""
    if what == "root":
        print(cache_root())
        return 0
    if what == "gem5-src":
        print(gem5_src_dir())
        return 0 if gem5_src_dir().is_dir() else 1
    if what in ("gem5", "parsec-src"):
        path, why = default_gem5() if what == "gem5" else default_parsec_src()
        if path is None:
            print(why, file=sys.stderr)
            return 1
        print(path)
        return 0
    print("usage: python3 -m analysis.cache root|gem5|gem5-src|parsec-src", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
