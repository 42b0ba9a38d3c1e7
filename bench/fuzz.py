"""Mutation fuzzing of mxc's input readers and surfaces, with a bounded, reproducible campaign.

Targets (each takes the raw bytes of one input):

* ``symbol_json`` -- :func:`mxc.frontend.symbol_json.load_json`, then shape and dtype
  inference, then the printed textual IR must parse back to a graph that prints the same;
* ``params`` -- :func:`mxc.frontend.params.load_params` (forged sizes, dims, dtypes);
* ``text_ir`` -- :func:`mxc.compiler.ir.text.parse_graph`, then print/parse round trip;
* ``pipeline`` -- :func:`mxc.compiler.passes.pipeline.parse_pipeline`, then its canonical
  form must parse back to itself;
* ``artifact`` -- :func:`mxc.runtime.load` of a mutated ``.mxc``: raw byte mutations and
  *forged* ones (a member's content mutated and the manifest's checksums recomputed, as
  an attacker could), so validation past the checksums is exercised;
* ``native_library``, ``signing``, ``mxnet`` -- what a compiled extension library
  answers, signature verification, and ``mxc.mxnet``'s Module/NDArray calls
  (:mod:`bench.fuzz_surfaces`);
* ``serving`` -- ``mxc serve`` against a hostile client: one in-process server, each
  input one REST, binary-extension, raw HTTP or gRPC request judged against the
  contract of issue 35 (:mod:`bench.fuzz_serving`); its result adds the server's RSS at
  the start and the end.

An *expected* outcome is success or an :class:`mxc.errors.MxcError`; anything else
(a bare exception, ``RecursionError``, ``MemoryError``), an input that runs longer than
the per-input limit (a hang) or a crash of the worker is *unexpected* and recorded with
the input that caused it.

Run a campaign (each target in its own process, so peak memory is per target)::

    nice python -m bench.fuzz --inputs 200000 --targets params,pipeline --out fuzz-out/
    python -m bench.fuzz --seconds 60          # every target, 60 s each
    python -m bench.fuzz --atheris params -- -runs=100000   # coverage-guided (pip: atheris)

The test-suite (``tests/reliability/test_fuzz.py``) runs the same targets with a small
budget; ``MXC_FUZZ_INPUTS=N`` raises it.  Inputs are derived from fixed seeds (``--seed``),
so a campaign is reproducible.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("MXC_CORPUS", ROOT.parent / "shared" / "corpus"))
READERS = ("symbol_json", "params", "text_ir", "pipeline", "artifact")
#: the surfaces of issue 28 (bench/fuzz_surfaces.py): native libraries, signing, mxc.mxnet
SURFACES = ("native_library", "signing", "mxnet")
#: issue 35: the server against a hostile client (bench/fuzz_serving.py, needs kserve)
SERVING = ("serving",)
TARGETS = READERS + SURFACES + SERVING


def _make_surface(target: str, workdir: Path, rng: random.Random):
    """A target object (``seeds``, ``make()``, ``__call__``) of fuzz_surfaces or fuzz_serving."""
    if target in SERVING:
        from bench.fuzz_serving import make_target
    else:
        from bench.fuzz_surfaces import make_target
    return make_target(target, workdir, rng)

# ---------------------------------------------------------------------------------------
# mutation
# ---------------------------------------------------------------------------------------
_TOKENS = [b"-1", b"0", b"99999999999999999999", b"9" * 40, b"[" * 600, b"{" * 300,
           b"{}", b"[]", b"null", b"1e309", b'"', b"\\u0000", b"\\ud800", b"2147483648",
           b"-9223372036854775809", b"18446744073709551616", b"\x1c", b"\x00", b"\xff",
           b",", b":", b"(", b")", b"%", b"#", b"@", b"=", b";", b"{ graph @g {", b"\n",
           b'"__shape__": "(-1, 3)"', b'"__shape__": "(4294967296, 4294967296)"',
           b'"subgraphs": [{"nodes": [], "arg_nodes": [], "heads": []}]', b"_CachedOp",
           b'"inputs": [[0, 0, 0]]', b"(0, 9223372036854775807)"]
_INTS = [0, 1, 2**7, 2**8 - 1, 2**15, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62,
         2**63 - 1, 2**63, 2**64 - 1, 7, 12, 100, 1000]


class Mutator:
    """Byte-level mutations of seed inputs (deterministic for a given ``random.Random``)."""

    def __init__(self, seeds: list[bytes], rng: random.Random):
        self.seeds = [s for s in seeds if s] or [b"{}"]
        self.rng = rng

    def __call__(self) -> bytes:
        r = self.rng
        data = bytearray(r.choice(self.seeds))
        for _ in range(r.choice((1, 1, 2, 3, 4, 8))):
            data = self._one(data)
        return bytes(data)

    def _one(self, d: bytearray) -> bytearray:
        r = self.rng
        n = len(d)
        op = r.randrange(9)
        pos = r.randrange(n + 1) if n else 0
        if op == 0 and n:                       # flip a bit
            i = r.randrange(n)
            d[i] ^= 1 << r.randrange(8)
        elif op == 1 and n:                     # an interesting byte
            d[r.randrange(n)] = r.choice(b"\x00\xff\x7f\x80[]{}\",:-09\x1c\x1f \n%#")
        elif op == 2 and n:                     # delete a chunk
            del d[pos:pos + r.randrange(1, 64)]
        elif op == 3 and n:                     # duplicate a chunk
            a = r.randrange(n)
            d[pos:pos] = d[a:a + r.randrange(1, 256)]
        elif op == 4:                           # insert a token
            d[pos:pos] = r.choice(_TOKENS)
        elif op == 5 and n >= 8:                # overwrite a little-endian integer
            width = r.choice((4, 8))
            i = r.randrange(max(n - width, 1))
            d[i:i + width] = (r.choice(_INTS) % (1 << (8 * width))).to_bytes(width, "little")
        elif op == 6:                           # splice with another seed
            other = r.choice(self.seeds)
            d = d[:pos] + other[r.randrange(len(other) + 1):]
        elif op == 7 and n:                     # truncate
            del d[r.randrange(n):]
        elif n:                                 # replace a number by an interesting one
            i = r.randrange(n)
            j = i
            while j < n and 48 <= d[j] <= 57:
                j += 1
            d[i:j] = str(r.choice(_INTS + [-1, -2**63])).encode()
        return d


# ---------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------
def _small_files(pattern: str, limit: int, max_size: int) -> list[Path]:
    found = sorted(p for p in CORPUS.glob(pattern) if p.stat().st_size <= max_size)
    return found[:limit]


def symbol_seeds() -> list[bytes]:
    files = [ROOT / "examples" / "mlp" / "mlp-symbol.json"]
    files += _small_files("**/*.json", 40, 40_000)
    out = []
    for f in files:
        try:
            out.append(f.read_bytes())
        except OSError:
            pass
    return out


def params_seeds() -> list[bytes]:
    from mxc.frontend.params import dumps_params
    import numpy as np
    out = [(ROOT / "examples" / "mlp" / "mlp-0000.params").read_bytes()]
    out += [f.read_bytes() for f in _small_files("**/*.params", 10, 60_000)]
    out.append(dumps_params({"arg:w": np.arange(6, dtype="float32").reshape(2, 3),
                             "aux:m": np.zeros((0, 2), "float16"), "b": np.int64(3)}))
    out.append(dumps_params([np.ones((1, 1, 1, 1), "uint8")]))
    return out


def text_seeds() -> list[bytes]:
    from mxc.compiler.ir.text import print_graph
    from mxc.frontend.symbol_json import load_json
    out = []
    for s in symbol_seeds()[:20]:
        try:
            out.append(print_graph(load_json(s.decode())).encode())
        except Exception:  # noqa: BLE001 - a seed mxc does not read is skipped
            pass
    return out


PIPELINE_SEEDS = [b"remove-dropout,fold-batchnorm,dce",
                  b"dce , partition{ backend=default  op_names=exp;log }",
                  b'partition{backend=default op_names="a b";c}', b"fold-batchnorm",
                  b"remove-dropout,partition{backend=tvm},dce", b""]


def pipeline_seeds() -> list[bytes]:
    return list(PIPELINE_SEEDS)


def artifact_seeds(workdir: Path) -> list[Path]:
    """Small compiled artifacts (the shipped MLP, with weights compiled in and stored in
    ``params.npz``), built once per *workdir*."""
    paths = []
    for bind in (True, False):
        path = workdir / f"seed-mlp-{'bound' if bind else 'unbound'}.mxc"
        if not path.exists():  # in a child, so compiling does not count in the peak memory
            code = ("import mxc; sym, a, x = mxc.load_checkpoint(%r, 0); mxc.compile(sym, (a, x), "
                    "shapes={'data': (4, 784)}, bind_params=%r).save(%r)"
                    % (str(ROOT / "examples" / "mlp" / "mlp"), bind, str(path)))
            subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------
# targets
# ---------------------------------------------------------------------------------------
def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape").encode("utf-8", "replace").decode("utf-8")


def run_symbol_json(data: bytes) -> None:
    from mxc.compiler.infer import infer_shapes, infer_types
    from mxc.compiler.ir.text import parse_graph, print_graph
    from mxc.frontend.symbol_json import load_json
    g = load_json(_text(data), source="<fuzz>")
    text = print_graph(g)
    again = print_graph(parse_graph(text))
    if again != text:
        raise AssertionError("printed IR of a loaded symbol file does not read back the same")
    infer_shapes(g)
    infer_types(g)


def run_params(data: bytes) -> None:
    from mxc.frontend.params import load_params
    load_params(data)


def run_text_ir(data: bytes) -> None:
    from mxc.compiler.ir.text import parse_graph, print_graph
    text = print_graph(parse_graph(_text(data), source="<fuzz>"))
    if print_graph(parse_graph(text)) != text:
        raise AssertionError("printed IR does not read back the same")


def run_pipeline(data: bytes) -> None:
    from mxc.compiler.passes.pipeline import parse_pipeline
    p = parse_pipeline(_text(data))
    if str(parse_pipeline(str(p))) != str(p):
        raise AssertionError("canonical pipeline text does not read back the same")


class ArtifactTarget:
    """Loads mutated artifacts from one scratch file (raw and forged mutations)."""

    def __init__(self, seeds: list[Path], scratch: Path, rng: random.Random):
        self.seeds = [p.read_bytes() for p in seeds]
        self.scratch = scratch
        self.rng = rng
        self.members = []
        for blob in self.seeds:
            with zipfile.ZipFile(io.BytesIO(blob)) as zf:
                self.members.append({n: zf.read(n) for n in zf.namelist()})
        self.raw = Mutator(self.seeds, rng)

    def make(self) -> bytes:
        """One input: a raw mutation (1 in 4) or a forged, re-checksummed one."""
        if self.rng.random() < 0.25:
            return self.raw()
        members = dict(self.rng.choice(self.members))
        name = self.rng.choice(sorted(n for n in members if n != "lib.so"))
        members[name] = Mutator([members[name]], self.rng)()
        return forge(members, keep_manifest=(name == "manifest.json"))

    def __call__(self, data: bytes) -> None:
        import mxc.runtime
        self.scratch.write_bytes(data)
        mxc.runtime.load(str(self.scratch))


def forge(members: dict[str, bytes], keep_manifest: bool = False) -> bytes:
    """A zip of *members* whose manifest lists their real sizes and checksums."""
    man_bytes = members["manifest.json"]
    if not keep_manifest:
        man = json.loads(man_bytes)
        man["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                          for n, d in members.items() if n != "manifest.json"}
        man.pop("signature", None)
        man_bytes = json.dumps(man, indent=1).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("manifest.json", man_bytes, zipfile.ZIP_DEFLATED)
        for n, d in members.items():
            if n != "manifest.json":
                zf.writestr(n, d, zipfile.ZIP_DEFLATED if n.endswith(".json")
                            else zipfile.ZIP_STORED)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------
class _Hang(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Hang()


def fuzz(target: str, *, inputs: int | None = None, seconds: float | None = None,
         seed: int = 0, per_input_s: float = 10.0, workdir: Path | None = None,
         on_unexpected: Callable[[bytes, str], None] | None = None,
         checkpoint: Callable[[dict], None] | None = None) -> dict:
    """Run *target* on mutated inputs; returns counts, unexpected findings and peak RSS.

    *checkpoint(result so far)* is called every 30 s, so a long run that is stopped
    still leaves its figures behind.
    """
    from mxc.errors import MxcError
    rng = random.Random(f"{target}:{seed}")
    workdir = Path(workdir or tempfile.mkdtemp(prefix="mxc-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if target == "artifact":
        art = ArtifactTarget(artifact_seeds(workdir), workdir / "input.mxc", rng)
        make, run = art.make, art
    elif target in SURFACES + SERVING:
        surface = _make_surface(target, workdir, rng)
        make, run = surface.make, surface
        for s in surface.seeds:  # the seeds themselves must be read without surprises
            _one(run, s, MxcError, per_input_s)
    else:
        seeds = {"symbol_json": symbol_seeds, "params": params_seeds, "text_ir": text_seeds,
                 "pipeline": pipeline_seeds}[target]()
        make = Mutator(seeds, rng)
        run = {"symbol_json": run_symbol_json, "params": run_params, "text_ir": run_text_ir,
               "pipeline": run_pipeline}[target]
        for s in seeds:  # the seeds themselves must be read without surprises
            _one(run, s, MxcError, per_input_s)
    old = signal.signal(signal.SIGALRM, _alarm)
    tried = typed = 0
    unexpected: dict[str, dict] = {}
    t0 = time.monotonic()
    next_checkpoint = t0 + 30

    def result() -> dict:
        return {"target": target, "inputs": tried, "typed_errors": typed,
                "unexpected": sum(u["count"] for u in unexpected.values()),
                "distinct_unexpected": unexpected, "seconds": round(time.monotonic() - t0, 1),
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                      1), **getattr(run, "report", dict)()}
    try:
        while True:
            if checkpoint is not None and time.monotonic() >= next_checkpoint:
                checkpoint(result())
                next_checkpoint = time.monotonic() + 30
            if inputs is not None and tried >= inputs:
                break
            if seconds is not None and time.monotonic() - t0 >= seconds:
                break
            data = make()
            tried += 1
            outcome = _one(run, data, MxcError, per_input_s)
            if outcome == "typed":
                typed += 1
            elif outcome != "ok":
                sig = outcome.splitlines()[0][:200]
                if sig not in unexpected:
                    unexpected[sig] = {"count": 0, "example": data[:4096].hex(),
                                       "traceback": outcome[-3000:]}
                    if on_unexpected is not None:
                        on_unexpected(data, outcome)
                unexpected[sig]["count"] += 1
        final = result()
    finally:
        signal.signal(signal.SIGALRM, old)
        if hasattr(run, "close"):  # the serving target's server and connections
            run.close()
    return final


def _one(run: Callable[[bytes], None], data: bytes, expected: type, limit: float) -> str:
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        run(data)
        return "ok"
    except expected:
        return "typed"
    except _Hang:
        return f"hang: more than {limit} s"
    except BaseException as exc:  # noqa: BLE001 - the point of fuzzing
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.format_exc()
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return (f"{type(exc).__name__} at {Path(where.filename).name}:{where.lineno}: "
                f"{str(exc)[:120]}\n{tb}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def atheris_main(target: str, args: list[str], workdir: Path) -> None:
    """Coverage-guided fuzzing of *target* with atheris (``pip install mxc[fuzz]``).

    Seeds become the initial corpus; an unexpected exception stops atheris with the
    input saved as ``crash-*`` (its usual behaviour).  *args* go to libFuzzer
    (``-runs=100000``, ``-max_total_time=600``, ``-rss_limit_mb=2048`` ...).
    """
    import atheris  # noqa: F401 - optional dependency
    from mxc.errors import MxcError
    if target == "artifact":
        art = ArtifactTarget(artifact_seeds(workdir), workdir / "input.mxc", random.Random(0))
        run: Callable[[bytes], None] = art
        seeds = [p.read_bytes() for p in artifact_seeds(workdir)]
    elif target in SURFACES + SERVING:
        surface = _make_surface(target, workdir, random.Random(0))
        run, seeds = surface, surface.seeds
    else:
        run = {"symbol_json": run_symbol_json, "params": run_params, "text_ir": run_text_ir,
               "pipeline": run_pipeline}[target]
        seeds = {"symbol_json": symbol_seeds, "params": params_seeds, "text_ir": text_seeds,
                 "pipeline": pipeline_seeds}[target]()
    corpus = workdir / f"atheris-{target}"
    corpus.mkdir(parents=True, exist_ok=True)
    for k, seed in enumerate(seeds):
        (corpus / f"seed-{k}").write_bytes(seed)

    def one(data: bytes) -> None:
        try:
            run(data)
        except MxcError:
            pass

    for seed in seeds:  # import everything the target uses, then instrument it all
        one(seed)
    atheris.instrument_all()
    atheris.Setup([sys.argv[0], *args, str(corpus)], one)
    atheris.Fuzz()


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--inputs", type=int, help="inputs per target")
    ap.add_argument("--seconds", type=float, help="time per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fuzz-out", help="folder for results and findings")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--atheris", metavar="TARGET",
                    help="coverage-guided fuzzing of one target with atheris (optional "
                         "dependency); arguments after -- go to libFuzzer")
    argv = list(argv) if argv is not None else sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.atheris:
        atheris_main(args.atheris, extra, out)
        return 0
    if args.worker:  # one target, in this process
        def keep(data: bytes, outcome: str) -> None:
            h = hashlib.sha256(data).hexdigest()[:16]
            (out / f"{args.worker}-{h}.bin").write_bytes(data)
        def save(res: dict, final: bool = False) -> None:
            name = f"{args.worker}.json" if final else f"{args.worker}.partial.json"
            (out / name).write_text(json.dumps(res, indent=1))
        res = fuzz(args.worker, inputs=args.inputs, seconds=args.seconds, seed=args.seed,
                   workdir=out / f"work-{args.worker}", on_unexpected=keep, checkpoint=save)
        save(res, final=True)
        return 0
    if args.inputs is None and args.seconds is None:
        ap.error("give --inputs or --seconds")
    summary = []
    for target in args.targets.split(","):
        cmd = [sys.executable, "-m", "bench.fuzz", "--worker", target, "--seed", str(args.seed),
               "--out", str(out)]
        if args.inputs is not None:
            cmd += ["--inputs", str(args.inputs)]
        if args.seconds is not None:
            cmd += ["--seconds", str(args.seconds)]
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        result_file = out / f"{target}.json"
        if rc != 0 or not result_file.exists():
            summary.append({"target": target, "crash": f"worker exited with {rc}"})
        else:
            res = json.loads(result_file.read_text())
            summary.append({k: res[k] for k in ("target", "inputs", "typed_errors", "unexpected",
                                                 "seconds", "peak_rss_mib", "server_rss_start_mib",
                                                 "server_rss_end_mib") if k in res})
        print(json.dumps(summary[-1]), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
