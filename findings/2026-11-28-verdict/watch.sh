#!/bin/bash
# The platform gate's stop (PREREGISTRATION.md section 6), beside a running sweep:
#   findings/2026-11-28-verdict/watch.sh RESULTS_DIR   (from main, in the background)
# After each finished run it writes the frames of RESULTS_DIR to a scratch dir
# (./run_all.py report; the report file is not read) and checks every done run's
# sched_stalled_cpus_all_running; on a stalled CPU it sends SIGINT to the sweep
# (run_all.py stops its runs cleanly) and exits 1. Prints gates only, never effects.
set -u
RES=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
MAIN=$(cd "$HERE/../.." && pwd)
PY="${NUMA_LB_PYTHON:-$MAIN/.venv/bin/python}"  # the project's Python (.ci/setup), as run_all.py
[ -x "$PY" ] || PY=python3
SCRATCH=$(mktemp -d /tmp/watch.XXXXXX)
last=-1
SWEEP="run_all.py run .*--out [^ ]*$(basename "$RES")( |\$)"
while pgrep -f "$SWEEP" >/dev/null; do
  n=$(grep -l '"state": "done"' "$RES"/runs/*/status.json 2>/dev/null | wc -l)
  if [ "$n" != "$last" ] && [ "$n" -gt 0 ]; then
    last=$n
    (cd "$MAIN" && nice ./run_all.py report "$RES" --out "$SCRATCH" > "$SCRATCH.log" 2>&1)
    bad=$(cd "$MAIN" && "$PY" - "$SCRATCH/frames" <<'P'
import sys
from pathlib import Path
sys.path.insert(0, "findings/2026-11-28-verdict")
from status import status
g = status(Path(sys.argv[1]))
d = g[(g["state"] == "done") & (g["stalled_cpus"].fillna(0) > 0)]
print(" ".join(f"{i[:16]}:{int(v)}" for i, v in d["stalled_cpus"].items()))
P
)
    rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$SCRATCH/frames/runs.parquet" ]; then
      # a watcher that cannot read the gates must not pass for one that saw none
      echo "$(date -u +%H:%M) WATCHER ERROR (exit $rc): the gates were not read; see $SCRATCH.log"
      exit 2
    fi
    echo "$(date -u +%H:%M) done=$n stalled=[$bad]"
    if [ -n "$bad" ]; then
      echo "PLATFORM GATE FAILED: stopping the sweep (SIGINT)"
      pkill -INT -f "$SWEEP"
      exit 1
    fi
  fi
  sleep 120
done
echo "$(date -u +%H:%M) no sweep writes to $RES"
