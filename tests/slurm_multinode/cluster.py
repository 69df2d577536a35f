#!/usr/bin/env python3
"""A private multi-node Slurm cluster on one machine, for the slurm-multinode tier.

One munged and one slurmctld in the host's network namespace; N slurmd compute
nodes, each in a network namespace of its own (``ip netns``) with its own UTS
namespace (hostname = NodeName), its own address on a private /24 and a veth
pair whose host end sits on a bridge made for the test:

    host ns:   bridge nlb<tag>br 10.213.S.1/24  <- slurmctld listens here
                 |-- veth nlb<tag>h1 <-> nlb<tag>c1 (netns nlb<tag>-n1, 10.213.S.11, host nlbn1)
                 `-- veth nlb<tag>h2 <-> nlb<tag>c2 (netns nlb<tag>-n2, 10.213.S.12, host nlbn2)

slurmd is started with ``nsenter --net`` (not ``ip netns exec``, which would
remount /sys and hide the cgroup file system slurmd needs) and ``unshare
--uts`` (its own hostname, so jobs on the node see it). munge is shared
through its socket file. The file system is NOT separated: every node sees
the same paths, like a cluster with one shared file system (the sweep output
directory and the artifact cache live on it).

Everything created is written to ``<base>/cluster.json`` as it is created, so
``cleanup`` (also ``python3 cluster.py cleanup <base>/cluster.json``) can undo
it after any failure: it kills the processes of the test's namespaces (only
processes started by this cluster live there), slurmctld and munged by their
recorded pid after checking that their command line names this cluster's
directory, then deletes the namespaces, veth pairs and the bridge. Nothing
else on the machine is touched.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SBIN = "/usr/sbin:/sbin"
EXES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel")


class ClusterError(RuntimeError):
    """The cluster cannot be made here; the message is the reason."""


def _path_env() -> str:
    return os.environ.get("PATH", "") + ":" + SBIN


def _run(cmd: list[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60, **kw)
    if check and r.returncode != 0:
        raise ClusterError(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {r.stderr.strip()}")
    return r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def _pick_subnet(tag: int) -> ipaddress.IPv4Network:
    """A /24 in 10.213.0.0/16 that no interface or route of this host uses."""
    used = _run(["ip", "-4", "-o", "addr"], check=False).stdout
    used += _run(["ip", "-4", "route"], check=False).stdout
    nets = []
    for word in used.split():
        try:
            nets.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    for i in range(254):
        cand = ipaddress.ip_network(f"10.213.{(tag + i) % 254 + 1}.0/24")
        if not any(cand.overlaps(n) for n in nets if n.prefixlen > 0):
            return cand
    raise ClusterError("no free /24 in 10.213.0.0/16 for the test network")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.lower()
    except OSError:
        pass
    return ""


def netns_pids(ns: str) -> list[int]:
    r = _run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()] if r.returncode == 0 else []


def kill_netns(ns: str, grace_s: float = 5.0, hard: bool = False) -> list[int]:
    """Stop every process of a test namespace (they are all this cluster's);
    hard=True: SIGKILL at once, as when a node dies."""
    pids = netns_pids(ns)
    if not pids:
        return []
    for sig in ([] if hard else [signal.SIGTERM]) + [signal.SIGKILL]:
        for pid in netns_pids(ns):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 10.0)
        while time.monotonic() < deadline and netns_pids(ns):
            time.sleep(0.1)
        if not netns_pids(ns):
            break
    return pids


def _stop_pid(pid: int, marker: str) -> None:
    """SIGTERM, then SIGKILL, a daemon we started (its command line names `marker`)."""
    if not pid or marker not in _cmdline(pid):
        return
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)


def cleanup(manifest: Path) -> list[str]:
    """Undo everything the manifest lists; idempotent; returns what it did."""
    try:
        m = json.loads(Path(manifest).read_text())
    except (OSError, ValueError):
        return []
    done = []
    marker = m.get("base", "\0")
    for ns in m.get("netns", []):
        if kill_netns(ns, grace_s=3.0):
            done.append(f"killed processes of {ns}")
    for name, d in reversed(list(m.get("daemons", {}).items())):
        pid = d.get("pid") or _read_pid(Path(d["pidfile"]))
        if pid and marker in _cmdline(pid):
            _stop_pid(pid, marker)
            done.append(f"stopped {name} ({pid})")
    for ns in m.get("netns", []):
        if _run(["ip", "netns", "del", ns], check=False).returncode == 0:
            done.append(f"deleted netns {ns}")
    for link in m.get("links", []):
        if _run(["ip", "link", "del", link], check=False).returncode == 0:
            done.append(f"deleted link {link}")
    return done


def _read_pid(pidfile: Path) -> int:
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


class Cluster:
    """``up()``, then ``env()`` for the clients; ``stop_node``/``start_node``;
    ``down()`` always (also after a failed ``up``)."""

    def __init__(
        self,
        base: Path,
        nodes: int = 2,
        cpus: int = 2,
        mem_mib: int = 4096,
        max_array_size: int = 5,
        slurmd_timeout_s: int = 10,
    ) -> None:
        self.base = Path(base).resolve()
        self.tag = f"{os.getpid() % 100000:05d}"
        self.names = [f"nlbn{i + 1}" for i in range(nodes)]
        self.cpus = cpus
        self.mem_mib = mem_mib
        self.max_array_size = max_array_size
        self.slurmd_timeout_s = slurmd_timeout_s
        self.manifest = self.base / "cluster.json"
        self.conf = self.base / "slurm.conf"
        self.m: dict[str, Any] = {"base": str(self.base), "netns": [], "links": [], "daemons": {}}
        self.addr: dict[str, str] = {}
        self.host_addr = ""

    # ------------------------------------------------------------- records
    def _save(self) -> None:
        tmp = self.manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.m, indent=1))
        os.replace(tmp, self.manifest)

    def ns(self, node: str) -> str:
        return f"nlb{self.tag}-{node.removeprefix('nlb')}"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf), "PATH": _path_env()}

    # ------------------------------------------------------------- checks
    @staticmethod
    def why_not() -> str | None:
        """Why this machine cannot host the cluster (None: it can)."""
        if os.geteuid() != 0:
            return "needs root (network namespaces, veth pairs, slurmd and munged)"
        for exe in ("ip", "nsenter", "unshare", *EXES):
            if not shutil.which(exe, path=_path_env()):
                return f"{exe} not found (tests/slurm/setup_slurm.sh installs Slurm and munge)"
        probe = f"nlbprobe{os.getpid() % 100000}"
        r = _run(["ip", "netns", "add", probe], check=False)
        if r.returncode != 0:
            return f"network namespaces cannot be made here: {r.stderr.strip()}"
        try:
            r = _run(
                ["nsenter", f"--net=/run/netns/{probe}", "unshare", "--uts", "true"], check=False
            )
            if r.returncode != 0:
                return f"UTS namespaces cannot be made here: {r.stderr.strip()}"
        finally:
            _run(["ip", "netns", "del", probe], check=False)
        return None

    # ------------------------------------------------------------- network
    def _network(self) -> None:
        net = _pick_subnet(int(self.tag))
        hosts = list(net.hosts())
        self.host_addr = str(hosts[0])
        br = f"nlb{self.tag}br"
        _run(["ip", "link", "add", br, "type", "bridge"])
        self.m["links"].append(br)
        self._save()
        _run(["ip", "addr", "add", f"{self.host_addr}/24", "dev", br])
        _run(["ip", "link", "set", br, "up"])
        for i, node in enumerate(self.names):
            ns = self.ns(node)
            _run(["ip", "netns", "add", ns])
            self.m["netns"].append(ns)
            self._save()
            h, c = f"nlb{self.tag}h{i + 1}", f"nlb{self.tag}c{i + 1}"
            _run(["ip", "link", "add", h, "type", "veth", "peer", "name", c])
            self.m["links"].append(h)
            self._save()
            _run(["ip", "link", "set", c, "netns", ns])
            _run(["ip", "link", "set", h, "master", br])
            _run(["ip", "link", "set", h, "up"])
            addr = str(hosts[10 + i])
            self.addr[node] = addr
            for cmd in (
                ["ip", "addr", "add", f"{addr}/24", "dev", c],
                ["ip", "link", "set", c, "up"],
                ["ip", "link", "set", "lo", "up"],
            ):
                _run(["ip", "netns", "exec", ns, *cmd])
        self.m["addresses"] = {"slurmctld": self.host_addr, **self.addr}
        self._save()

    # ------------------------------------------------------------- config
    def _slurm_conf(self) -> str:
        host = socket.gethostname().split(".")[0]
        d = self.base
        sock = d / "munge" / "munge.socket"
        lines = [
            "# generated by tests/slurm_multinode/cluster.py",
            "ClusterName=numalbmulti",
            f"SlurmctldHost={host}({self.host_addr})",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            # cred_expire: a job requeued after its node died waits for the old job
            # credential to expire before it starts again (120 s by default)
            f"AuthInfo=socket={sock},cred_expire=10",
            "CredType=cred/munge",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd-%n.log",
            f"PlugStackConfig={d}/plugstack.conf",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            "JobRequeue=1",
            f"MaxArraySize={self.max_array_size}",
            f"SlurmdTimeout={self.slurmd_timeout_s}",
            "MessageTimeout=5",
            "MinJobAge=900",
            "KillWait=5",
            "MpiDefault=none",
        ]
        for node in self.names:
            lines.append(
                f"NodeName={node} NodeHostname={node} NodeAddr={self.addr[node]} "
                f"CPUs={self.cpus} RealMemory={self.mem_mib} State=UNKNOWN"
            )
        lines.append(
            f"PartitionName=study Nodes={','.join(self.names)} Default=YES "
            "MaxTime=INFINITE State=UP"
        )
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------- daemons
    def _daemon(self, name: str, cmd: list[str], pidfile: Path) -> None:
        self.m["daemons"][name] = {"pidfile": str(pidfile)}
        self._save()
        r = _run(cmd, check=False, env={**os.environ, "PATH": _path_env()})
        if r.returncode != 0:
            raise ClusterError(
                f"{name} did not start (exit {r.returncode}): {(r.stderr or r.stdout).strip()}"
            )
        for _ in range(100):
            pid = _read_pid(pidfile)
            if pid and _alive(pid):
                self.m["daemons"][name]["pid"] = pid
                self._save()
                return
            time.sleep(0.1)
        raise ClusterError(f"{name} wrote no pid file {pidfile}")

    def start_node(self, node: str) -> None:
        """slurmd of `node` in its namespace, with its own hostname."""
        pidfile = self.base / f"slurmd-{node}.pid"
        pidfile.unlink(missing_ok=True)
        (self.base / "spool" / node).mkdir(parents=True, exist_ok=True)
        cmd = [
            "nsenter", f"--net=/run/netns/{self.ns(node)}",
            "unshare", "--uts", "--",
            "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh", node,
            "slurmd", "-f", str(self.conf), "-N", node,
        ]  # fmt: skip
        self._daemon(f"slurmd-{node}", cmd, pidfile)

    def stop_node(self, node: str) -> list[int]:
        """The node dies: its slurmd and every job process on it get SIGKILL."""
        return kill_netns(self.ns(node), hard=True)

    def up(self, timeout_s: float = 60.0) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self._save()
        for sub in ("state", "spool", "munge"):
            (self.base / sub).mkdir(exist_ok=True)
        (self.base / "munge").chmod(0o755)
        key = self.base / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (self.base / "plugstack.conf").write_text("")
        self._network()
        self.conf.write_text(self._slurm_conf())
        m = self.base / "munge"
        self._daemon(
            "munged",
            [
                "munged",
                f"--key-file={key}",
                f"--socket={m / 'munge.socket'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'munge.seed'}",
                "--force",
            ],
            m / "munged.pid",
        )
        self._daemon(
            "slurmctld", ["slurmctld", "-f", str(self.conf), "-i"], self.base / "slurmctld.pid"
        )
        for node in self.names:
            self.start_node(node)
        self.wait_nodes({n: "idle" for n in self.names}, timeout_s)

    def node_states(self) -> dict[str, str]:
        r = _run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], check=False, env={**os.environ, **self.env()}
        )
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1].rstrip("*~#$@+")
        return out

    def wait_nodes(self, want: dict[str, str], timeout_s: float) -> dict[str, str]:
        t0 = time.monotonic()
        got: dict[str, str] = {}
        while time.monotonic() - t0 < timeout_s:
            got = self.node_states()
            if all(got.get(n) == s for n, s in want.items()):
                return got
            time.sleep(0.5)
        log = self.base / "slurmctld.log"
        tail = log.read_text()[-600:] if log.exists() else ""
        raise ClusterError(f"nodes not {want} after {timeout_s:.0f} s (sinfo: {got}); {tail}")

    def down(self) -> list[str]:
        return cleanup(self.manifest)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    """`cluster.py cleanup MANIFEST` (the run script's trap); `cluster.py probe
    DIR` (up and down once; prints the reason when it cannot run here);
    `cluster.py up DIR` (by hand: prints the SLURM_CONF to export, Ctrl-C or
    SIGTERM tears it down)."""
    if len(argv) == 2 and argv[0] == "cleanup":
        for line in cleanup(Path(argv[1])):
            print(f"cleanup: {line}")
        return 0
    if len(argv) == 2 and argv[0] == "probe":
        # bring a cluster up and down once; print why it cannot run, if it cannot
        why = Cluster.why_not()
        if why is None:
            c = Cluster(Path(argv[1]))
            try:
                c.up()
            except (ClusterError, OSError, subprocess.SubprocessError) as e:
                why = f"the cluster did not come up: {e}".replace("\n", " ")[:600]
            finally:
                c.down()
        if why:
            print(why)
            return 1
        return 0
    if len(argv) == 2 and argv[0] == "up":
        why = Cluster.why_not()
        if why:
            print(f"cannot: {why}", file=sys.stderr)
            return 1
        c = Cluster(Path(argv[1]))
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            c.up()
            print(f"export SLURM_CONF={c.conf}; nodes {c.node_states()}; Ctrl-C stops it")
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
        finally:
            c.down()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
