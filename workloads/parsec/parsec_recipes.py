"""How our build compiles each PARSEC program (the pthreads version, static).

PARSEC's own Makefile in a copy of the package's src/ directory does the
work, with the variables parsecmgmt would pass (``version=pthreads``, CC,
CXX, M4, CFLAGS, CXXFLAGS, LDFLAGS, LIBS through the environment, where the
Makefiles append to them) set by us: our flags, ``-static``, and LIBS = our
hooks library (PARSEC's hooks + hooks_m5.c + m5ops). SPLASH-2x Makefiles
also get MACROS = PARSEC's parmacs pthreads m4 file on the command line.
Which programs have a recipe is parsec_catalog.buildable(); this table says
only what differs between them.
"""

from __future__ import annotations

from dataclasses import dataclass

# PARSEC's gcc.bldconf optimisation flags; the hooks and our static link are ours.
OPT = "-O3 -g -funroll-loops -fprefetch-loop-arrays"
CXX_EXTRA = "-fpermissive -fno-exceptions"  # as PARSEC's gcc.bldconf CXXFLAGS
LDFLAGS = "-static -pthread"


@dataclass(frozen=True)
class Recipe:
    package: str
    exe: str  # what the Makefile produces in src/ (and the installed name)
    splash2x: bool = False  # needs MACROS (parmacs)
    parallel: bool = True  # make -jN is safe (blackscholes' all: clean ... is not)
    pre_make: tuple[tuple[str, ...], ...] = ()  # make invocations before the main one
    outputs: tuple[str, ...] = ()  # files it writes into its run directory worth keeping
    cflags: str = ""  # added to CFLAGS/CXXFLAGS for this program


RECIPES = {
    r.package: r
    for r in (
        Recipe("parsec.blackscholes", "blackscholes", parallel=False, outputs=("prices.txt",)),
        Recipe("parsec.streamcluster", "streamcluster", outputs=("output.txt",)),
        Recipe("parsec.swaptions", "swaptions"),
        Recipe("splash2x.fft", "fft", splash2x=True),
        Recipe("splash2x.lu_cb", "lu_cb", splash2x=True),
        Recipe("splash2x.lu_ncb", "lu_ncb", splash2x=True),
        Recipe("splash2x.radix", "radix", splash2x=True),
        Recipe("splash2x.ocean_cp", "ocean_cp", splash2x=True),
        # PARSEC's own 32-bit array bound (IMAX = JMAX = 2050, its SPARC_SOLARIS
        # switch): with the 64-bit 8098 its static grids map ~28 GB of virtual
        # memory, one mapping of 14.7 GB, which Linux's default overcommit refuses
        # in a guest of a few GiB. Grids up to simlarge (2050) fit; native does not.
        Recipe("splash2x.ocean_ncp", "ocean_ncp", splash2x=True, cflags="-DSPARC_SOLARIS"),
        Recipe("splash2x.radiosity", "radiosity", splash2x=True),
        # its Makefile links -ltiff from libtiff/ but has no rule to build it
        Recipe(
            "splash2x.volrend",
            "volrend",
            splash2x=True,
            pre_make=(("-C", "libtiff"),),
            outputs=("*_[0-9][0-9][0-9][0-9]",),  # one TIFF per rendered frame
        ),
        Recipe("splash2x.barnes", "barnes", splash2x=True),
        Recipe("splash2x.fmm", "fmm", splash2x=True),
        Recipe("splash2x.water_nsquared", "water_nsquared", splash2x=True),
        Recipe("splash2x.water_spatial", "water_spatial", splash2x=True),
    )
}


def make_env(hooks_include: str, libs: str, base_path: str, extra: str = "") -> dict[str, str]:
    """The whole environment of a PARSEC make (nothing inherited but PATH):
    the same flags on every machine, whatever the caller's CFLAGS say."""
    cflags = f"{OPT} -DENABLE_PARSEC_HOOKS -I{hooks_include} {extra}".strip()
    return {
        "PATH": base_path,
        "LANG": "C",
        "LC_ALL": "C",
        "version": "pthreads",
        "CC": "gcc",
        "CXX": "g++",
        "M4": "m4",
        "CFLAGS": cflags,
        "CXXFLAGS": f"{cflags} {CXX_EXTRA}",
        "CPPFLAGS": "",
        "LDFLAGS": LDFLAGS,
        "LIBS": libs,
    }
