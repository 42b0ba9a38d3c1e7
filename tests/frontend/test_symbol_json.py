"""mxc.frontend.symbol_json (+ json_parser, legacy): MXNet symbol JSON in and out.

Oracles: the corpus files MXNet 1.9.1 wrote (byte-identical round trips), the
``partitioned_symbol`` objects (parsed ``tojson()`` output with nested
subgraphs), hand-written files in the older dialects MXNet 1.x still loads
(upgrade semantics from MXNet's ``legacy_json_util.cc``), and Python's
``json`` module for the plain JSON layer.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_path, model_names, op_cases, require_corpus
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ir.compare import graph_diff, graphs_equal
from mxc.errors import FrontendError, ParseError
from mxc.frontend.json_parser import parse_json, plain
from mxc.frontend.legacy import MXNET_VERSION, upgrade_graph
from mxc.frontend.symbol_json import (SymbolJSONError, dump_json, graph_from_dict,
                                      graph_to_dict, load_json, load_json_file, mxnet_version)

MODELS = model_names() or ["no-corpus"]


def roundtrip(text: str, source: str = "<test>") -> tuple[Graph, str, Graph]:
    g = load_json(text, source=source)
    out = dump_json(g)
    again = load_json(out, source=source + "(dumped)")
    assert graphs_equal(g, again), graph_diff(g, again)
    return g, out, again


def error_of(text: str, source: str = "f.json") -> ParseError:
    with pytest.raises(ParseError) as info:
        load_json(text, source=source)
    err = info.value
    assert str(err).startswith(f"{source}:{err.line}:{err.column}: "), str(err)
    return err


# ---------------------------------------------------------------------------
# corpus: every symbol MXNet 1.9.1 wrote loads and is written back byte for byte
# ---------------------------------------------------------------------------
@pytest.mark.corpus
@pytest.mark.parametrize("name", MODELS)
def test_corpus_model_roundtrip_is_byte_identical(name):
    path = require_corpus("models") / name / "symbol.json"
    text = path.read_text()
    g, out, _ = roundtrip(text, str(path))
    meta = json.loads((path.parent / "meta.json").read_text())
    assert len(g.topo_order()) == meta["num_nodes"]
    assert g.op_counts() == meta["ops"]
    assert mxnet_version(g) == 10901
    # structural: per node op/name/attrs/inputs, same heads, against the raw JSON
    raw = json.loads(text)
    order = g.topo_order()
    assert len(order) == len(raw["nodes"])
    pos = {id(n): i for i, n in enumerate(order)}
    for node, jn in zip(order, raw["nodes"]):
        assert (node.op or "null") == jn["op"]
        assert node.name == jn["name"]
        assert node.attrs == jn.get("attrs", {})
        assert [[pos[id(e.node)], e.index, e.version] for e in node.inputs] == jn["inputs"]
    assert [[pos[id(e.node)], e.index, e.version] for e in g.outputs] == raw["heads"]
    assert out == text  # byte-identical (the hard requirement above is structural)


@pytest.mark.corpus
def test_corpus_model_load_json_file():
    root = require_corpus("models")
    for name in model_names():
        path = root / name / "symbol.json"
        assert graphs_equal(load_json_file(path), load_json(path.read_text()))


@pytest.mark.corpus
def test_corpus_op_cases_roundtrip_byte_identical():
    cases = op_cases()
    if not cases:
        require_corpus("ops/cases.jsonl")
    identical = 0
    for case in cases:
        g, out, _ = roundtrip(case["symbol"], case["id"])
        assert json.loads(out) == json.loads(case["symbol"]), case["id"]
        identical += out == case["symbol"]
    assert identical == len(cases)


def _partition_files():
    root = corpus_path()
    if root is None:
        return []
    return sorted((root / "models").glob("*/partition_*.json"))


@pytest.mark.corpus
@pytest.mark.parametrize("path", _partition_files() or ["no-corpus"], ids=str)
def test_partitioned_symbol_with_subgraphs_roundtrip(path):
    if path == "no-corpus":
        require_corpus("models/structure3/partition_0.json")
    golden = json.loads(path.read_text())
    doc = golden["partitioned_symbol"]
    text = json.dumps(doc)  # the stdlib layout, not MXNet's: only the structure matters
    g, out, again = roundtrip(text, str(path))
    assert json.loads(out) == doc  # the exact object MXNet's tojson() gave
    cached = [n for n in g.nodes if n.op == "_CachedOp"]
    assert len(cached) == golden["num_subgraph_nodes"]
    assert all(len(n.subgraphs) == 1 for n in cached)
    for n in cached:
        sub = n.subgraphs[0]
        assert isinstance(sub, Graph) and sub.outputs and not sub.attrs
    # versions of aux-state entries survive (README: [nid, 0, 1])
    versions = {e.version for n in g.nodes for e in n.inputs}
    raw_versions = {e[2] for jn in doc["nodes"] for e in jn["inputs"]}
    assert versions == raw_versions
    # a plain dict loads the same way
    assert graphs_equal(graph_from_dict(doc), g)


@pytest.mark.corpus
def test_structure3_partition_nested_layout():
    path = require_corpus("models/structure3/partition_0.json")
    doc = json.loads(path.read_text())["partitioned_symbol"]
    g = load_json(json.dumps(doc))
    out = dump_json(g)
    # MXNet's writer: subgraphs are a multi-line list of full symbol objects
    assert '"subgraphs": [\n' in out
    assert json.loads(out) == doc


# ---------------------------------------------------------------------------
# dump_json layout (dmlc's writer)
# ---------------------------------------------------------------------------
def _chain(n_ops: int) -> Graph:
    x = Node(None, "data")
    nodes = [x]
    prev = x
    for i in range(n_ops):
        w = Node(None, f"w{i}", {"__shape__": "(3,)"})
        op = Node("my_op", f"op{i}", {"b": "2", "a": "1"}, [Entry(prev), Entry(w)])
        nodes += [w, op]
        prev = op
    return Graph(nodes, [Entry(prev)])


def test_dump_layout_matches_dmlc_writer():
    out = dump_json(_chain(6))
    lines = out.split("\n")
    assert lines[0] == "{" and lines[-1] == "}" and not out.endswith("\n")
    assert lines[1] == '  "nodes": ['
    assert lines[2] == "    {"
    assert lines[3] == '      "op": "null", '
    # attribute keys sorted (std::map), several members -> one per line
    i = lines.index('      "name": "op0", ')
    assert lines[i + 1:i + 5] == ['      "attrs": {', '        "a": "1", ', '        "b": "2"',
                                  '      }, ']
    # one member -> inline
    assert '      "attrs": {"__shape__": "(3,)"}, ' in lines
    # 13 nodes: arg_nodes has 7 (inline), node_row_ptr 14 (one per line)
    assert '  "arg_nodes": [0, 1, 3, 5, 7, 9, 11], ' in lines
    k = lines.index('  "node_row_ptr": [')
    assert lines[k + 1] == "    0, " and lines[k + 14] == "    13"
    assert lines[k + 15] == "  ], "
    assert lines[-3] == '  "heads": [[12, 0, 0]], '
    assert lines[-2] == '  "attrs": {"mxnet_version": ["int", 10901]}'


def test_dump_escapes_like_dmlc_and_reads_back():
    weird = 'q"uote \\ back\nnew\ttab\rcr \x01ctl é 😀'
    g = Graph([Node(None, weird, {weird: weird, "k": ""})], [])
    g.outputs = [Entry(g.nodes[0])]
    out = dump_json(g)
    assert '\\"' in out and "\\\\" in out and "\\n" in out and "\\t" in out and "\\r" in out
    assert "\x01" in out and "é" in out and "😀" in out  # written raw, as dmlc does
    back = load_json(out)
    assert back.nodes[0].name == weird and back.nodes[0].attrs == {weird: weird, "k": ""}


def test_dump_uses_topo_order_and_drops_unreachable():
    a, b = Node(None, "a"), Node(None, "b")
    dead = Node("my_op", "dead", {}, [Entry(a)])
    r = Node("my_op", "r", {}, [Entry(b), Entry(a)])
    g = Graph([a, b, dead, r], [Entry(r)])
    doc = graph_to_dict(g)
    assert [n["name"] for n in doc["nodes"]] == ["b", "a", "r"]
    assert doc["nodes"][2]["inputs"] == [[0, 0, 0], [1, 0, 0]]
    assert doc["arg_nodes"] == [0, 1]


def test_dump_control_deps_versions_graph_attrs():
    a = Node(None, "a")
    b = Node("my_op", "b", {}, [Entry(a, 0, 2)])
    c = Node("my_op", "c", {}, [Entry(a)], control_deps=[b])
    g = Graph([a, b, c], [Entry(c), Entry(b, 1)],
              {"mxnet_version": ["int", 10700], "extra": ["list_int", list(range(12))],
               "not_serializable": object()})
    out = dump_json(g)
    doc = json.loads(out)
    # MXNet's DFS: c's inputs (a), then its control deps (b), then c
    assert [n["name"] for n in doc["nodes"]] == ["a", "b", "c"]
    byname = {n["name"]: n for n in doc["nodes"]}
    assert byname["c"]["control_deps"] == [1]
    assert '"control_deps": [1]' in out
    assert byname["b"]["inputs"] == [[0, 0, 2]]
    assert doc["attrs"]["mxnet_version"] == ["int", 10700]  # kept, not overwritten
    assert doc["attrs"]["extra"] == ["list_int", list(range(12))]
    assert "not_serializable" not in doc["attrs"]
    # b's output 1 is used: node_row_ptr gives the unknown op at least 2 outputs
    i = [n["name"] for n in doc["nodes"]].index("b")
    assert doc["node_row_ptr"][i + 1] - doc["node_row_ptr"][i] == 2
    back = load_json(out)
    assert graphs_equal(g, back)
    # loading upgrades a 1.7.0 file to the current dialect, and says so
    assert back.attrs["mxnet_version"] == ["int", 10901]
    assert back.attrs["extra"] == ["list_int", list(range(12))]


# ---------------------------------------------------------------------------
# older dialects
# ---------------------------------------------------------------------------
# MXNet 0.8 (no mxnet_version): op parameters under "param", [nid, index]
# pairs, backward_source_id, BatchNorm without its auxiliary states.
PARAM_DIALECT = """{
  "nodes": [
    {
      "op": "null",
      "param": {},
      "name": "data",
      "inputs": [],
      "backward_source_id": -1
    },
    {
      "op": "null",
      "param": {},
      "name": "conv_weight",
      "inputs": [],
      "backward_source_id": -1
    },
    {
      "op": "Convolution",
      "param": {"kernel": "(3, 3)", "no_bias": "True", "num_filter": "8"},
      "name": "conv",
      "inputs": [[0, 0], [1, 0]],
      "backward_source_id": -1
    },
    {
      "op": "null",
      "param": {},
      "name": "bn_gamma",
      "inputs": [],
      "backward_source_id": -1
    },
    {
      "op": "null",
      "param": {},
      "name": "bn_beta",
      "inputs": [],
      "backward_source_id": -1
    },
    {
      "op": "BatchNorm",
      "param": {"eps": "0.001", "fix_gamma": "True", "momentum": "0.9"},
      "name": "bn",
      "inputs": [[2, 0], [3, 0], [4, 0]],
      "backward_source_id": -1
    },
    {
      "op": "argmax",
      "param": {"axis": "-1"},
      "name": "am",
      "inputs": [[5, 0]],
      "backward_source_id": -1
    }
  ],
  "arg_nodes": [0, 1, 3, 4],
  "heads": [[6, 0]]
}"""


def test_param_dialect_pre_0_9_batchnorm_gets_aux_inputs():
    g, out, again = roundtrip(PARAM_DIALECT, "old.json")
    bn = g.node("bn")
    assert [e.node.name for e in bn.inputs] == ["conv", "bn_gamma", "bn_beta",
                                                "bn_moving_mean", "bn_moving_var"]
    mean, var = bn.inputs[3].node, bn.inputs[4].node
    assert mean.is_variable and var.is_variable
    # MXNet copies the op's attributes onto the new variables, then (0.9.4
    # upgrade) gives them BatchNorm's initializers
    base = {"eps": "0.001", "fix_gamma": "True", "momentum": "0.9"}
    assert mean.attrs == {**base, "__init__": '["zero", {}]'}
    assert var.attrs == {**base, "__init__": '["one", {}]'}
    # placed right before the node: the list stays sorted; MXNet's DFS order
    names = [n.name for n in g.nodes]
    assert names.index("bn_moving_var") == names.index("bn") - 1
    assert [n.name for n in g.topo_order()] == [
        "data", "conv_weight", "conv", "bn_gamma", "bn_beta", "bn_moving_mean",
        "bn_moving_var", "bn", "am"]
    # param -> attrs; argmax axis=-1 dropped (0.9.5 upgrade); pairs -> version 0
    assert g.node("conv").attrs == {"kernel": "(3, 3)", "no_bias": "True", "num_filter": "8"}
    assert g.node("am").attrs == {}
    assert all(e.version == 0 for n in g.nodes for e in n.inputs)
    # written in the current dialect
    doc = json.loads(out)
    assert doc["attrs"] == {"mxnet_version": ["int", 10901]}
    assert all("backward_source_id" not in n and "param" not in n for n in doc["nodes"])
    assert doc["arg_nodes"] == [0, 1, 3, 4, 5, 6]
    assert all(len(e) == 3 for n in doc["nodes"] for e in n["inputs"])
    # loading the upgraded text again changes nothing
    assert dump_json(again) == out


# MXNet 0.9.3: "attr" dialect, hidden keys without underscores.
ATTR_DIALECT = """{
  "nodes": [
    {"op": "null", "name": "data", "inputs": []},
    {"op": "null", "name": "fc_weight", "attr": {"lr_mult": "0.5", "wd_mult": "0"},
     "inputs": []},
    {"op": "null", "name": "fc_bias", "attr": {"lr_mult_x": "keep"}, "inputs": []},
    {
      "op": "FullyConnected",
      "name": "fc",
      "attr": {"ctx_group": "dev1", "bias_lr_mult": "2.0", "num_hidden": "10",
               "weight_wd_mult": "0.1", "force_mirroring": "True"},
      "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]
    },
    {"op": "null", "name": "bn_gamma", "inputs": []},
    {"op": "null", "name": "bn_beta", "inputs": []},
    {"op": "null", "name": "bn_moving_mean", "attr": {"__init__": "[\\"constant\\", {}]"},
     "inputs": []},
    {"op": "null", "name": "bn_moving_var", "inputs": []},
    {
      "op": "BatchNorm",
      "name": "bn",
      "attr": {"fix_gamma": "False", "mirror_stage": "True"},
      "inputs": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 1], [7, 0, 1]]
    }
  ],
  "arg_nodes": [0, 1, 2, 4, 5, 6, 7],
  "heads": [[8, 0, 0]],
  "attrs": {"mxnet_version": ["int", 903]}
}"""


def test_attr_dialect_hidden_keys_and_initializers():
    g, out, _ = roundtrip(ATTR_DIALECT, "attr.json")
    w = g.node("fc_weight")
    assert w.attrs == {"__lr_mult__": "0.5", "__wd_mult__": "0.1"}  # op's weight_wd_mult wins
    # "lr_mult_x" only looks like a hidden key: kept as it is
    assert g.node("fc_bias").attrs == {"lr_mult_x": "keep", "__lr_mult__": "2.0"}
    fc = g.node("fc")
    assert fc.attrs == {"__ctx_group__": "dev1", "num_hidden": "10",
                        "__force_mirroring__": "True"}
    bn = g.node("bn")
    assert bn.attrs == {"fix_gamma": "False", "__mirror_stage__": "True"}
    # 0.9.4 upgrade: only where no __init__ was given
    assert g.node("bn_moving_mean").attrs == {"__init__": '["constant", {}]'}
    assert g.node("bn_moving_var").attrs == {"__init__": '["one", {}]'}
    assert [e.version for e in bn.inputs] == [0, 0, 0, 1, 1]
    assert mxnet_version(g) == MXNET_VERSION
    assert '"attr"' not in out and '"attrs"' in out


def test_hidden_keys_without_underscores_in_a_1x_file():
    text = ('{"nodes": [{"op": "null", "name": "x", "attrs": {"lr_mult": "0.1", '
            '"ctx_group": "g", "__wd_mult__": "0"}, "inputs": []}], "arg_nodes": [0], '
            '"heads": [[0, 0, 0]], "attrs": {"mxnet_version": ["int", 10600]}}')
    g = load_json(text)
    assert g.nodes[0].attrs == {"__lr_mult__": "0.1", "__ctx_group__": "g", "__wd_mult__": "0"}
    # a 1.9.1 file is taken as is (MXNet runs no upgrade for its own version)
    g = load_json(text.replace("10600", "10901"))
    assert g.nodes[0].attrs == {"lr_mult": "0.1", "ctx_group": "g", "__wd_mult__": "0"}
    # and a newer file too (MXNet only warns)
    g = load_json(text.replace("10600", "20000"))
    assert g.nodes[0].attrs["lr_mult"] == "0.1" and mxnet_version(g) == 20000


@pytest.fixture
def legacy_test_op():
    """A registered op with an argument and an aux state, removed afterwards."""
    from mxc.compiler.ops.registry import Attr, OpDef, register_op, to_bool, unregister_op

    @register_op("_test_legacy_op", family="test", override=True)
    class _TestLegacyOp(OpDef):
        attrs = {"flag": Attr(to_bool, False)}
        arguments = ("data", "kernel")
        aux = ("state",)

    yield "_test_legacy_op"
    unregister_op("_test_legacy_op")


def test_legacy_upgrades_use_the_registry(legacy_test_op):
    text = ('{"nodes": [{"op": "null", "name": "x", "inputs": []}, '
            '{"op": "null", "name": "k", "inputs": []}, '
            '{"op": "_test_legacy_op", "name": "t", "attr": {"flag": "True", '
            '"kernel_lr_mult": "3", "data_wd_mult": "0"}, '
            '"inputs": [[0, 0], [1, 0]]}], "arg_nodes": [0, 1], "heads": [[2, 0]]}')
    g = load_json(text)
    t = g.node("t")
    assert g.node("k").attrs == {"__lr_mult__": "3"}
    assert g.node("x").attrs == {"__wd_mult__": "0"}
    # the missing aux input is named after the registry's input name
    assert [e.node.name for e in t.inputs] == ["x", "k", "t_state"]
    assert t.attrs == {"flag": "True"}
    assert g.node("t_state").attrs == {"flag": "True"}


def test_attr_and_param_merge_precedence():
    text = ('{"nodes": [{"op": "null", "name": "x", "inputs": []}, '
            '{"op": "my_op", "name": "y", "param": {"a": "param", "b": "param"}, '
            '"attr": {"a": "attr"}, "inputs": [[0, 0]]}], "arg_nodes": [0], '
            '"heads": [[1, 0]]}')
    g = load_json(text)
    assert g.node("y").attrs == {"a": "attr", "b": "param"}


def test_legacy_upgrade_steps_are_version_gated():
    g = load_json(PARAM_DIALECT.replace('"heads": [[6, 0]]',
                                        '"heads": [[6, 0]], "attrs": {"mxnet_version": '
                                        '["int", 900]}'))
    # 0.9.0: no aux inputs added, but the initializer and argmax steps run
    assert len(g.node("bn").inputs) == 3
    assert g.node("am").attrs == {}
    g = load_json(PARAM_DIALECT.replace('"heads": [[6, 0]]',
                                        '"heads": [[6, 0]], "attrs": {"mxnet_version": '
                                        '["int", 905]}'))
    assert g.node("am").attrs == {"axis": "-1"}
    assert upgrade_graph(Graph(), MXNET_VERSION) == []
    assert upgrade_graph(Graph(), 800) == ["fix_hidden_keys", "add_missing_inputs",
                                           "set_input_initializers", "fix_argminmax_axis"]


def test_unreachable_nodes_are_dropped_like_mxnet():
    text = ('{"nodes": [{"op": "null", "name": "a", "inputs": []}, '
            '{"op": "null", "name": "unused", "inputs": []}, '
            '{"op": "my_op", "name": "r", "inputs": [[0, 0, 0]]}], '
            '"arg_nodes": [0, 1], "heads": [[2, 0, 0]]}')
    g = load_json(text)
    assert [n.name for n in g.nodes] == ["a", "r"]


# ---------------------------------------------------------------------------
# located errors
# ---------------------------------------------------------------------------
def test_truncated_file_reports_end_of_input():
    text = '{\n  "nodes": [\n    {"op": "null", "name": "a", "inputs": []}'
    err = error_of(text)
    assert (err.line, err.column) == (3, 46)
    assert "unexpected end of input: expected ',' or ']'" in str(err)


@pytest.mark.corpus
def test_truncated_corpus_file():
    text = (require_corpus("models/mlp") / "symbol.json").read_text()
    cut = text[:text.index('"name": "fc2"') + 8]  # inside a key/value member
    err = error_of(cut, "mlp.json")
    last = cut.split("\n")
    assert err.line == len(last)
    assert "unexpected end of input" in str(err) or "unterminated string" in str(err)


def test_syntax_errors_are_located():
    err = error_of('{\n  "nodes": [\n    {"op": "null" "name": "a"}\n  ]\n}')
    assert (err.line, err.column) == (3, 19)
    assert "expected ',' or '}'" in str(err)
    err = error_of('{\n  "nodes": [tru]\n}')
    assert (err.line, err.column) == (2, 13) and "invalid token 'tru'" in str(err)
    err = error_of('{"nodes": [1, 2,]}')
    assert (err.line, err.column) == (1, 17) and "expected a value, got ']'" in str(err)
    err = error_of('{"a": "bad \\x escape"}')
    assert (err.line, err.column) == (1, 12) and "invalid escape" in str(err)
    err = error_of('{"a": "no end\n}')
    assert (err.line, err.column) == (1, 7) and "unterminated string" in str(err)
    err = error_of("{'a': 1}")
    assert (err.line, err.column) == (1, 2) and "double quotes" in str(err)
    err = error_of('{"a" 1}')
    assert (err.line, err.column) == (1, 6) and "expected ':'" in str(err)
    err = error_of('')
    assert (err.line, err.column) == (1, 1) and "expected a value" in str(err)


# a small valid symbol in MXNet's layout; tests break one thing at a time
GOOD = """{
  "nodes": [
    {
      "op": "null",
      "name": "data",
      "inputs": []
    },
    {
      "op": "null",
      "name": "w",
      "inputs": []
    },
    {
      "op": "my_op",
      "name": "conv0",
      "attrs": {"k": "v"},
      "inputs": [[0, 0, 0], [1, 0, 0]]
    },
    {
      "op": "split",
      "name": "sp",
      "attrs": {"num_outputs": "2"},
      "inputs": [[2, 0, 0]]
    }
  ],
  "arg_nodes": [0, 1],
  "heads": [[3, 1, 0]]
}"""


def test_good_fixture_loads():
    g = load_json(GOOD)
    assert [n.name for n in g.nodes] == ["data", "w", "conv0", "sp"]
    assert g.outputs[0].index == 1


@pytest.mark.parametrize("old,new,line,col,words", [
    # wrong field types
    ('"inputs": [[0, 0, 0], [1, 0, 0]]', '"inputs": {"a": 1}', 17, 7,
     "node 2 ('conv0'): field 'inputs' must be a list of [node, index, version] triples, "
     "got an object"),
    ('"name": "w"', '"name": 5', 10, 7, "node 1: field 'name' must be a string, got an integer"),
    ('"attrs": {"k": "v"}', '"attrs": {"k": 1.5}', 16, 17,
     "node 2 ('conv0'): attribute 'k' must be a string"),
    ('"attrs": {"k": "v"}', '"attrs": ["k"]', 16, 7,
     "node 2 ('conv0'): field 'attrs' must be an object of strings, got an array"),
    ('"op": "my_op"', '"op": null', 14, 7, "node 2 ('conv0'): field 'op' must be a string"),
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [1, "0"]]', 17, 29,
     "node 2 ('conv0'): inputs[1] must be a [node, index, version] triple"),
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [1]]', 17, 29, "inputs[1] must be a"),
    ('"arg_nodes": [0, 1]', '"arg_nodes": 3', 26, 3, "field 'arg_nodes' must be a list"),
    # references
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [3, 0, 0]]', 17, 29,
     "node 2 ('conv0'): inputs[1] refers to node 3, which comes later: a forward reference"),
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [2, 0, 0]]', 17, 29,
     "node 2 ('conv0'): inputs[1] refers to the node itself"),
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [9, 0, 0]]', 17, 29,
     "node 2 ('conv0'): inputs[1] refers to node 9, which does not exist (there are 4 nodes)"),
    ('"heads": [[3, 1, 0]]', '"heads": [[4, 0, 0]]', 27, 13,
     "heads[0] refers to node 4, which does not exist (there are 4 nodes)"),
    ('"arg_nodes": [0, 1]', '"arg_nodes": [0, 2]', 26, 20,
     "arg_nodes[1] lists node 2 ('conv0'), which is an operator (my_op), not a variable"),
    ('"arg_nodes": [0, 1]', '"arg_nodes": [0, 7]', 26, 20,
     "arg_nodes[1] refers to node 7, which does not exist"),
    # output indices: variables have one output; registered ops say how many
    ('[[0, 0, 0], [1, 0, 0]]', '[[0, 0, 0], [1, 1, 0]]', 17, 29,
     "node 2 ('conv0'): inputs[1] uses output 1 of variable 1 ('w'), which has only output 0"),
    ('"heads": [[3, 1, 0]]', '"heads": [[3, 2, 0]]', 27, 13,
     "heads[0] uses output 2 of node 3 ('sp', split), which has 2 outputs"),
])
def test_validation_errors_are_located(old, new, line, col, words):
    assert old in GOOD
    err = error_of(GOOD.replace(old, new, 1), "model.json")
    assert isinstance(err, SymbolJSONError)
    assert (err.line, err.column) == (line, col), str(err)
    assert words in str(err)


def test_unknown_op_output_index_is_not_checked():
    # my_op is not registered: its arity is unknown, so index 5 is accepted
    g = load_json(GOOD.replace('"heads": [[3, 1, 0]]', '"heads": [[2, 5, 0]]'))
    assert g.outputs[0].index == 5


def test_missing_fields_and_bad_top_level():
    err = error_of('{"nodes": []}')
    assert "missing required field 'heads'" in str(err) and (err.line, err.column) == (1, 1)
    err = error_of('{"nodes": [{"op": "null", "name": "a"}], "heads": []}')
    assert "node 0 ('a'): missing required field 'inputs'" in str(err)
    assert (err.line, err.column) == (1, 12)
    err = error_of('[1]')
    assert "must be a JSON object" in str(err)
    err = error_of('{"nodes": [], "heads": [], "attrs": {"mxnet_version": "1.9.1"}}')
    assert 'mxnet_version" must be ["int", <version>]' in str(err)
    assert (err.line, err.column) == (1, 38)


def test_nested_subgraph_errors_name_the_path():
    sub = '{"nodes": [{"op": "null", "name": "x", "inputs": [[1, 0, 0]]}], "heads": [[0, 0]]}'
    text = ('{"nodes": [{"op": "null", "name": "a", "inputs": []}, {"op": "_CachedOp", '
            f'"name": "c", "inputs": [[0, 0, 0]], "subgraphs": [{sub}]}}], "heads": [[1, 0]]}}')
    err = error_of(text)
    assert "node 1 ('c'): subgraph 0: node 0 ('x'): inputs[0] refers to node 1" in str(err)
    assert err.line == 1 and err.column == text.index("[1, 0, 0]") + 1


def test_error_without_positions_from_a_dict():
    with pytest.raises(SymbolJSONError, match=r"^<dict>: node 0: field 'name'"):
        graph_from_dict({"nodes": [{"op": "null", "name": 1, "inputs": []}], "heads": []})


def test_load_json_file_errors(tmp_path):
    with pytest.raises(FrontendError, match="cannot read symbol file"):
        load_json_file(tmp_path / "missing.json")
    p = tmp_path / "bad.json"
    p.write_bytes(b'{\n  "nodes": [\xff]}')
    with pytest.raises(ParseError) as info:
        load_json_file(p)
    assert (info.value.line, info.value.column) == (2, 13)
    assert "invalid UTF-8" in str(info.value)
    p.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())  # BOM
    assert [n.name for n in load_json_file(p).nodes] == ["data", "w", "conv0", "sp"]
    p.write_text(GOOD.replace('"heads": [[3, 1, 0]]', '"heads": [[9, 0, 0]]'))
    with pytest.raises(SymbolJSONError) as info:
        load_json_file(p)
    assert str(info.value).startswith(f"{p}:27:13: heads[0] refers to node 9")


# ---------------------------------------------------------------------------
# nested subgraphs, hand-written
# ---------------------------------------------------------------------------
def test_nested_subgraphs_two_levels_roundtrip():
    inner = Graph()
    v = Node(None, "v0")
    inner.nodes = [v, Node("sin", "s", {}, [Entry(v)])]
    inner.outputs = [Entry(inner.nodes[1])]
    mid_v = Node(None, "data0")
    mid_op = Node("_CachedOp", "inner_call", {}, [Entry(mid_v)], subgraphs=[inner])
    mid = Graph([mid_v, mid_op], [Entry(mid_op), Entry(mid_op)])
    x = Node(None, "x", {"__shape__": "(2, 3)"})
    aux = Node(None, "aux")
    top_op = Node("_CachedOp", "outer", {}, [Entry(x), Entry(aux, 0, 1)], subgraphs=[mid])
    g = Graph([x, aux, top_op], [Entry(top_op, 0), Entry(top_op, 1)])
    text = dump_json(g)
    back, out, _ = roundtrip(text)
    assert out == text
    assert graphs_equal(g, back)
    sub = back.node("outer").subgraphs[0]
    assert sub.node("inner_call").subgraphs[0].node("s").op == "sin"
    assert back.node("outer").inputs[1].version == 1
    doc = json.loads(text)
    assert "attrs" not in doc["nodes"][2]["subgraphs"][0]  # MXNet writes none there
    # the unknown _CachedOp gets one output per subgraph head in node_row_ptr
    assert doc["node_row_ptr"] == [0, 1, 2, 4]


# ---------------------------------------------------------------------------
# graphs_equal
# ---------------------------------------------------------------------------
def test_graphs_equal_detects_each_kind_of_difference():
    base = load_json(GOOD)

    def changed(edit):
        g = base.copy()
        edit(g)
        return g

    assert graphs_equal(base, base.copy())
    assert not graphs_equal(base, changed(lambda g: g.node("conv0").attrs.update(k="w")))
    assert graphs_equal(base, changed(lambda g: g.node("conv0").attrs.update(k="w")),
                        attrs=False)
    assert not graphs_equal(base, changed(lambda g: setattr(g.node("sp"), "op", "other")))
    assert not graphs_equal(base, changed(lambda g: setattr(g.node("w"), "name", "w2")))

    def swap(g):
        c = g.node("conv0")
        c.inputs = list(reversed(c.inputs))
    assert not graphs_equal(base, changed(swap))
    assert not graphs_equal(base, changed(lambda g: setattr(g, "outputs",
                                                            [Entry(g.node("sp"), 0)])))
    assert not graphs_equal(base, changed(lambda g: g.node("conv0").subgraphs.append(Graph())))
    d = graph_diff(base, changed(lambda g: g.node("w").attrs.update(x="1")))
    assert d and "node 1 ('w')" in d and "'x'" in d
    g2 = changed(lambda g: g.attrs.update(mxnet_version=["int", 1]))
    assert graphs_equal(base, g2) and not graphs_equal(base, g2, graph_attrs=True)


# ---------------------------------------------------------------------------
# the JSON layer against Python's json module
# ---------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from([None, 0, 1, 2, 4]), st.booleans(),
       st.sampled_from([(", ", ": "), (",", ":"), (" , ", " : ")]))
def test_parse_json_agrees_with_stdlib(value, indent, ascii_only, seps):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only, separators=seps)
    assert plain(parse_json(text)) == json.loads(text)


@settings(max_examples=200, deadline=None)
@given(json_values, st.data())
def test_parse_json_rejects_what_stdlib_rejects(value, data):
    text = json.dumps(value, indent=data.draw(st.sampled_from([None, 2])))
    cut = data.draw(st.integers(0, len(text)))
    bad = text[:cut]
    try:
        expected = json.loads(bad, strict=False)
        ok = True
    except ValueError:
        ok = False
    if ok:
        assert plain(parse_json(bad)) == expected
    else:
        with pytest.raises(ParseError) as info:
            parse_json(bad, source="cut.json")
        assert info.value.line is not None and info.value.column is not None


# ---------------------------------------------------------------------------
# property: random symbol graphs survive dump -> load -> dump
# ---------------------------------------------------------------------------
names = st.text(min_size=1, max_size=6)
attr_maps = st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=10), max_size=3)
OPS = ["opA", "opB", "_contrib_thing", "my.op"]  # not registered: arity is free


@st.composite
def graphs(draw, depth=0):
    nodes: list[Node] = []
    for i in range(draw(st.integers(1, 3))):
        nodes.append(Node(None, draw(names), draw(attr_maps)))
    for i in range(draw(st.integers(1, 6))):
        k = draw(st.integers(0, 3))
        inputs = []
        for _ in range(k):
            p = draw(st.sampled_from(nodes))
            idx = 0 if p.op is None else draw(st.integers(0, 2))
            inputs.append(Entry(p, idx, draw(st.sampled_from([0, 0, 1]))))
        deps = draw(st.lists(st.sampled_from(nodes), max_size=1))
        subs = []
        if depth == 0 and draw(st.integers(0, 5)) == 0:
            subs = [draw(graphs(depth=1))]
        nodes.append(Node(draw(st.sampled_from(OPS)), draw(names), draw(attr_maps), inputs,
                          subgraphs=subs, control_deps=deps))
    heads = [Entry(nodes[-1])]
    for _ in range(draw(st.integers(0, 2))):
        p = draw(st.sampled_from(nodes))
        heads.append(Entry(p, 0 if p.op is None else draw(st.integers(0, 1))))
    return Graph(nodes, heads)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_roundtrip(g):
    text = dump_json(g)
    back = load_json(text)
    assert graphs_equal(g, back), graph_diff(g, back)
    assert dump_json(back) == text
    # dmlc writes control characters raw, hence strict=False
    assert json.loads(text, strict=False) == graph_to_dict(g)


# ---------------------------------------------------------------------------
# scale: a 1,000-node residual symbol (speed is measured in bench/bench_load.py)
# ---------------------------------------------------------------------------
def residual_graph(n_nodes: int) -> Graph:
    """Conv-BN-ReLU blocks with residual adds, MXNet-style attributes."""
    data = Node(None, "data")
    nodes = [data]
    last = res = data
    k = 0
    while len(nodes) < n_nodes:
        w = Node(None, f"conv{k}_weight", {"__dtype__": "0", "__lr_mult__": "1.0",
                                           "__shape__": "(64, 0, 3, 3)",
                                           "__storage_type__": "0", "__wd_mult__": "1.0"})
        conv = Node("Convolution", f"conv{k}", {
            "dilate": "(1, 1)", "kernel": "(3, 3)", "layout": "NCHW", "no_bias": "True",
            "num_filter": "64", "num_group": "1", "pad": "(1, 1)", "stride": "(1, 1)"},
            [Entry(last), Entry(w)])
        bn_vars = [Node(None, f"bn{k}_{p}", {"__dtype__": "0", "__init__": "zeros",
                                             "__shape__": "(0,)", "__storage_type__": "0"})
                   for p in ("gamma", "beta", "running_mean", "running_var")]
        bn = Node("BatchNorm", f"bn{k}", {"axis": "1", "eps": "1e-05", "fix_gamma": "False",
                                          "momentum": "0.9", "use_global_stats": "False"},
                  [Entry(conv)] + [Entry(v, 0, 1 if j >= 2 else 0)
                                   for j, v in enumerate(bn_vars)])
        relu = Node("Activation", f"relu{k}", {"act_type": "relu"}, [Entry(bn)])
        add = Node("elemwise_add", f"add{k}", {}, [Entry(relu), Entry(res)])
        nodes += [w, conv, *bn_vars, bn, relu, add]
        last = res = add
        k += 1
    return Graph(nodes, [Entry(last)])


def test_thousand_node_graph_round_trips():
    g = residual_graph(1000)
    back = load_json(dump_json(g))
    assert len(back.nodes) == len(g.nodes) >= 1000
    assert graphs_equal(g, back)
