"""Shared helpers of the serving tests: the example MLP compiled once, a server subprocess.

Servers listen on 127.0.0.1 only, on ports the OS reports free, and every wait
is bounded; a server is always terminated (then killed) when its test ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
_CACHE: dict = {}
START_TIMEOUT = 120.0


def compiled_mlp(tmp_path_factory, batch=1, sign=None) -> Path:
    """The example MLP compiled for *batch* (once per session and key)."""
    key = (batch, str(sign))
    if key not in _CACHE:
        import mxc
        sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
        model = mxc.compile(sym, (args, aux), {"data": (batch, 784)})
        path = tmp_path_factory.mktemp("mlp") / "mlp.mxc"
        model.save(path, sign=sign)
        _CACHE[key] = path
    return _CACHE[key]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None,
         timeout: float = 30) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def infer_json(base: str, model: str, x, name: str = "data", datatype: str = "FP32",
               shape=None) -> tuple[int, dict]:
    body = json.dumps({"inputs": [{"name": name, "datatype": datatype,
                                   "shape": list(shape if shape is not None else x.shape),
                                   "data": x.ravel().tolist()}]}).encode()
    code, raw = http("POST", f"{base}/v2/models/{model}/infer", body,
                     {"Content-Type": "application/json"})
    return code, json.loads(raw)


def _limit_descriptors(n: int) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Server:
    """``mxc serve SOURCE ...`` as a subprocess on free loopback ports."""

    def __init__(self, source, *args: str, nofile: int | None = None):
        """*nofile*: the server's descriptor limit (soft and hard), as ``ulimit -n``."""
        self.port, self.grpc_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(Path(str(source)).parent / f"server-{self.port}.log", "w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mxc", "serve", str(source), "--port", str(self.port),
             "--grpc-port", str(self.grpc_port), *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
            preexec_fn=None if nofile is None else (lambda: _limit_descriptors(nofile)))

    def wait_ready(self) -> "Server":
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.output()}")
            with contextlib.suppress(OSError):
                if http("GET", f"{self.base}/v2/health/ready", timeout=2)[0] == 200:
                    return self
            time.sleep(0.3)
        raise AssertionError(f"server not ready in {START_TIMEOUT}s: {self.output()}")

    def output(self, whole: bool = False) -> str:
        """The server's output so far (its last 4,000 characters unless *whole*)."""
        if self.log.closed:   # after stop(): read the file again
            text = Path(self.log.name).read_bytes().decode(errors="replace")
        else:
            self.log.flush()
            self.log.seek(0)
            text = self.log.read().decode(errors="replace")
        return text if whole else text[-4000:]

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode

    def metric(self, name: str, **labels) -> float:
        """The value of one Prometheus sample on ``/metrics`` (0 when absent)."""
        text = http("GET", f"{self.base}/metrics")[1].decode()
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                sample, value = line.rsplit(" ", 1)
                got = sample[len(name):].strip("{}")
                if all(f'{k}="{v}"' in got.split(",") for k, v in labels.items()):
                    return float(value)
        return 0.0


def run_isolated(module: str, function: str, timeout: float = 120) -> str:
    """Run ``module.function()`` (a module of this folder) in a fresh interpreter and
    return its output; fails with that output when it raises.  For checks that import
    kserve: its gRPC protos and tritonclient's cannot share one process."""
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               RAY_USAGE_STATS_ENABLED="0")
    code = f"import sys; sys.path.insert(0, {here!r}); import {module}; {module}.{function}()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    assert done.returncode == 0, f"{module}.{function} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


class FakeRegistry:
    """The part of KServe's ``ModelRepository`` the repository watcher uses (kserve itself
    is not imported in a test process that imports tritonclient: their protos clash)."""

    def __init__(self):
        self.models = {}

    def get_models(self):
        return self.models

    def get_model(self, name):
        return self.models.get(name)

    def update(self, model, name):
        self.models[name] = model


def run_checks(checks: dict) -> None:
    """Run ``{name: (function, args)}`` and print one JSON line ``{name: "ok" | traceback}``
    (for the check scripts that run in a process of their own)."""
    import traceback
    results = {}
    for name, (fn, args) in checks.items():
        try:
            fn(*args)
            results[name] = "ok"
        except Exception:  # noqa: BLE001 - reported to the test
            results[name] = traceback.format_exc()
    print(json.dumps(results))
