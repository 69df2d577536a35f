"""The slurm-multinode tier's cluster: two slurmd nodes in network namespaces.

tests/slurm_multinode/run checks first that the cluster can be made here
(``cluster.py probe``) and prints ``SKIPPED slurm-multinode: <reason>`` when
not; this fixture then brings one up for the session and always tears it
down (also on failure, Ctrl-C or SIGTERM; the run script's trap calls
``cluster.py cleanup`` as a last resort).

Directories (all on one file system, which every node sees at the same
path, as a cluster's shared file system): ``<base>/cluster`` (config, state,
logs of the daemons), ``<base>/shared/out-*`` (sweep output directories),
``<base>/shared/cache`` (artifact cache for the lock test),
``<base>/shared/history`` (run history for the cost preview).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cluster import Cluster, ClusterError  # noqa: E402


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so that the fixture's finally runs


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("NLB_MULTINODE_DIR")
    return Path(env) if env else tmp_path_factory.mktemp("multinode")


@pytest.fixture(scope="session")
def cluster(base: Path) -> Iterator[Cluster]:
    why = Cluster.why_not()
    if why:
        pytest.skip(f"slurm-multinode: {why}")
    c = Cluster(base / "cluster")
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        try:
            c.up()
        except ClusterError as e:
            pytest.fail(f"the two-node cluster did not come up: {e}")
        yield c
    finally:
        done = c.down()
        signal.signal(signal.SIGTERM, old)
        print(f"\nslurm-multinode teardown: {'; '.join(done)}")


@pytest.fixture(scope="session")
def shared(base: Path) -> Path:
    d = base / "shared"
    d.mkdir(exist_ok=True)
    return d
