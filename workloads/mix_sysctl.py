"""The kernel knobs a mix runs under: the load-balancing policy and NUMA
balancing, written through /proc/sys (no shell) and read back.

Its own module because the run record must say what was in force, not only
what was asked for. Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
from typing import Any, Dict, Optional

from mix_metrics import read_text

POLICY_SYSCTL = "kernel/sched_numa_lb_policy"
NUMAB_SYSCTL = "kernel/numa_balancing"


def read_sysctl(root: str, name: str) -> Optional[str]:
    txt = read_text(os.path.join(root, name))
    return None if txt is None else txt.strip()


def set_sysctl(root: str, name: str, value: Optional[str]) -> Dict[str, Any]:
    """Write one sysctl through /proc/sys (no shell) and read back what is in force."""
    path = os.path.join(root, name)
    rec = {"name": name.replace("/", "."), "requested": value}  # type: Dict[str, Any]
    before = read_sysctl(root, name)
    rec["before"] = before
    if before is None and not os.path.exists(path):
        rec["status"] = "absent"
        rec["in_force"] = None
        return rec
    if value is None:
        rec["status"] = "untouched"
    else:
        try:
            with open(path, "w") as f:
                f.write(value + "\n")
            rec["status"] = "set"
        except OSError as e:
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"
    rec["in_force"] = read_sysctl(root, name)
    if value is not None and rec["status"] == "set" and rec["in_force"] != value:
        # e.g. a policy file that shows a list with the active one marked
        rec["status"] = "mismatch"
    return rec
