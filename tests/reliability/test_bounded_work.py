"""Issue 14, items 3, 5 and 8: bounded work, total parsers, declared sizes vs what may be
allocated.  Each test names the failure of the issue it reproduces."""

from __future__ import annotations

import json
import resource
import struct
import time

import numpy as np
import pytest

import mxc
from mxc.compiler.infer import infer_shapes
from mxc.compiler.ir import Entry, Graph, Node, parse_graph, print_graph
from mxc.compiler.ir.graph import MAX_SUBGRAPH_DEPTH
from mxc.errors import (ExecutionError, GraphError, ParamsFormatError, ParseError, ShapeError,
                        VerificationError)
from mxc.frontend.params import dumps_params, load_params
from mxc.frontend.symbol_json import load_json
from reliability_helpers import run_python


def nested_cached_op(depth: int) -> str:
    """A symbol JSON with ``_CachedOp`` nested *depth* deep around one relu (built as
    text: json.dumps itself would recurse)."""
    text = ('{"nodes": [{"op": "null", "name": "data", "inputs": []}, {"op": "relu", '
            '"name": "r", "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]}')
    for d in range(depth):
        text = ('{"nodes": [{"op": "null", "name": "data", "inputs": []}, {"op": "_CachedOp", '
                f'"name": "c{d}", "inputs": [[0, 0, 0]], "subgraphs": [{text}]}}], '
                '"arg_nodes": [0], "heads": [[1, 0, 0]]}')
    return text


# ---------------------------------------------------------------------------------------
# item 3: nested subgraphs cost linear time
# ---------------------------------------------------------------------------------------
def test_16_deep_cached_op_infers_and_runs_in_under_a_second():
    """Failure 3: 2.2 KB, _CachedOp 16 deep: 10 s in infer_shape, 49 s in forward."""
    text = nested_cached_op(16)
    assert len(text) < 3000
    sym = mxc.sym.load_json(text)
    x = np.array([[-1.0, 2.0, -3.0]], np.float32)
    t0 = time.perf_counter()
    assert sym.infer_shape(data=(1, 3))[1] == [(1, 3)]
    out = sym.bind(args={"data": x}).forward()[0]
    elapsed = time.perf_counter() - t0
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    assert elapsed < 1.0, f"16-deep nesting took {elapsed:.2f} s"


def test_nesting_cost_grows_linearly(monkeypatch):
    """Two more levels cost x4 before (inference sweeps per level multiplied); count the
    graph sweeps of inference and of a forward run: doubling the depth doubles them."""
    import mxc.compiler.infer as infer_mod
    sweeps = []
    real = infer_mod._sweep
    monkeypatch.setattr(infer_mod, "_sweep", lambda *a, **k: sweeps.append(1) or real(*a, **k))

    def cost(depth, run):
        sym = mxc.sym.load_json(nested_cached_op(depth))
        sweeps.clear()
        if run:
            sym.bind(args={"data": np.ones((1, 3), np.float32)}).forward()
        else:
            sym.infer_shape(data=(1, 3))
        return len(sweeps)
    for run in (False, True):
        small, big = cost(24, run), cost(48, run)
        assert big <= 2.2 * small, (run, small, big)


def test_subgraphs_nested_deeper_than_the_limit_are_a_typed_error():
    """Failure 7: ~500 nested subgraphs raised RecursionError."""
    with pytest.raises(ParseError, match="nested more than"):
        mxc.sym.load_json(nested_cached_op(500))
    with pytest.raises(ParseError, match=f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH}"):
        mxc.sym.load_json(nested_cached_op(MAX_SUBGRAPH_DEPTH + 1))
    sym = mxc.sym.load_json(nested_cached_op(MAX_SUBGRAPH_DEPTH - 1))
    assert parse_graph(print_graph(sym.graph)) is not None


def _deep_graph(depth: int) -> Graph:
    """A graph built in Python (no reader limits) with *depth* nested levels."""
    inner = Graph()
    x = inner.create_node(None, "x")
    inner.outputs = [Entry(inner.create_node("relu", "r", [Entry(x)]))]
    for d in range(depth - 1):
        g = Graph()
        v = g.create_node(None, "x")
        node = Node("_CachedOp", f"c{d}", {}, [Entry(v)], [inner])
        g.add_node(node)
        g.outputs = [Entry(node)]
        inner = g
    return inner


def test_printing_and_verifying_over_deep_regions_are_bounded():
    """Failure 7: printing deep structures and verify() of deep regions recursed."""
    deep = _deep_graph(MAX_SUBGRAPH_DEPTH + 40)
    with pytest.raises(VerificationError, match="nested more than"):
        deep.verify()
    with pytest.raises(GraphError, match="nested more than"):
        print_graph(deep)
    _deep_graph(MAX_SUBGRAPH_DEPTH).verify()


# ---------------------------------------------------------------------------------------
# item 3/7: parsers are total
# ---------------------------------------------------------------------------------------
def test_deeply_nested_json_values_are_a_located_parse_error():
    """Failure 7: {"nodes":[],"heads":[],"attrs":{"a":[[[[...]]]]}} 1000 deep: RecursionError."""
    text = '{"nodes":[],"heads":[],"attrs":{"a":' + "[" * 1000 + "]" * 1000 + "}}"
    with pytest.raises(ParseError, match=r"^<string>:1:\d+: objects and arrays nested more "
                                         r"than 400 levels"):
        load_json(text)


def test_integers_beyond_the_digit_limit_are_a_located_parse_error():
    """Failure 7: an integer over 4,300 digits gave Python's bare ValueError."""
    text = '{"nodes":[],"heads":[[' + "9" * 5000 + ",0,0]]}"
    with pytest.raises(ParseError, match=r"^<string>:1:23: integer with 5000 digits; at most "
                                         r"32"):
        load_json(text)
    with pytest.raises(ParseError, match="integer with 40 digits"):
        load_json('{"nodes":[], "heads":[], "x": ' + "1" * 40 + "}")


@pytest.mark.parametrize("ch", ["\x1c", "\x1d", "\x1e", "\x1f"])
def test_separator_controls_inside_integer_arrays_are_a_located_parse_error(ch):
    """Failure 7: \\x1c-\\x1f inside an integer array: the lexer took them for whitespace,
    int() did not (bare ValueError)."""
    with pytest.raises(ParseError, match=r"^<string>:1:25: unexpected character"):
        load_json('{"nodes":[],"heads":[[0,' + ch + "0,0]]}")


def test_deep_lists_in_textual_ir_are_bounded_and_deep_literals_print():
    """Failure 7: the textual IR recursed on deep list literals (parsing and printing)."""
    text = ("graph @m attributes {a = " + "[" * 3000 + "]" * 3000 + "} {\n  %x = var\n"
            "  return %x\n}")
    with pytest.raises(ParseError, match="brackets nested more than 512 levels"):
        parse_graph(text)
    doc = ('{"nodes":[{"op":"null","name":"x","inputs":[]}],"heads":[[0,0,0]],"attrs":{"a":'
           + "[" * 398 + "]" * 398 + "}}")
    g = load_json(doc)
    assert print_graph(parse_graph(print_graph(g))) == print_graph(g)


# ---------------------------------------------------------------------------------------
# item 8: the smaller failures
# ---------------------------------------------------------------------------------------
def test_empty_cached_op_subgraph_is_refused_at_load():
    """Failure 8: a _CachedOp with an empty subgraph loaded, then forward raised KeyError."""
    text = json.dumps({"nodes": [{"op": "null", "name": "data", "inputs": []},
                                 {"op": "_CachedOp", "name": "c", "inputs": [[0, 0, 0]],
                                  "subgraphs": [{"nodes": [], "arg_nodes": [], "heads": []}]}],
                       "arg_nodes": [0], "heads": [[1, 0, 0]]})
    with pytest.raises(ParseError, match=r"node 1 \('c'\): subgraph 0 has no outputs"):
        mxc.sym.load_json(text)


def test_negative_shape_dims_are_a_shape_error_at_infer_shape():
    """Failure 8: negative __shape__ dims passed infer_shape; simple_bind: bare ValueError."""
    text = json.dumps({"nodes": [{"op": "null", "name": "x", "attrs": {"__shape__": "(-3, 2)"},
                                  "inputs": []},
                                 {"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}],
                       "arg_nodes": [0], "heads": [[1, 0, 0]]})
    sym = mxc.sym.load_json(text)
    with pytest.raises(ShapeError, match=r"variable 'x'.*dimension -3 is negative"):
        sym.infer_shape()
    with pytest.raises(ShapeError):
        sym.simple_bind()
    with pytest.raises(ShapeError, match="more than a 64-bit index"):
        mxc.sym.load_json(text.replace("(-3, 2)", "(4294967296, 4294967296, 4)")).infer_shape()
    with pytest.raises(ShapeError, match="negative"):
        infer_shapes(mxc.sym.load_json(text).graph, {"x": (-2, 2)})


def test_16_gib_variable_in_a_150_byte_json_is_refused_under_an_address_space_limit():
    """Failure 8: simple_bind allocated what 150 bytes declared; the cap was physical RAM,
    not what the process may use (here: ulimit -v 3 GiB)."""
    text = ('{"nodes":[{"op":"null","name":"x","attrs":{"__shape__":"(1073741824, 4)"},'
            '"inputs":[]}],"arg_nodes":[0],"heads":[[0,0,0]]}')
    assert len(text) <= 150
    code = f"""
import mxc
from mxc.errors import ExecutionError
try:
    mxc.sym.load_json({text!r}).simple_bind()
    print("ALLOCATED")
except ExecutionError as exc:
    print("REFUSED", exc)
"""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    r = run_python(code, preexec=limit)
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "address space" in r.stdout, r.stdout


def test_allocation_limits_come_from_the_process_not_the_machine(monkeypatch):
    from mxc import memory_limits
    monkeypatch.setattr(memory_limits.resource, "getrlimit", lambda which: (1 << 31, 1 << 31))
    monkeypatch.setattr(memory_limits, "_vm_size", lambda: 1 << 30)
    limits = memory_limits.allocation_limits()
    assert limits["address space"] == 1 << 30
    with pytest.raises(ExecutionError, match="address space"):
        memory_limits.checked_nbytes((1 << 29,), 4, "x")


def test_params_dims_0_and_2_63_minus_1_are_a_params_format_error():
    """Failure 8: .params dims (0, 2**63-1) gave numpy's bare ValueError."""
    blob = bytearray(dumps_params([np.zeros((0, 2), "float32")]))
    at = blob.find(struct.pack("<qq", 0, 2))
    blob[at:at + 16] = struct.pack("<qq", 0, 2 ** 63 - 1)
    with pytest.raises(ParamsFormatError, match=r"extent fits in 64 bits, got \(0, "
                                                r"9223372036854775807\)"):
        load_params(bytes(blob))


def test_duplicate_variable_names_round_trip_through_the_printed_ir():
    """Failure 8: duplicate variable names loaded, but the printed IR did not parse back."""
    text = json.dumps({"nodes": [{"op": "null", "name": "x", "inputs": []},
                                 {"op": "null", "name": "x", "inputs": []},
                                 {"op": "elemwise_add", "name": "s",
                                  "inputs": [[0, 0, 0], [1, 0, 0]]}],
                       "arg_nodes": [0, 1], "heads": [[2, 0, 0]]})
    g = load_json(text)
    printed = print_graph(g)
    assert "%x~1 = var" in printed and "elemwise_add(%x, %x~1)" in printed
    again = parse_graph(printed)
    assert print_graph(again) == printed
    add = again.nodes[2]
    assert [n.name for n in again.nodes] == ["x", "x", "s"]
    assert add.inputs[0].node is again.nodes[0] and add.inputs[1].node is again.nodes[1]
