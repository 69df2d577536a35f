"""Running the job, for numa-lb-init: the mix runner's command line, its
watchdog budget, the run itself (stderr teed to the console) and killing it
with everything below it when the watchdog fires.
Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import json
import os
import signal
import subprocess
import sys
import threading
from typing import IO, Any, Dict, List, Optional

from init_formats import JobError
from init_system import read_file

DEFAULT_WATCHDOG_S = 3600.0


def default_watchdog(job: Dict[str, Any], opts: Dict[str, Any]) -> float:
    if opts.get("watchdog_s") is not None:
        return float(opts["watchdog_s"])
    t = job.get("timeout_s")
    if isinstance(t, (int, float)) and t > 0:
        return 1.5 * float(t) + 60.0
    return DEFAULT_WATCHDOG_S


def mixrunner_argv(
    python: str,
    prefix: str,
    job_path: str,
    outdir: str,
    opts: Dict[str, Any],
    roi: Optional[List[str]] = None,
) -> List[str]:
    """How the init runs the mix runner (the host tests compare against this).
    ROI: [M5, OPTIONS..., ID]: the runner brackets the mix with work items."""
    argv = [python, os.path.join(prefix, "bin", "mixrunner.py"), job_path, "--outdir", outdir]
    argv += ["--bin-dir", os.path.join(prefix, "bin")]
    if roi:
        argv += ["--roi"] + roi
    extra = opts.get("mixrunner_args") or []
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise JobError("init option mixrunner_args must be a list of strings")
    argv += extra
    if opts.get("dry_run"):
        argv.append("--dry-run")
    return argv


class Run:
    """Init's run of the mix runner (mixed into Init: uses self.a, self.log,
    self.prefix, self.rundir, self.outdir, self.m5, self.m5_options, self.backend,
    self.host; sets self.proc)."""

    def run_job(self, job: Dict[str, Any], opts: Dict[str, Any]) -> int:
        os.makedirs(self.outdir, exist_ok=True)
        job_path = os.path.join(self.rundir, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f, indent=1, sort_keys=True)
        python = self.a.python or sys.executable or "/usr/bin/python3"
        roi = None  # type: Optional[List[str]]
        workid = opts.get("roi_workid", 1)
        if self.backend == "gem5" and workid is not None:
            roi = [self.m5] + self.m5_options() + [str(int(workid))]
        argv = mixrunner_argv(python, self.prefix, job_path, self.outdir, opts, roi)
        env = {
            "PYTHONHASHSEED": "0",  # reproducible set/str-hash order in the runner
            "PATH": self.prefix
            + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if self.host:
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.log("run: %s" % " ".join(argv))
        out = open(os.path.join(self.rundir, "mixrunner.out"), "wb")
        self.proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.PIPE, env=env, start_new_session=True,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        out.close()
        err_path = os.path.join(self.rundir, "mixrunner.err")
        t = threading.Thread(target=self._tee, args=(self.proc.stderr, err_path), daemon=True)
        t.start()
        rc = self.proc.wait()
        t.join(10)
        return rc

    def _tee(self, pipe: IO[bytes], path: str) -> None:
        with open(path, "wb") as f:
            for raw in iter(pipe.readline, b""):
                f.write(raw)
                f.flush()
                self.log("mixrunner: " + raw.decode(errors="replace").rstrip())

    def kill_job(self) -> None:
        """SIGKILL the mix runner and everything below it (each program runs in a
        session of its own, so the runner's process group is not enough)."""
        p = getattr(self, "proc", None)
        if p is not None and p.poll() is None:
            victims = [p.pid] + descendants(p.pid)
            self.log("killing the mix runner and %d descendants" % (len(victims) - 1))
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGSTOP)  # no new children while we kill
                except OSError:
                    pass
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass


def descendants(pid: int) -> List[int]:
    """Every live descendant of PID (from /proc/<pid>/stat parent links)."""
    children = {}  # type: Dict[int, List[int]]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = read_file("/proc/%s/stat" % name)
        rp = stat.rfind(")")
        if rp < 0:
            continue
        fields = stat[rp + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    out = []  # type: List[int]
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out
