"""A Ray cluster of separate processes on loopback for the serving tests.

Each node is ``ray start ... --block`` in a session of its own: every process it
starts (GCS, raylet, agents, workers, replicas) shares that session, so a node is
stopped -- or killed, to simulate losing a machine -- by signalling its session,
without ``ray stop`` (which would stop every Ray process on the machine, other
users' too).  Ports are chosen free, CPUs and object store are tiny, and the
temporary directory is short (Ray's unix socket paths must fit 107 bytes).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from serve_helpers import REPO, free_port

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB
START_TIMEOUT = 180.0
STOP_GRACE_S = 2.0
#: the prefix of the line a driver subprocess answers :meth:`Cluster.nodes` with
NODES_MARKER = "mxc-alive-nodes: "


def ray_executable() -> str:
    local = Path(sys.executable).with_name("ray")
    return str(local) if local.exists() else (shutil.which("ray") or "ray")


class RayNode:
    """``ray start --head`` (no *head_address*) or a node joining *head_address*."""

    def __init__(self, temp_dir: Path, head_address: str | None = None, num_cpus: float = 1):
        self.node_manager_port = free_port()
        args = [ray_executable(), "start", "--block", "--node-ip-address", "127.0.0.1",
                "--num-cpus", str(num_cpus), "--object-store-memory", str(OBJECT_STORE_BYTES),
                "--node-manager-port", str(self.node_manager_port),
                "--object-manager-port", str(free_port()),
                "--dashboard-agent-listen-port", str(free_port()),
                "--dashboard-agent-grpc-port", str(free_port()),
                "--metrics-export-port", str(free_port()),
                "--runtime-env-agent-port", str(free_port()),
                "--disable-usage-stats"]
        if head_address is None:
            self.port = free_port()
            self.address = f"127.0.0.1:{self.port}"
            args += ["--head", "--port", str(self.port), "--temp-dir", str(temp_dir),
                     "--include-dashboard", "false", "--dashboard-port", str(free_port()),
                     "--ray-client-server-port", str(free_port())]
        else:
            self.address = head_address
            args += ["--address", head_address]
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
                   PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log_path = temp_dir / f"node-{self.node_manager_port}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     cwd=REPO, start_new_session=True)
        self.sid = self.proc.pid  # the session (and process group) of every process of the node

    def processes(self) -> list[psutil.Process]:
        """Every live process of this node (its session), the ``ray start`` one included."""
        found = []
        for p in psutil.process_iter():
            try:
                if os.getsid(p.pid) == self.sid and p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except (ProcessLookupError, psutil.Error, PermissionError):
                continue
        return found

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        """Signal every process of the node and wait until none is left."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            procs = self.processes()
            if not procs:
                break
            for p in procs:
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
            psutil.wait_procs(procs, timeout=2)
        self.proc.poll()  # reap ``ray start`` (our child) if it is gone
        self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


class Cluster:
    """A head and a second node; ``nodes()`` maps node id -> ``RayNode``."""

    def __init__(self):
        self.temp_dir = Path(tempfile.mkdtemp(prefix="mxray", dir="/tmp"))
        self.head = RayNode(self.temp_dir)
        self.second: RayNode | None = None

    def start_second(self) -> None:
        self.wait_nodes(1)
        self.second = RayNode(self.temp_dir, head_address=self.head.address)
        self.wait_nodes(2)

    def wait_nodes(self, count: int) -> dict[str, RayNode]:
        """Wait until exactly *count* nodes are alive (while starting, or after one was
        killed: until the head has noticed)."""
        deadline = time.monotonic() + START_TIMEOUT
        nodes: dict[str, RayNode] = {}
        while time.monotonic() < deadline:
            if self.head.proc.poll() is not None:
                raise AssertionError(f"ray start exited {self.head.proc.returncode}: "
                                     f"{self.head.output()}")
            nodes = self.nodes()
            if len(nodes) == count:
                return nodes
            time.sleep(1)
        raise AssertionError(f"{count} Ray nodes expected, {len(nodes)} alive after "
                             f"{START_TIMEOUT}s: {self.head.output()}")

    def nodes(self) -> dict[str, RayNode]:
        """Alive node id -> RayNode, read from the cluster by a driver subprocess (so
        this test process never becomes a Ray driver itself)."""
        # Ray may print its own lines to stdout after ours ("raylet has lagging heartbeats
        # ..." under load): the answer is the line that carries the marker
        script = ("import json, ray; ray.init(address=%r, log_to_driver=False); "
                  "print(%r + json.dumps([[n['NodeID'], n['NodeManagerPort']] "
                  "for n in ray.nodes() if n['Alive']]))" % (self.head.address, NODES_MARKER))
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
        if out.returncode != 0:
            return {}
        import json
        ports = {n.node_manager_port: n for n in (self.head, self.second) if n is not None}
        answer = [ln[len(NODES_MARKER):] for ln in out.stdout.splitlines()
                  if ln.startswith(NODES_MARKER)]
        if not answer:
            return {}
        return {nid: ports[port] for nid, port in json.loads(answer[-1]) if port in ports}

    def stop(self) -> None:
        """SIGTERM, a short grace, then SIGKILL: some of a node's processes outlived 15 s of
        SIGTERMs (the grace this had), and nothing of the cluster is kept after a test."""
        try:
            for node in (self.second, self.head):
                if node is not None:
                    node.kill(signal.SIGTERM, timeout=STOP_GRACE_S)
        finally:
            for node in (self.second, self.head):
                if node is not None:
                    node.kill(signal.SIGKILL)
            shutil.rmtree(self.temp_dir, ignore_errors=True)
