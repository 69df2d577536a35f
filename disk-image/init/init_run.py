"""Running the job, for numa-lb-init: the mix runner's command line, its
watchdog budget, the run itself (stderr teed to the console) and killing it
with everything below it when the watchdog fires. In checkpoint mode the
runner is started before `m5 checkpoint`, waiting (mixrunner.py --serve),
and gets its arguments after the restore: every restored run skips the
interpreter's start and the imports (prestart_runner, take_request).
Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, List, Optional

from init_formats import JobError
from init_system import read_file

DEFAULT_WATCHDOG_S = 3600.0
# The user-level, counter-driven policies: the job names one, this init starts
# its daemon (daemons/numa_lb_daemon.py, installed in PREFIX/bin) beside the
# mix runner. The same four names as daemons/ and the sweep's POLICIES.
DAEMON_POLICIES = ("imar", "imar2", "devil", "plb")
DAEMON_READY_S = 120.0  # guest seconds for the daemon to open its counters
DAEMON_STOP_S = 30.0  # after SIGTERM, for its summary
M5_ADDR_BASE = "0xFFFF0000"  # m5 --addr's default window (workloads/m5ops)
PRESTART_READY_S = 120.0  # guest seconds for the waiting runner's imports
PRESTART_ANSWER_S = 60.0  # for its answer to the request (it checks, then runs)


def daemon_argv(
    python: str, prefix: str, job: Dict[str, Any], outdir: str, backend: str, addr: bool
) -> List[str]:
    """How the init starts the daemon of the job's policy (the host tests
    compare against this); the daemon reads the mix runner's pid from stdin."""
    policy = job["policy"]
    params = job.get("daemon_params") or {}
    if not isinstance(params, dict):
        raise JobError("daemon_params must be a JSON object")
    argv = [python, os.path.join(prefix, "bin", "numa_lb_daemon.py"), policy,
            "--log", os.path.join(outdir, "daemon-%s.jsonl" % policy),
            "--parent-from-stdin", "--backend", backend,
            "--params", json.dumps(params, sort_keys=True)]  # fmt: skip
    if isinstance(job.get("seed"), int):
        argv += ["--seed", str(job["seed"])]
    if addr:
        argv += ["--m5-addr", M5_ADDR_BASE]
    if job.get("switch_marks") is True:  # per-task counts from the bridge (issue 39)
        argv += ["--switch-marks"]
    return argv


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
        python = self.runner_python()
        roi = None  # type: Optional[List[str]]
        workid = opts.get("roi_workid", 1)
        if self.backend == "gem5" and workid is not None:
            roi = [self.m5] + self.m5_options() + [str(int(workid))]
        argv = mixrunner_argv(python, self.prefix, job_path, self.outdir, opts, roi)
        env = self.runner_env()
        daemon = None
        if job.get("policy") in DAEMON_POLICIES:
            daemon = self.start_daemon(job, python, env)  # refuses (JobError) before the mix
        self.log("run: %s" % " ".join(argv))
        t = self.take_request(argv)  # the pre-started runner runs it (checkpoint mode)
        if t is None:
            mode = "ab" if "prestart" in self.status else "wb"  # keep a dead waiter's lines
            out = open(os.path.join(self.rundir, "mixrunner.out"), mode)
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.PIPE, env=env, start_new_session=True,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            out.close()
            err_path = os.path.join(self.rundir, "mixrunner.err")
            t = threading.Thread(
                target=self._tee, args=(self.proc.stderr, err_path, mode), daemon=True
            )
            t.start()
        if daemon is not None:
            self.give_parent(daemon, self.proc.pid)
        rc = self.proc.wait()
        t.join(10)
        if daemon is not None:
            self.stop_daemon(daemon)
        return rc

    def runner_python(self) -> str:
        return self.a.python or sys.executable or "/usr/bin/python3"

    def runner_env(self) -> Dict[str, str]:
        if self.host:
            return dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        return {
            "PYTHONHASHSEED": "0",  # reproducible set/str-hash order in the runner
            "PATH": self.prefix
            + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    # ----------------------------------------------------- pre-started runner

    def prestart_runner(self) -> None:
        """Checkpoint mode, before `m5 checkpoint`: start the mix runner as
        run_job would (same interpreter, env, cwd, session, stdout file,
        stderr tee) but with `--serve FD --rundir RUNDIR`, and wait for its
        "ready" (imports done). take_request hands it the arguments after
        the restore. Best effort: a runner that does not get ready is killed
        and run_job starts one as without a checkpoint."""
        self.prestarted = None  # type: Any
        t0 = time.monotonic()
        ours, theirs = socket.socketpair()
        argv = [self.runner_python(), os.path.join(self.prefix, "bin", "mixrunner.py"),
                "--serve", str(theirs.fileno()), "--rundir", self.rundir]  # fmt: skip
        self.status["prestart"] = {"used": False, "error": None}
        self.log("prestart: %s" % " ".join(argv))
        out = open(os.path.join(self.rundir, "mixrunner.out"), "wb")
        try:
            p = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.PIPE, env=self.runner_env(),
                start_new_session=True, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        except OSError as e:
            ours.close()
            self.prestart_failed("cannot start it: %s" % e)
            return
        finally:
            out.close()
            theirs.close()
        self.proc = p  # the watchdog's kill_job takes it from here
        t = threading.Thread(
            target=self._tee, args=(p.stderr, os.path.join(self.rundir, "mixrunner.err")),
            daemon=True,
        )  # fmt: skip
        t.start()
        line = read_line(ours.fileno(), PRESTART_READY_S)
        if line != "ready":
            ours.close()
            self.end_waiter(p, t)
            self.prestart_failed("no 'ready' within %.0f s (%r, exit %s)"
                                 % (PRESTART_READY_S, line, p.returncode))  # fmt: skip
            return
        self.prestarted = (p, ours, t)
        self.status["prestart"]["ready_s"] = round(time.monotonic() - t0, 3)
        self.log("prestart: mix runner pid %d waiting, ready in %.2f s"
                 % (p.pid, time.monotonic() - t0))  # fmt: skip

    def take_request(self, argv: List[str]) -> Optional[threading.Thread]:
        """Hand ARGV (as run_job would exec it) to the pre-started runner: its
        tee thread when it took the request (self.proc is the runner), None
        when there is none or it refused or died (logged: run_job then starts
        the runner itself)."""
        pre = getattr(self, "prestarted", None)
        if pre is None:
            return None
        self.prestarted = None
        p, sock, t = pre
        why = None  # type: Optional[str]
        if p.poll() is not None:
            why = "the waiting runner exited with %s" % p.returncode
        else:
            req = json.dumps({"argv": argv[2:]}, sort_keys=True) + "\n"
            try:
                sock.sendall(req.encode())
                answer = read_line(sock.fileno(), PRESTART_ANSWER_S)
            except OSError as e:
                answer = "request not sent: %s" % e
            if answer != "ok":
                why = answer or "no answer (exit %s)" % p.poll()
        sock.close()
        if why is None:
            self.status["prestart"]["used"] = True
            self.log("run: by the pre-started mix runner, pid %d" % p.pid)
            return t
        self.end_waiter(p, t)
        self.prestart_failed(why)
        return None

    def prestart_failed(self, why: str) -> None:
        self.status["prestart"].update(used=False, error=why)
        self.proc = None
        self.log("prestart: %s; the mix runner starts as without a checkpoint" % why)

    def end_waiter(self, p: Any, t: threading.Thread) -> None:
        """Reap a waiting runner that will not run the job (kill it if need be)."""
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        t.join(5)

    def drop_prestart(self) -> None:
        """A waiting runner that got no request (no job, a refused daemon, an
        error): close its socket (it exits, no request) and reap it."""
        pre = getattr(self, "prestarted", None)
        if pre is None:
            return
        self.prestarted = None
        p, sock, t = pre
        sock.close()
        self.end_waiter(p, t)
        self.log("prestart: the waiting mix runner got no request, exit %s" % p.returncode)

    # ------------------------------------------------------------- daemon

    def start_daemon(self, job: Dict[str, Any], python: str, env: Dict[str, str]) -> Any:
        """Start the policy's daemon and wait for its 'ready' line: a daemon that
        cannot run here (no counters under QEMU) exits first, and its one-line
        reason fails the job before any program starts."""
        argv = daemon_argv(python, self.prefix, job, self.outdir, self.backend or "host",
                           self.m5_options() == ["--addr"])  # fmt: skip
        self.log("daemon: %s" % " ".join(argv))
        err = open(os.path.join(self.rundir, "daemon.err"), "wb")
        p = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
            start_new_session=True,
        )  # fmt: skip
        err.close()
        self.daemon = p
        text = read_line(p.stdout.fileno(), DAEMON_READY_S)
        if text.startswith("numa-lb-daemon: ready"):
            self.log(text)
            self.status["daemon"] = {"policy": job["policy"], "ready": text}
            return p
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        why = read_file(os.path.join(self.rundir, "daemon.err")).strip().splitlines()
        msg = why[-1] if why else "no 'ready' within %.0f s (%r)" % (DAEMON_READY_S, text)
        self.status["daemon"] = {"policy": job["policy"], "exit": rc, "error": msg}
        raise JobError("daemon %s (exit %s): %s" % (job["policy"], rc, msg))

    def give_parent(self, p: Any, pid: int) -> None:
        try:
            p.stdin.write(b"%d\n" % pid)
            p.stdin.close()
        except OSError as e:
            self.log("daemon: cannot hand it the mix runner's pid: %s" % e)

    def stop_daemon(self, p: Any) -> None:
        """SIGTERM; the daemon writes its summary and exits (else SIGKILL)."""
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(DAEMON_STOP_S)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        self.status.setdefault("daemon", {})["exit"] = rc
        self.log("daemon exit %s" % rc)

    def _tee(self, pipe: IO[bytes], path: str, mode: str = "wb") -> None:
        with open(path, mode) as f:
            for raw in iter(pipe.readline, b""):
                f.write(raw)
                f.flush()
                self.log("mixrunner: " + raw.decode(errors="replace").rstrip())

    def kill_job(self) -> None:
        """SIGKILL the mix runner and everything below it (each program runs in a
        session of its own, so the runner's process group is not enough), and
        the policy daemon if there is one."""
        d = getattr(self, "daemon", None)
        if d is not None and d.poll() is None:
            d.kill()
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


def read_line(fd: int, timeout: float) -> str:
    """What FD sends up to a newline (stripped), within TIMEOUT seconds; what
    came so far at end of file or at the deadline."""
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 256)
        if not chunk:
            break
        line += chunk
    return line.decode(errors="replace").strip()


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
