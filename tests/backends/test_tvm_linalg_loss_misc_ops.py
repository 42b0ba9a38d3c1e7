"""Wave-2 corpus cases of the ops lowered by the linalg, loss, assign, statistics,
patches, contrib_misc and init converters, compiled for the host CPU and run.

The lowering is the one ``test_tvm_ops.py`` checks for the first corpus: data
inputs stay function parameters, everything else is bound, and outputs must
match MXNet's within the case tolerance.  All cases go into one module,
compiled once.  Random cases are not here (samplers are host only).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import op_cases, require_corpus
from oracle import assert_close
from test_tvm_ops import _lower_case

from mxc.backends.tvm import ModuleBuilder, build_module, load_vm, run_module
from mxc.backends.tvm.converter import registered_converters
from mxc.compiler.ops.registry import has_op, registered_ops

SPLIT = "wave2/ops"
FAMILIES = {"linalg", "loss", "assign", "statistics", "patches", "contrib_misc", "init"}


def _lowered(op: str) -> bool:
    return (has_op(op) and registered_ops()[op].family in FAMILIES
            and op in registered_converters())


CASES = {c["id"]: c for c in op_cases(SPLIT) if not c.get("random") and _lowered(c["op"])}
IDS = list(CASES) or ["no-corpus"]


@cache
def _built():
    root = require_corpus(SPLIT)
    mb = ModuleBuilder()
    builds = {cid: _lower_case(mb, case, np.load(root / "data" / f"{cid}.npz"))
              for cid, case in CASES.items()}
    vm = load_vm(build_module(mb.finalize()))
    return builds, vm


@pytest.mark.parametrize("case_id", IDS)
def test_tvm_wave2_op_case(case_id):
    root = require_corpus(SPLIT)
    case = CASES[case_id]
    builds, vm = _built()
    cb = builds[case_id]
    assert cb.status == "ok", cb.message   # every op here has a converter: nothing may fall back
    data = np.load(root / "data" / f"{case_id}.npz")
    outs = run_module(vm, [data[f"in__{n}"] for n in cb.input_names], func_name=cb.func)
    assert len(outs) == len(case["outputs"])
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        rtol, atol = case.get("output_tols", [None] * len(outs))[i] or (case["rtol"], case["atol"])
        assert_close(np.asarray(got), data[f"out__{i}"], rtol, atol, f"{case_id} output {i}")
