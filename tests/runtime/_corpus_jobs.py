"""Helpers of the corpus runtime tests, also run as a script in fresh processes.

``python _corpus_jobs.py ops OUT_DIR CHUNK NCHUNKS``
    compile chunk CHUNK of the corpus op cases, batched into ONE graph (each
    case's nodes renamed ``<case id>/<name>``) with ``passes=""`` so the
    graph is exactly the cases', into ``OUT_DIR/ops-<CHUNK>.mxc``; writes
    ``ops-<CHUNK>.json`` (pieces: artifact tag, cases, host nodes, what
    ``unsupported_nodes`` says; cases TVM failed on; timing).  A chunk that
    fails to compile is bisected, so the broken cases are named.

``python _corpus_jobs.py cli COMMANDS_JSON RESULT_JSON``
    run ``mxc`` command lines (``{"claims": DIR, "commands": {key: argv}}``,
    argv without the program name) through :func:`mxc.cli.main` in this one
    process, so the interpreter and TVM start once for many of them (a tiny
    model's ``mxc compile`` is ~0.2 s; a fresh process adds ~2 s).  Several
    such processes can share one list: each command is claimed (a file created
    in DIR) by the first process to reach it, so they balance themselves.
    Writes ``{key: {ok, seconds, error}}`` for the commands this process ran.

``python _corpus_jobs.py run JOBS_JSON RESULT_JSON``
    the deployment side: load every artifact with :mod:`mxc.runtime` alone,
    run it on its inputs .npz, write its outputs .npz; records errors and
    which modules were imported after the fully compiled artifacts ran.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WATCHED = ("lark", "mxc.frontend", "mxc.compiler", "tvm", "tvm.relax")


def corpus_root() -> Path:
    return Path(os.environ.get("MXC_CORPUS", REPO.parent / "shared" / "corpus"))


# ---------------------------------------------------------------------------
# op cases
# ---------------------------------------------------------------------------
def load_cases() -> list[dict]:
    path = corpus_root() / "ops" / "cases.jsonl"
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def chunk_of(cases: list[dict], chunk: int, nchunks: int) -> list[dict]:
    return cases[chunk::nchunks]


def data_names(case: dict) -> set[str]:
    return set(case.get("data_inputs") or case["infer"]["given"])


def op_batch(cases: list[dict]):
    """(graph, params, shapes, dtypes, expected host node names, feeds) for *cases*."""
    from mxc.backends.tvm.converter import unsupported_nodes
    from mxc.compiler.ir import Graph
    from mxc.frontend.symbol_json import load_json

    nodes, outputs = [], []
    params, shapes, dtypes, feeds = {}, {}, {}, {}
    expected: dict[str, str] = {}
    for case in cases:
        cid = case["id"]
        graph = load_json(case["symbol"], source=f"{cid}.json")
        data = np.load(corpus_root() / "ops" / "data" / f"{cid}.npz")
        names = data_names(case)
        c_shapes = {i["name"]: tuple(i["shape"]) for i in case["inputs"]}
        c_dtypes = {i["name"]: i["dtype"] for i in case["inputs"]}
        for node, why in unsupported_nodes(graph, c_shapes, c_dtypes).items():
            expected[f"{cid}/{node}"] = why
        for node in graph.nodes:
            node.name = f"{cid}/{node.name}"
        for spec in case["inputs"]:
            name = f"{cid}/{spec['name']}"
            value = data[f"in__{spec['name']}"]
            if spec["name"] in names:
                shapes[name], dtypes[name] = tuple(spec["shape"]), spec["dtype"]
                feeds[name] = value
            else:
                params[name] = value
        nodes += graph.nodes
        outputs += graph.outputs
    return Graph(nodes, outputs), params, shapes, dtypes, expected, feeds


def compile_ops(out_dir: Path, chunk: int, nchunks: int) -> None:
    """Compile one chunk of op cases; a chunk TVM fails on is split in halves until the
    failing cases are alone, so one broken kernel costs its own cases only."""
    t0 = time.perf_counter()
    pieces: list[dict] = []
    failed: dict[str, str] = {}
    _compile_group(chunk_of(load_cases(), chunk, nchunks), out_dir, str(chunk), pieces, failed)
    info = {"seconds": time.perf_counter() - t0, "pieces": pieces, "failed": failed}
    (out_dir / f"ops-{chunk}.json").write_text(json.dumps(info, indent=1))


def _compile_group(cases, out_dir: Path, tag: str, pieces: list, failed: dict) -> None:
    import mxc
    from mxc.errors import MxcError
    graph, params, shapes, dtypes, expected, feeds = op_batch(cases)
    try:
        model = mxc.compile(graph, params, shapes, dtypes, passes="",
                            target=os.environ.get("MXC_TEST_TARGET", "llvm"))
    except MxcError as exc:
        if len(cases) == 1:
            failed[cases[0]["id"]] = f"{type(exc).__name__}: {exc}"[:2000]
            return
        mid = len(cases) // 2
        _compile_group(cases[:mid], out_dir, f"{tag}.0", pieces, failed)
        _compile_group(cases[mid:], out_dir, f"{tag}.1", pieces, failed)
        return
    model.save(out_dir / f"ops-{tag}.mxc")
    np.savez(out_dir / f"ops-{tag}-in.npz", **{k.replace("/", "|"): v for k, v in feeds.items()})
    pieces.append({"tag": tag, "cases": [c["id"] for c in cases], "host": model.host_nodes,
                   "expected": expected, "regions": len(model.regions)})


# ---------------------------------------------------------------------------
# several mxc commands in one process
# ---------------------------------------------------------------------------
def run_cli(commands_path: Path, result_path: Path) -> None:
    """Run each command line of *commands_path* not claimed by another process with
    ``mxc.cli.main``; record each one's exit status, time and (on failure) its output,
    after each command (a crash loses only the command in flight and the rest of
    this process's share, and the test names what was not run)."""
    import contextlib
    import io

    from mxc.cli import main
    spec = json.loads(commands_path.read_text())
    claims = Path(spec["claims"])
    results: dict = {}
    for key, argv in spec["commands"].items():
        try:
            os.close(os.open(claims / key.replace("/", "|"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        out = io.StringIO()
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # noqa: BLE001 - reported to the test
            code = 1
            out.write(traceback.format_exc())
        results[key] = {"ok": code == 0, "seconds": time.perf_counter() - t0,
                        "error": "" if code == 0 else f"exit {code}: {out.getvalue()[-4000:]}"}
        result_path.write_text(json.dumps(results, indent=1))


# ---------------------------------------------------------------------------
# the fresh runtime process
# ---------------------------------------------------------------------------
def run_jobs(jobs_path: Path, result_path: Path) -> None:
    """Run artifacts with the runtime alone.  Fully compiled ones go first so the
    module snapshot after them shows what running a compiled graph imports."""
    jobs = json.loads(jobs_path.read_text())
    import mxc.runtime as rt
    from mxc.runtime.artifact import read_manifest
    results: dict = {"jobs": {}, "modules_after_compiled": None}
    ordered = sorted(jobs, key=lambda j: bool(read_manifest(j["artifact"])["host_nodes"]))
    for job in ordered:
        host = bool(read_manifest(job["artifact"])["host_nodes"])
        if host and results["modules_after_compiled"] is None:
            results["modules_after_compiled"] = [m for m in WATCHED if m in sys.modules]
        key = job["key"]
        try:
            t0 = time.perf_counter()
            sess = rt.load(job["artifact"])
            t1 = time.perf_counter()
            with np.load(job["inputs"]) as data:
                feeds = {k.replace("|", "/"): data[k] for k in data.files}
            outs = sess.run(feeds)
            t2 = time.perf_counter()
            np.savez(job["outputs"], **{f"out{i}": o for i, o in enumerate(outs)})
            results["jobs"][key] = {"ok": True, "load_s": t1 - t0, "run_s": t2 - t1,
                                    "device": sess.device}
        except Exception:  # noqa: BLE001 - reported to the test
            results["jobs"][key] = {"ok": False, "error": traceback.format_exc()[-3000:]}
    if results["modules_after_compiled"] is None:
        results["modules_after_compiled"] = [m for m in WATCHED if m in sys.modules]
    result_path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "ops":
        compile_ops(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "cli":
        run_cli(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "run":
        run_jobs(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
