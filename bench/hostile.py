"""Issue 35, held out: every finding of "the server against a hostile client", replayed.

Each finding is a named check with the answer the hardened server gives, run against
``python -m mxc serve`` subprocesses (a repository ``REPO/mlp/1/model.mxc``,
``REPO/mlp/2/model.mxc``; a dynamic-batch artifact for the batching checks), and
printed as a table ``finding | expected | got | ok``.  The exit status is nonzero when
any check is not ok -- a check whose feature (a flag) is missing reports not-ok too, so
this file is the acceptance list, independent of the fuzz campaign
(:mod:`bench.fuzz_serving`), which judges random requests against the same contract.

    nice python -m bench.hostile replay              # the table
    nice python -m bench.hostile replay -k nan,shape # only checks whose name has these
    nice python -m bench.hostile latency --seconds 10   # bench/hostile_latency.py
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
X = np.random.default_rng(35).standard_normal((1, 784)).astype("float32")
LEAK = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(workdir: Path) -> dict:
    """The artifacts (compiled once per *workdir*, in a child so this process stays
    small): ``repo`` with mlp versions 1 and 2, ``dyn`` a batch-range (1..32) MLP,
    ``outside`` a model directory outside ``repo`` that ``repo/evil`` links to."""
    repo, dyn = workdir / "repo", workdir / "dyn" / "mlp.mxc"
    one = repo / "mlp" / "1" / "model.mxc"
    if not one.exists() or not dyn.exists():
        code = ("import mxc, os; sym, a, x = mxc.load_checkpoint(%r, 0)\n"
                "for shapes, out in (({'data': (1, 784)}, %r), ({'data': ((1, 32), 784)}, %r)):\n"
                "    os.makedirs(os.path.dirname(out), exist_ok=True)\n"
                "    mxc.compile(sym, (a, x), shapes=shapes).save(out)\n"
                % (str(ROOT / "examples" / "mlp" / "mlp"), str(one), str(dyn)))
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    two = repo / "mlp" / "2" / "model.mxc"
    two.parent.mkdir(parents=True, exist_ok=True)
    if not two.exists():
        shutil.copy(one, two)
    outside = workdir / "outside" / "evil"
    (outside / "1").mkdir(parents=True, exist_ok=True)
    if not (outside / "1" / "model.mxc").exists():
        shutil.copy(one, outside / "1" / "model.mxc")
    link = repo / "evil"
    if not link.is_symlink():
        link.symlink_to(outside, target_is_directory=True)
    import mxc.runtime
    want = np.asarray(mxc.runtime.load(one).run({"data": X})[0])
    return {"repo": repo, "dyn": dyn, "want": want, "workdir": workdir}


class Served:
    """``python -m mxc serve SOURCE --port P --grpc-port G ARGS`` with its log in a file;
    *nofile* lowers its open-file limit (``ulimit -n``)."""

    def __init__(self, source: Path, *args: str, nofile: int | None = None,
                 workdir: Path | None = None):
        self.port, self.grpc_port = free_port(), free_port()
        self.logpath = Path(workdir or tempfile.gettempdir()) / f"serve-{self.port}.log"
        self.log = open(self.logpath, "w+b")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.cmd = [sys.executable, "-m", "mxc", "serve", str(source), "--port", str(self.port),
                    "--grpc-port", str(self.grpc_port), "--poll-seconds", "0", *args]
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=ROOT, preexec_fn=limit)
        self.error = self._wait_ready()

    def _wait_ready(self, timeout: float = 120) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"server exited {self.proc.returncode}: {self.text()[-300:]}"
            with contextlib.suppress(OSError, http.client.HTTPException):
                if request(self.port, "GET", "/v2/health/ready", timeout=2)[0] == 200:
                    return None
            time.sleep(0.2)
        return "server not ready in time"

    def text(self) -> str:
        self.log.flush()
        return self.logpath.read_text(errors="replace")

    def lines(self) -> int:
        return len(self.text().splitlines())

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process (and its reaped children)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def stop(self, sig=signal.SIGTERM, timeout: float = 30) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode


# ---------------------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------------------
def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None, timeout: float = 30,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, dict, bytes]:
    """One HTTP request (on *conn* when given, kept open); status, headers, body."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        if own:
            conn.close()


def json_body(x=X, **change) -> bytes:
    spec = {"name": "data", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}
    spec.update(change)
    return json.dumps({"inputs": [spec]}, allow_nan=True).encode()


def json_stream(size: int, piece: int = 1 << 18):
    """Exactly *size* bytes of a JSON request body with one huge ``data`` list, in pieces
    (a body longer than its Content-Length would be a malformed request of its own)."""
    start, end = b'{"inputs": [{"name": "data", "datatype": "FP32", "data": [', b"1.0]}]}"
    yield start
    left = size - len(start) - len(end)
    while left >= 4:
        n = min(piece, left) // 4 * 4
        yield b"1.0," * (n // 4)
        left -= n
    yield b" " * left + end


def infer(port: int, model: str = "mlp", conn=None, body: bytes | None = None,
          version: str | None = None) -> int:
    path = (f"/v2/models/{model}/versions/{version}/infer" if version
            else f"/v2/models/{model}/infer")
    return request(port, "POST", path, body or json_body(),
                   {"Content-Type": "application/json"}, conn=conn)[0]


def refusal(answer: tuple[int, dict, bytes], status: int) -> str | None:
    """None when *answer* is the refusal *status* with ``{"error": ...}`` leaking no
    exception class, else what is wrong."""
    code, _, body = answer
    if code != status:
        return f"{code} {body[:80]!r}"
    try:
        doc = json.loads(body)
    except ValueError:
        return f"{code} non-JSON {body[:60]!r}"
    if not isinstance(doc, dict) or not isinstance(doc.get("error"), str):
        return f"{code} {body[:80]!r}"
    if LEAK.search(doc["error"]):
        return f"{code} leaks {doc['error'][:80]!r}"
    return None


class Grpc:
    """KServe's gRPC stubs on one channel (this process must not import tritonclient)."""

    def __init__(self, port: int):
        import grpc
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
        from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as stubs
        self.grpc, self.pb = grpc, pb
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = stubs.GRPCInferenceServiceStub(self.channel)

    def call(self, method: str, req) -> str:
        """``OK`` or the status code's name (and its message after a colon)."""
        try:
            getattr(self.stub, method)(req, timeout=30)
            return "OK"
        except self.grpc.RpcError as exc:
            return f"{exc.code().name}: {(exc.details() or '')[:100]}"

    def infer(self, model="mlp", version="", datatype="FP32") -> str:
        pb = self.pb
        t = pb.ModelInferRequest.InferInputTensor(name="data", datatype=datatype, shape=[1, 784])
        return self.call("ModelInfer", pb.ModelInferRequest(
            model_name=model, model_version=version, inputs=[t], raw_input_contents=[X.tobytes()]))

    def close(self) -> None:
        self.channel.close()


def replay(workdir: Path, only: list[str] | None = None) -> list[tuple[str, str, str, bool]]:
    from bench.hostile_checks import CHECKS, CONFIGS
    env = build(workdir)
    rows = []
    for config, (source, flags, nofile) in CONFIGS.items():
        todo = [(n, f) for c, n, f in CHECKS if c == config
                and (not only or any(k in n.lower() for k in only))]
        if not todo:
            continue
        s = Served(env[source], *flags, nofile=nofile, workdir=workdir)
        g = Grpc(s.grpc_port)
        try:
            for name, fn in todo:
                if s.error:
                    rows.append((name, "-", f"no server ({' '.join(flags)}): {s.error[:80]}", False))
                    continue
                try:
                    expected, got, ok = fn(s, g, env)
                except Exception as exc:  # noqa: BLE001 - a check that cannot run is not ok
                    expected, got, ok = "-", f"check raised {type(exc).__name__}: {exc}"[:120], False
                if s.proc.poll() is not None and config != "workers":
                    got, ok = got + f" (server exited {s.proc.returncode})", False
                rows.append((name, expected, got, ok))
                print(f"{'ok ' if ok else 'NOT'} {name}: {got}", file=sys.stderr, flush=True)
                if config != "workers" and not _serving(s):   # the next check starts afresh
                    g.close()
                    s.stop()
                    s = Served(env[source], *flags, nofile=nofile, workdir=workdir)
                    g = Grpc(s.grpc_port)
        finally:
            g.close()
            s.stop()
    return rows


def _serving(s: Served) -> bool:
    """Whether *s* still answers a valid request (a check may have unloaded or broken it)."""
    try:
        return s.proc.poll() is None and infer(s.port) == 200 \
            and infer(s.port, version="1") == 200
    except (OSError, http.client.HTTPException):
        return False


def print_table(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows + [("finding", "expected", "got", "ok")])
              for i in range(3)]
    print(" | ".join(h.ljust(w) for h, w in zip(("finding", "expected", "got"), widths)) + " | ok")
    for name, expected, got, ok in rows:
        print(" | ".join(str(v).ljust(w) for v, w in zip((name, expected, got), widths))
              + f" | {'yes' if ok else 'NO'}")
    print(f"\n{sum(r[3] for r in rows)}/{len(rows)} checks ok")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["replay", "latency"])
    ap.add_argument("-k", help="replay: only checks whose name contains one of these (comma list)")
    ap.add_argument("--workdir", help="artifacts and server logs (default: a temporary folder)")
    ap.add_argument("--seconds", type=float, default=10, help="latency: seconds per phase")
    ap.add_argument("--clients", type=int, default=32, help="latency: valid clients")
    ap.add_argument("--phases", help="latency: comma list of hostile phases (default all)")
    ap.add_argument("--repeats", type=int, default=1, help="latency: runs per phase (medians)")
    ap.add_argument("--hostile-nice", type=int, default=0,
                    help="latency: the hostile client's niceness (19: as if it ran on another "
                         "machine, taking no CPU the server or valid clients want)")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mxc-hostile-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.mode == "latency":
        from bench.hostile_latency import run_latency
        return run_latency(workdir, args.seconds, args.clients,
                           args.phases.split(",") if args.phases else None, args.repeats,
                           args.hostile_nice)
    rows = replay(workdir, args.k.lower().split(",") if args.k else None)
    print_table(rows)
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
