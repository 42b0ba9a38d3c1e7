"""A real ``tritonserver`` for the tests: found on PATH or in the ``nvidia-pytriton`` wheel.

The wheel bundles Triton 2.51 with its Python backend, but not as a ready
backend directory: the stub for each Python version sits apart, and its
libraries live in ``nvidia_pytriton.libs``.  :func:`find_tritonserver` lays out
a backend directory the way PyTriton itself does (libtriton_python.so, the utils
module and the stub for this interpreter's version).  The stub embeds the Python
of the first ``python3`` on ``PATH``, so :class:`Triton` puts this interpreter's
``bin`` first: the model then runs with this environment's numpy and mxc.

The server listens on 127.0.0.1 only, on free ports, without the metrics port;
every wait is bounded and the server is always stopped (then killed).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from serve_helpers import free_port

START_TIMEOUT = 180.0
STUB = "triton_python_backend_stub"


@dataclass
class TritonInstall:
    binary: Path
    backends: Path | None       # --backend-directory, None for the binary's default
    libs: Path | None           # added to LD_LIBRARY_PATH
    stub: Path | None           # the Python backend stub this interpreter's model runs in


def find_tritonserver(workdir: Path) -> TritonInstall | str:
    """The install to test with, or why there is none (the skip reason)."""
    on_path = shutil.which("tritonserver")
    if on_path:
        stub = Path(on_path).resolve().parents[1] / "backends" / "python" / STUB
        return TritonInstall(Path(on_path), None, None, stub if stub.exists() else None)
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.origin:
        return ("no tritonserver: neither on PATH nor from the nvidia-pytriton wheel "
                "(pip install '.[triton]' in a separate virtualenv: it needs numpy<2)")
    dist = Path(spec.origin).parent / "tritonserver"
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stub = dist / "python_backend_stubs" / version / STUB
    if not (dist / "bin" / "tritonserver").exists() or not stub.exists():
        return f"nvidia-pytriton has no tritonserver or no Python-backend stub for Python {version}"
    backends = workdir / "backends"
    python = backends / "python"
    python.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copyfile(dist / "backends" / "python" / name, python / name)
    shutil.copy(stub, python / STUB)  # keeps the executable bit
    return TritonInstall(dist / "bin" / "tritonserver", backends,
                         dist.parent.parent / "nvidia_pytriton.libs", python / STUB)


class Triton:
    """``tritonserver --model-repository REPO`` as a subprocess on free loopback ports."""

    def __init__(self, install: TritonInstall, repository: Path):
        self.http_port, self.grpc_port = free_port(), free_port()
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        if install.libs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                p for p in (str(install.libs), env.get("LD_LIBRARY_PATH")) if p)
        args = [str(install.binary), "--model-repository", str(repository),
                "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
                "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port),
                "--allow-metrics", "false", "--exit-timeout-secs", "5"]
        if install.backends:
            args += ["--backend-directory", str(install.backends)]
        self.log = open(repository.parent / f"tritonserver-{self.http_port}.log", "w+b")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait(self, ready, what: str) -> "Triton":
        """Poll *ready* (a callable) until it is true; fail with the server's log otherwise."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tritonserver exited {self.proc.returncode}: {self.output()}")
            with contextlib.suppress(Exception):
                if ready():
                    return self
            time.sleep(0.5)
        raise AssertionError(f"tritonserver: {what} not reached in {START_TIMEOUT}s: {self.output()}")

    def output(self, tail: int | None = 6000) -> str:
        """The server's log (its last *tail* characters; all of it with None)."""
        self.log.flush()
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        return text if tail is None else text[-tail:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
