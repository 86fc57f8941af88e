"""A two-node Ray cluster of the tests' own on 127.0.0.1: a head and a second node, each a
``ray start`` with its own temporary folder, small (one CPU each, a small object store, no
dashboard); stopped and removed afterwards, leaving no process behind.

The second node offers a custom resource, :data:`SECOND_NODE`, so that an experiment can ask
for it and land there. Both nodes' workers import mosaic from this checkout (``PYTHONPATH``).

The cluster and its drivers (whatever runs with :attr:`Cluster.env`) are kept apart from the
user's own Ray: ``HOME`` is a folder of the cluster's (so ``~/.ray``, where Ray 2.60+ finds an
``auth_token`` that turns token authentication on, is not the user's), and no inherited
``RAY_*`` variable (``RAY_ADDRESS``, ``RAY_AUTH_MODE``, ``RAY_AUTH_TOKEN``, ...) reaches them;
only those set here do.
Anything that keeps the cluster from starting is a :class:`ClusterError` with the reason: the
tests fail with it, they never skip (also not when ray is missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The custom resource only the second node has: ``{SECOND_NODE: 1}`` places work there.
SECOND_NODE = "mosaic_second_node"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
#: Small on purpose: the tests share a 2-core machine with other work.
OBJECT_STORE_BYTES = 80 * 1024 * 1024


class ClusterError(RuntimeError):
    """The test cluster could not be started; the message says why."""


@dataclass
class Cluster:
    """A running test cluster: the head's address, both nodes' temp folders and node ids, and
    the environment of every process that belongs to it or connects to it."""

    address: str
    head_dir: Path
    second_dir: Path
    env: dict[str, str]
    #: The ``HOME`` of the nodes and of the drivers that use :attr:`env`.
    home: Path
    head_node: str = ""
    second_node: str = ""
    _pids: set[int] = field(default_factory=set)

    def second_raylet_pid(self) -> int:
        """The pid of the second node's raylet (to kill it mid-run)."""
        return _raylet_of(self.second_dir)

    def node_processes(self) -> set[int]:
        """Every live process either node started (raylets, workers, GCS, ...): those that
        name a node's folder, and their descendants (a worker retitles itself ``ray::IDLE``,
        which hides its command line)."""
        parents = _parents()
        found = {pid for pid in parents if _in_folders(pid, self.head_dir, self.second_dir)}
        while True:
            more = {pid for pid, parent in parents.items() if parent in found} - found
            if not more:
                return {pid for pid in found if _exists(pid)}
            found |= more


def ray_binary() -> str:
    """The ``ray`` command of this interpreter's environment; :class:`ClusterError` if absent."""
    found = Path(sys.executable).with_name("ray")
    if found.exists():
        return str(found)
    which = shutil.which("ray")
    if which is None:
        raise ClusterError("the ray command was not found: pip install 'mosaic[ray]' "
                           "(the Ray tests need it; they do not skip)")
    return which


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(pythonpath: tuple[str, ...] = ()) -> Cluster:
    """Start a head and a second node on 127.0.0.1; :func:`stop` it. The nodes' workers import
    from this checkout and from ``pythonpath``."""
    ray = ray_binary()
    head_dir = Path(tempfile.mkdtemp(prefix="mr-h-"))
    second_dir = Path(tempfile.mkdtemp(prefix="mr-s-"))
    home = Path(tempfile.mkdtemp(prefix="mr-home-"))
    env = {**isolated_environ(home), "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), *pythonpath, os.environ.get("PYTHONPATH", "")) if p),
        "RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
        # Ray starts its workers at nice 15; on a machine shared with other work that halves
        # their share of the CPU against a local run (benchmarks/ray_cluster.py compares).
        "RAY_worker_niceness": "0"}
    port = free_port()
    address = f"127.0.0.1:{port}"
    env["RAY_ADDRESS"] = address  # what `auto` finds, as after a `ray start` on this machine
    cluster = Cluster(address, head_dir, second_dir, env, home)
    common = ["--num-cpus=1", f"--object-store-memory={OBJECT_STORE_BYTES}",
              "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    try:
        _ray(env, ray, "start", "--head", f"--port={port}", f"--temp-dir={head_dir}",
             "--include-dashboard=false", *common,
             what="ray start --head")
        _ray(env, ray, "start", f"--address={address}", f"--temp-dir={second_dir}",
             f"--resources={json.dumps({SECOND_NODE: 1})}", *common, what="ray start (second)")
        _wait_for_nodes(cluster)
        return cluster
    except BaseException:
        stop(cluster)
        raise


def stop(cluster: Cluster) -> None:
    """Stop both nodes (``ray stop`` only knows one temp folder: their processes are ended
    here, by pid, SIGTERM then SIGKILL) and remove their folders and the cluster's ``HOME``."""
    try:
        for _ in range(2):
            pids = cluster.node_processes()
            if not pids:
                break
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
                deadline = time.monotonic() + STOP_TIMEOUT_S / 3
                while time.monotonic() < deadline and any(_exists(p) for p in pids):
                    time.sleep(0.1)
                pids = {p for p in pids if _exists(p)}
                if not pids:
                    break
    finally:
        shutil.rmtree(cluster.head_dir, ignore_errors=True)
        shutil.rmtree(cluster.second_dir, ignore_errors=True)
        shutil.rmtree(cluster.home, ignore_errors=True)


def isolated_environ(home: Path) -> dict[str, str]:
    """This process's environment without any ``RAY_*`` variable, with ``HOME`` at ``home``:
    what the user set up for their own Ray (an address, an auth mode or token, ``~/.ray``)
    cannot reach the test cluster."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
            "HOME": str(home)}


def _ray(env: dict[str, str], *command: str, what: str) -> None:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=START_TIMEOUT_S, cwd=REPO)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ClusterError(f"{what} failed: {error}") from None
    if done.returncode != 0:
        raise ClusterError(f"{what} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-3000:]}")


def _wait_for_nodes(cluster: Cluster) -> None:
    """Wait until both nodes are alive in the cluster; record their node ids."""
    probe = (f"import json, ray; ray.init(address={cluster.address!r}, logging_level='ERROR'); "
             "print(json.dumps([[n['NodeID'], n['Alive'], n['Resources']] for n in ray.nodes()]))")
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        done = subprocess.run([sys.executable, "-c", probe], env=cluster.env, capture_output=True,
                              text=True, timeout=START_TIMEOUT_S, cwd=REPO)
        if done.returncode == 0:
            nodes = [n for n in json.loads(done.stdout.strip().splitlines()[-1]) if n[1]]
            if len(nodes) == 2:
                for node_id, _, resources in nodes:
                    if SECOND_NODE in resources:
                        cluster.second_node = node_id
                    else:
                        cluster.head_node = node_id
                return
            last = f"{len(nodes)} node(s) alive"
        else:
            last = done.stderr[-2000:]
        time.sleep(1.0)
    raise ClusterError(f"the cluster did not come up within {START_TIMEOUT_S:g} s: {last}")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _in_folders(pid: int, *folders: Path) -> bool:
    """Whether ``pid``'s command line or environment names one of ``folders`` (every process
    of a node does: its session folder is under the node's temp folder)."""
    names = [str(f) for f in folders]
    for part in ("cmdline", "environ"):
        try:
            data = Path(f"/proc/{pid}/{part}").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if any(name in data for name in names):
            return True
    return False


def _raylet_of(folder: Path) -> int:
    for pid in _parents():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"raylet") and _in_folders(pid, folder):
            return pid
    raise ClusterError(f"no raylet of the node in {folder}")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for every purpose here
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
