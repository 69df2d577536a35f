"""Print what this gem5 binary is, as one JSON line (run_all.py's provenance).

    gem5.opt --outdir=/tmp/info configs/gem5_info.py

gem5 v24.0.0.1's own ``--build-info`` fails (m5.defines has no gem5Version),
so the version and the build configuration are read here instead.
"""

from __future__ import annotations

import json

import _m5.core
from m5.defines import buildEnv

if __name__ == "__m5_main__":
    env = {k: v for k, v in sorted(buildEnv.items()) if isinstance(v, str | bool | int)}
    print("GEM5_INFO " + json.dumps({"version": _m5.core.gem5Version, "build": env}), flush=True)
