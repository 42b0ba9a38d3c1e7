"""Helpers shared by the pass tests (imported as a plain module: no package here)."""

from __future__ import annotations

import numpy as np

import mxc
from mxc.backends.reference import run_graph
from mxc.compiler.ir.text import parse_graph


def graph_of(text: str):
    """A graph from the textual IR (the body of ``graph @main { ... }``)."""
    return parse_graph("graph @main {\n" + text + "\n}")


def random_params(sym, seed: int = 0, **shapes):
    """Random args/aux for *sym* given data shapes; aux states are positive (variances)."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    assert arg_shapes is not None, "shape inference incomplete"
    args = {n: rng.standard_normal(s).astype(np.float32)
            for n, s in zip(sym.list_arguments(), arg_shapes) if n not in shapes}
    aux = {n: rng.uniform(0.5, 2.0, s).astype(np.float32)  # positive: moving variances
           for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    return args, aux


def outputs(sym_or_graph, args, aux, feeds):
    graph = sym_or_graph.graph if isinstance(sym_or_graph, mxc.sym.Symbol) else sym_or_graph
    return run_graph(graph, {**args, **aux, **feeds})


def assert_close_outputs(before, after, rtol=1e-5, atol=1e-5):
    assert len(before) == len(after)
    for i, (b, a) in enumerate(zip(before, after)):
        assert b.shape == a.shape and b.dtype == a.dtype, f"output {i}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")


def op_count(graph, op: str) -> int:
    return sum(1 for n in graph.topo_order() if n.op is not None and n.opdef.name == op)
