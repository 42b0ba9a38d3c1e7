"""Every corpus op case lowered to TVM Relax, compiled for the host CPU and run.

Mirrors ``tests/ops/test_corpus_ops.py``: the single-op graph is lowered with
every non-data input (weights, aux states, labels) bound as a constant, the
data inputs stay function parameters, and the outputs must match MXNet's
within the case's tolerance.  Cases whose node the backend does not lower are
skipped with the host-fallback reason.

Compiling ~600 modules one by one would take many minutes, so the cases are
batched: one IRModule per op family (chunks of at most ``CHUNK`` cases), one
Relax function per case, compiled once and cached for the session.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from functools import cache, lru_cache

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import op_cases, require_corpus
from oracle import assert_close

from mxc.backends.tvm import ModuleBuilder, build_module, load_vm, run_module
from mxc.backends.tvm.converter import unsupported_nodes
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ops.registry import has_op, registered_ops

from mxc.frontend.symbol_json import load_json

CASES = op_cases()
IDS = [c["id"] for c in CASES] or ["no-corpus"]
BY_ID = {c["id"]: c for c in CASES}
CHUNK = 60


def _family(op: str) -> str:
    if not has_op(op):
        return "_unregistered"
    return registered_ops()[op].family


@lru_cache(maxsize=1)
def _chunks() -> dict[str, str]:
    """case id -> chunk name (family, split into pieces of at most CHUNK cases)."""
    by_family: dict[str, list[str]] = {}
    for c in CASES:
        by_family.setdefault(_family(c["op"]), []).append(c["id"])
    out = {}
    for fam, ids in by_family.items():
        for k in range(0, len(ids), CHUNK):
            for cid in ids[k:k + CHUNK]:
                out[cid] = f"{fam}#{k // CHUNK}"
    return out


@dataclass
class CaseBuild:
    status: str                      # "ok", "skip", "error"
    message: str = ""
    func: str = ""
    input_names: list = field(default_factory=list)


@dataclass
class ChunkBuild:
    cases: dict
    vms: dict                        # func name -> VirtualMachine


def _data_inputs(case) -> set[str]:
    return set(case.get("data_inputs") or case["infer"]["given"])


def _lower_case(mb: ModuleBuilder, case, data) -> CaseBuild:
    if not has_op(case["op"]):
        return CaseBuild("skip", f"operator {case['op']} has no definition in the registry yet")
    graph = load_json(case["symbol"], source=f"{case['id']}.json")
    shapes = infer_shapes(graph, {i["name"]: tuple(i["shape"]) for i in case["inputs"]})
    dtypes = infer_types(graph, {i["name"]: i["dtype"] for i in case["inputs"]})
    bad = unsupported_nodes(graph, shapes, dtypes)
    if bad:
        return CaseBuild("skip", "host fallback: " + "; ".join(bad.values()))
    data_names = _data_inputs(case)
    params = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]
              if i["name"] not in data_names}
    func = "case_" + case["id"]
    info = mb.add(func, graph, shapes=shapes, dtypes=dtypes, params=params)
    return CaseBuild("ok", func=func, input_names=info.input_names)


@cache
def _build_chunk(chunk: str) -> ChunkBuild:
    root = require_corpus("ops")
    ids = [cid for cid, ch in _chunks().items() if ch == chunk]
    mb = ModuleBuilder()
    cases: dict[str, CaseBuild] = {}
    for cid in ids:
        data = np.load(root / "data" / f"{cid}.npz")
        try:
            cases[cid] = _lower_case(mb, BY_ID[cid], data)
        except Exception:
            cases[cid] = CaseBuild("error", "lowering failed:\n" + traceback.format_exc())
    funcs = [c.func for c in cases.values() if c.status == "ok"]
    vms = {}
    if funcs:
        try:
            vm = load_vm(build_module(mb.finalize()))
            vms = {f: vm for f in funcs}
        except Exception:
            # one bad function must not sink the chunk: compile each case on its own
            for cid, c in cases.items():
                if c.status != "ok":
                    continue
                try:
                    single = ModuleBuilder()
                    data = np.load(root / "data" / f"{cid}.npz")
                    _lower_case(single, BY_ID[cid], data)
                    vms[c.func] = load_vm(build_module(single.finalize()))
                except Exception:
                    cases[cid] = CaseBuild("error", "compilation failed:\n"
                                           + traceback.format_exc())
    return ChunkBuild(cases, vms)


@pytest.mark.parametrize("case_id", IDS)
def test_tvm_op_case(case_id):
    root = require_corpus("ops")
    case = BY_ID[case_id]
    built = _build_chunk(_chunks()[case_id])
    cb = built.cases[case_id]
    if cb.status == "skip":
        pytest.skip(cb.message)
    if cb.status == "error":
        pytest.fail(cb.message, pytrace=False)
    data = np.load(root / "data" / f"{case_id}.npz")
    inputs = [data[f"in__{name}"] for name in cb.input_names]
    outs = run_module(built.vms[cb.func], inputs, func_name=cb.func)
    assert len(outs) == len(case["outputs"])
    tols = case.get("output_tols")
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        if spec.get("ignore"):
            continue
        rtol, atol = tols[i] if tols else (case["rtol"], case["atol"])
        assert_close(got, data[f"out__{i}"], rtol, atol, f"{case_id} output {i}")
