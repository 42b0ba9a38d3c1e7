"""The textual IR (``mxc.compiler.ir.text``): printing, parsing, round trips, errors.

The structural comparison below is local on purpose: it is stricter than
``mxc.compiler.ir.compare`` (``Graph.nodes`` order including unreachable
nodes, attribute *order*, value *types* of graph attributes, use counts),
because the round trip promises exactly that.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.ir.text import RESERVED_WORDS, parse_graph, print_graph, quote_string
from mxc.errors import FrontendError, MxcError, ParseError

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------
# structural comparison
# ---------------------------------------------------------------------------------------
def same_value(a, b) -> bool:
    """Equality that also requires equal types (list vs tuple, int vs float vs bool)
    and treats NaN as equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    return a == b


def assert_same_graph(a: Graph, b: Graph, where: str = "graph") -> None:
    assert len(a.nodes) == len(b.nodes), f"{where}: node count"
    pos_a = {id(n): i for i, n in enumerate(a.nodes)}
    pos_b = {id(n): i for i, n in enumerate(b.nodes)}

    def entry_key(e: Entry, pos: dict) -> tuple:
        return (pos.get(id(e.node)), e.node.name, e.index, e.version)

    for i, (x, y) in enumerate(zip(a.nodes, b.nodes)):
        w = f"{where}: node {i} ({x.name!r})"
        assert x.op == y.op, w
        assert x.name == y.name, w
        assert list(x.attrs.items()) == list(y.attrs.items()), w  # order too
        assert [entry_key(e, pos_a) for e in x.inputs] == \
               [entry_key(e, pos_b) for e in y.inputs], w
        assert [(pos_a.get(id(d)), d.name) for d in x.control_deps] == \
               [(pos_b.get(id(d)), d.name) for d in y.control_deps], w
        assert x.num_uses() == y.num_uses(), w
        assert [pos_a.get(id(u)) for u in x.users] == [pos_b.get(id(u)) for u in y.users], w
        assert len(x.subgraphs) == len(y.subgraphs), w
        for k, (sx, sy) in enumerate(zip(x.subgraphs, y.subgraphs)):
            assert_same_graph(sx, sy, f"{w}: subgraph {k}")
    assert [entry_key(e, pos_a) for e in a.outputs] == \
           [entry_key(e, pos_b) for e in b.outputs], f"{where}: outputs"
    assert same_value(a.attrs, b.attrs), f"{where}: attrs {a.attrs!r} != {b.attrs!r}"


def round_trip(graph: Graph, **kw) -> str:
    text = print_graph(graph, **kw)
    parsed = parse_graph(text)
    assert_same_graph(graph, parsed)
    assert graph_diff(graph, parsed) is None  # the project's own (DFS-order) equality agrees
    assert print_graph(parsed, **kw) == text
    return text


# ---------------------------------------------------------------------------------------
# hand-written examples
# ---------------------------------------------------------------------------------------
def example_graph() -> Graph:
    data = Node(None, "data")
    weight = Node(None, "conv0_weight", {"__init__": '["zeros", {}]',
                                         "__shape__": "(64, 3, 3, 3)"})
    bias = Node(None, "conv0_bias")
    conv = Node("Convolution", "conv0", {"kernel": "(3, 3)", "num_filter": "64",
                                         "pad": "(1, 1)"}, [data.out, weight.out, bias.out])
    split = Node("SliceChannel", "split0", {"num_outputs": "2"}, [conv.out])
    add = Node("elemwise_add", "sum", {}, [split[0], split[1]])
    # two levels of nesting: sg -> call -> (x, r)
    x = Node(None, "x")
    r = Node("relu", "r", {}, [x.out])
    inner = Graph([x, r], [r.out])
    a, b = Node(None, "a"), Node(None, "b")
    call = Node("_CachedOp", "call", {}, [a.out, b.out], [inner])
    middle = Graph([a, b, call], [call.out])
    sg = Node("_CachedOp", "sg", {"__subgraph_name__": "sg_0"}, [data.out, add.out],
              [middle], control_deps=[conv])
    return Graph([data, weight, bias, conv, split, add, sg], [add.out, split[1]],
                 {"mxnet_version": ["int", 10901]})


EXAMPLE_TEXT = """\
graph @main attributes {mxnet_version = ["int", 10901]} {
  %data = var
  %conv0_weight = var {__init__ = "[\\"zeros\\", {}]", __shape__ = "(64, 3, 3, 3)"}
  %conv0_bias = var
  %conv0 = Convolution(%data, %conv0_weight, %conv0_bias) {kernel = "(3, 3)", num_filter = "64", pad = "(1, 1)"}
  %split0 = SliceChannel(%conv0) {num_outputs = "2"}
  %sum = elemwise_add(%split0, %split0#1)
  %sg = _CachedOp(%data, %sum) {__subgraph_name__ = "sg_0"} after(%conv0) {
    graph @sg_0 {
      %a = var
      %b = var
      %call = _CachedOp(%a, %b) {
        graph @sg_0 {
          %x = var
          %r = relu(%x)
          return %r
        }
      }
      return %call
    }
  }
  return %sum, %split0#1
}"""


def test_example_prints_exactly():
    assert print_graph(example_graph()) == EXAMPLE_TEXT


def test_example_round_trips_and_str_uses_printer():
    g = example_graph()
    assert str(g) == EXAMPLE_TEXT
    round_trip(g)


def test_parsed_example_is_a_valid_graph_with_exact_use_counts():
    g = parse_graph(EXAMPLE_TEXT)
    split = g.node("split0")
    assert split.num_uses() == 2 and split.users == [g.node("sum")]
    assert split.num_uses(g.node("sum")) == 2
    assert g.node("conv0").users == [split]  # control deps are not uses
    assert g.node("sg").control_deps == [g.node("conv0")]
    assert [(e.node.name, e.index) for e in g.outputs] == [("sum", 0), ("split0", 1)]
    inner = g.node("sg").subgraphs[0].node("call").subgraphs[0]
    assert [n.name for n in inner.nodes] == ["x", "r"]
    assert g.attrs == {"mxnet_version": ["int", 10901]}
    assert g.list_arguments() == ["data", "conv0_weight", "conv0_bias"]


def test_parsed_graph_of_registered_ops_verifies():
    g = parse_graph("\n".join(EXAMPLE_TEXT.splitlines()[:7]) + "\n  return %sum, %split0#1\n}")
    g.verify()  # arity and output indices check out against the op registry
    assert g.list_outputs() == ["sum_output", "split0_output1"]


def test_hand_written_text_with_comments_and_free_layout():
    text = """
    // a comment before the graph
    graph @"my model" attributes {"mxnet_version" = ["int", 10901], flag = true} {
      %data = var // the input
      %"w.0" = var {"__init__" = "zeros", lr_mult="2"}
      %fc=FullyConnected( %data , %"w.0" ) { num_hidden = "4" , no_bias = "True" }
      %s = SliceChannel(%fc) {num_outputs = "3"}  // three outputs
      %y = "my-op"(%s#0, %s#2@1, %data@3) after(%fc,%s)
      return %y, %s#0, %s#1
    } // trailing comment
    """
    g = parse_graph(text)
    assert [n.name for n in g.nodes] == ["data", "w.0", "fc", "s", "y"]
    assert g.attrs == {"mxnet_version": ["int", 10901], "flag": True}
    assert list(g.node("w.0").attrs.items()) == [("__init__", "zeros"), ("lr_mult", "2")]
    y = g.node("y")
    assert y.op == "my-op"
    assert [(e.node.name, e.index, e.version) for e in y.inputs] == \
        [("s", 0, 0), ("s", 2, 1), ("data", 0, 3)]
    assert [d.name for d in y.control_deps] == ["fc", "s"]
    assert [(e.node.name, e.index) for e in g.outputs] == [("y", 0), ("s", 0), ("s", 1)]
    # the canonical form: explicit #0 disappears, keys are bare where possible
    assert print_graph(g, name="my model") == """\
graph @"my model" attributes {mxnet_version = ["int", 10901], flag = true} {
  %data = var
  %"w.0" = var {__init__ = "zeros", lr_mult = "2"}
  %fc = FullyConnected(%data, %"w.0") {num_hidden = "4", no_bias = "True"}
  %s = SliceChannel(%fc) {num_outputs = "3"}
  %y = "my-op"(%s, %s#2@1, %data@3) after(%fc, %s)
  return %y, %s, %s#1
}"""


def test_entry_versions_survive():
    v = Node(None, "data")
    n = Node("identity", "id", {}, [Entry(v, 0, 1)])
    g = Graph([v, n], [Entry(n, 0, 0), Entry(v, 0, 2)])
    text = round_trip(g)
    assert "%id = identity(%data@1)" in text
    assert "return %id, %data@2" in text


@pytest.mark.parametrize("name, printed", [
    ("plain_name0", "%plain_name0"),
    ("_x", "%_x"),
    ("stage1.conv-0", '%"stage1.conv-0"'),
    ("a:b/c", '%"a:b/c"'),
    ("with space", '%"with space"'),
    ("0starts_with_digit", '%"0starts_with_digit"'),
    ("", '%""'),
    ('q"uote\\back', '%"q\\"uote\\\\back"'),
    ("naïve", '%"naïve"'),
    ("graph", "%graph"),  # keywords are fine after the sigil
    ("var", "%var"),
])
def test_names_are_quoted_when_not_identifiers(name, printed):
    v = Node(None, name)
    g = Graph([v], [v.out])
    text = round_trip(g)
    assert text.splitlines()[1] == f"  {printed} = var"


def test_reserved_words_are_quoted_as_op_names_and_keys():
    v = Node(None, "x")
    n = Node("var", "n", {"graph": "1", "return": "2", "true": "3", "ok": "4"}, [v.out])
    m = Node("graph", "m", {}, [n.out])
    g = Graph([v, n, m], [m.out], {"null": None, "attributes": 1})
    text = round_trip(g)
    assert '%n = "var"(%x) {"graph" = "1", "return" = "2", "true" = "3", ok = "4"}' in text
    assert '%m = "graph"(%n)' in text
    assert 'attributes {"null" = null, "attributes" = 1}' in text
    for word in ("graph", "var", "return", "after", "attributes", "opaque", "inf", "nan"):
        assert word in RESERVED_WORDS


@pytest.mark.parametrize("value, literal", [
    ("(3, 3)", '"(3, 3)"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("C:\\path\\", '"C:\\\\path\\\\"'),
    ("two\nlines\r\n\ttab", '"two\\nlines\\r\\n\\ttab"'),
    ("nul\x00 bell\x07 del\x7f", '"nul\\u{0} bell\\u{7} del\\u{7f}"'),
    ("line sep\u2028 nbsp\xa0 rtl\u202e", '"line sep\\u{2028} nbsp\\u{a0} rtl\\u{202e}"'),
    ("emoji 😀 and 中文", '"emoji 😀 and 中文"'),
    ("lone \ud800 surrogate", '"lone \\u{d800} surrogate"'),
    ("// not a comment", '"// not a comment"'),
    ("", '""'),
])
def test_hidden_attr_values_are_escaped_and_read_back(value, literal):
    assert quote_string(value) == literal
    v = Node(None, "w", {"__init__": value, "__lr_mult__": '\\"'})
    g = Graph([v], [v.out])
    text = round_trip(g)
    assert f"{{__init__ = {literal}, __lr_mult__ = " in text
    assert parse_graph(text).nodes[0].attrs["__init__"] == value


def test_hand_written_escapes():
    g = parse_graph('graph @m {\n  %x = var {a = "\\u{41}\\u{1F600}\\t\\"\\\\"}\n  return %x\n}')
    assert g.nodes[0].attrs["a"] == 'A\U0001F600\t"\\'


def test_graph_attribute_values_keep_their_types():
    attrs = {
        "mxnet_version": ["int", 10901],
        "ints": [0, -7, 10 ** 30],
        "floats": [1.5, -0.0, 1e-05, 1e300, float("inf"), -float("inf")],
        "nan": float("nan"),
        "flags": (True, False, None),
        "tuples": ((), (1,), ((2, "x"),)),
        "dict": {"k": {"nested": [1, {"deep": "v"}]}, "": "empty key", "q\"": "\n"},
        "empty": [[], {}, ""],
    }
    v = Node(None, "x")
    g = Graph([v], [v.out], attrs)
    text = round_trip(g)
    assert '"floats" = ' not in text and "floats = [1.5, -0.0, 1e-05, 1e+300, inf, -inf]" in text
    assert '"nan" = nan' in text
    assert "tuples = ((), (1,), ((2, \"x\"),))" in text
    back = parse_graph(text).attrs
    assert back["ints"][2] == 10 ** 30 and type(back["floats"][0]) is float
    assert math.copysign(1.0, back["floats"][1]) == -1.0


def test_graph_attribute_without_textual_form_prints_opaque_and_is_rejected():
    v = Node(None, "x")
    g = Graph([v], [v.out], {"obj": {1: 2}, "ok": 1})
    text = print_graph(g)
    assert 'obj = opaque("{1: 2}")' in text
    with pytest.raises(ParseError) as info:
        parse_graph(text)
    assert (info.value.line, info.value.column) == (1, 31)
    assert "cannot be read back" in str(info.value)


def test_non_string_node_attribute_values_print_as_strings():
    v = Node(None, "x", {"num": 3})  # type: ignore[dict-item]  # a sloppy pass
    text = print_graph(Graph([v], [v.out]))
    assert '%x = var {num = "3"}' in text
    assert parse_graph(text).nodes[0].attrs == {"num": "3"}


def test_variables_with_inputs_subgraphs_and_deps_are_printable():
    a = Node(None, "a")
    inner_v = Node(None, "i")
    weird = Node(None, "weird", {"k": "v"}, [a.out], [Graph([inner_v], [inner_v.out])], [a])
    g = Graph([a, weird], [weird.out])
    text = round_trip(g)
    assert '%weird = var(%a) {k = "v"} after(%a) {' in text


def test_empty_graph_and_zero_input_op():
    assert round_trip(Graph()) == "graph @main {\n  return\n}"
    z = Node("_zeros", "z", {"shape": "(2, 3)"})
    assert "%z = _zeros() {shape = \"(2, 3)\"}" in round_trip(Graph([z], [z.out]))


def test_nested_graph_with_attributes_and_several_subgraphs():
    def leaf(name):
        v = Node(None, name)
        return Graph([v], [v.out], {"level": name})
    x = Node(None, "x")
    cond = Node("_cond", "cond", {"num_outputs": "1"}, [x.out],
                [leaf("then"), leaf("else"), Graph()])
    g = Graph([x, cond], [cond.out])
    text = round_trip(g)
    assert "    graph @sg_1 attributes {level = \"else\"} {\n      %else = var" in text
    assert "    graph @sg_2 {\n      return\n    }" in text


def test_subgraph_names_are_cosmetic_and_scopes_are_separate():
    text = """graph @main {
  %x = var
  %y = f(%x) {
    graph @whatever {
      %x = var
      return %x
    }
    graph @"another one" {
      %y = var
      return %y
    }
  }
  return %y
}"""
    g = parse_graph(text)
    y = g.node("y")
    assert y.subgraphs[0].nodes[0] is not g.node("x")
    assert y.subgraphs[1].node("y") is not y
    assert "graph @sg_0 {" in print_graph(g) and "graph @sg_1 {" in print_graph(g)


def test_dangling_inputs_still_print():
    outside = Node(None, "outside")
    n = Node("relu", "n", {}, [outside.out])
    text = print_graph(Graph([n], [n.out]))
    assert "%n = relu(%outside)" in text
    with pytest.raises(ParseError, match="undefined value %outside"):
        parse_graph(text)


def test_annotate_appends_comments_that_the_parser_ignores():
    g = example_graph()

    def note(node):
        return "" if node.op is None else f"op {node.op}\nsecond line"

    text = print_graph(g, annotate=note)
    lines = text.splitlines()
    assert lines[1] == "  %data = var"
    assert lines[4].endswith('pad = "(1, 1)"}  // op Convolution second line')
    assert lines[7].endswith("after(%conv0) {  // op _CachedOp second line")
    assert "%r = relu(%x)  // op relu second line" in text
    assert_same_graph(g, parse_graph(text))
    assert print_graph(parse_graph(text)) == EXAMPLE_TEXT


def test_trailing_newline_and_crlf_are_accepted():
    assert_same_graph(example_graph(), parse_graph(EXAMPLE_TEXT + "\n"))
    assert_same_graph(example_graph(), parse_graph(EXAMPLE_TEXT.replace("\n", "\r\n")))


# ---------------------------------------------------------------------------------------
# errors: exact positions and messages
# ---------------------------------------------------------------------------------------
def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_graph(text, source="model.ir")
    return info.value


@pytest.mark.parametrize("text, line, column, message", [
    # syntax
    ("graph @m {\n  %b = f(%a\n  return %b\n}", 3, 3, "unexpected 'return'; expected ')' or ','"),
    ("graph @m {\n  %b = var\n  return %b", 3, 12, "unexpected end of input; expected ',' or '}'"),
    ("", 1, 1, "unexpected end of input; expected 'graph'"),
    ("graph m {}", 1, 7, "unexpected name m; expected a graph name such as @main"),
    ("graph @m {\n  return\n} extra", 3, 3, "unexpected name extra; expected end of input"),
    ("graph @m {\n  %a = $\n  return\n}", 2, 8,
     "unexpected character '$'; expected 'var', a name or a quoted string"),
    ("graph @m {\n  %a = var {k = \"open\n  return\n}", 2, 17, "unterminated string"),
    ("graph @m {\n  %a = var {k = 3}\n  return\n}", 2, 17,
     "attribute values are quoted strings; expected a quoted string"),
    ("graph @m {\n  %a = var {k}\n  return\n}", 2, 13,
     "unexpected name k; expected 'graph' or an attribute such as 'key = \"value\"'"),
    ("graph @m {\n  %a = var {}\n  return\n}", 2, 13,
     "unexpected '}'; expected 'graph' or an attribute"),
    ("graph @m {\n  %a = relu\n  return\n}", 3, 3, "unexpected 'return'; expected '('"),
    ("graph @m {\n  %a var\n  return\n}", 2, 3,
     "unexpected value %a; expected 'return' or a definition such as '%x = ...'"),
    ("graph @m {\n  %a = var\n  return %a#\n}", 3, 12, "unexpected character '#'"),
    ("graph @m attributes {} {\n  return\n}", 1, 22, "unexpected '}'; expected"),
    ("graph @m attributes {v = [1, 2} {\n  return\n}", 1, 31,
     "unexpected '}'; expected ',' or ']'"),
    # escapes, located at the backslash
    ("graph @m {\n  %a = var {k = \"ab\\qc\"}\n  return\n}", 2, 20,
     "invalid escape sequence '\\q'"),
    ('graph @m {\n  %"a\\xb" = var\n  return\n}', 2, 6, "invalid escape sequence '\\x'"),
    ('graph @m {\n  %a = var {"k\\u{110000}" = "v"}\n  return\n}', 2, 15,
     "invalid escape sequence '\\u{110000}'"),
    ('graph @m attributes {s = "\\z"} {\n  return\n}', 1, 27, "invalid escape sequence '\\z'"),
    # names
    ("graph @m {\n  %a = var\n  %b = var\n  %a = f(%b)\n  return %a\n}", 4, 3,
     "duplicate definition of %a (first defined at line 2, column 3)"),
    ("graph @m {\n  %b = f(%a)\n  %a = var\n  return %b\n}", 2, 10,
     "%a is used before its definition at line 3, column 3"),
    ("graph @m {\n  %a = var\n  %b = f(%a, %zz#1)\n  return %b\n}", 3, 14, "undefined value %zz"),
    ("graph @m {\n  %b = f(%b)\n  return %b\n}", 2, 10, "%b is used in its own definition"),
    ("graph @m {\n  %a = var\n  return %a, %nope\n}", 3, 14, "undefined value %nope"),
    ('graph @m {\n  %a = var after(%"c d")\n  %"c d" = var\n  return %a\n}', 2, 18,
     '%"c d" is used before its definition at line 3, column 3'),
    ("graph @m {\n  %a = var\n  %b = f() after(%a#1)\n  return %b\n}", 3, 18,
     "control dependency %a#1 must name a node"),
    ("graph @m {\n  %a#1 = var\n  return\n}", 2, 3,
     "the definition of %a cannot carry an output index (#) or version (@)"),
    ("graph @m {\n  %a@2 = var\n  return\n}", 2, 3, "the definition of %a cannot carry"),
    ("graph @m {\n  %a = var {k = \"1\", j = \"2\", k = \"3\"}\n  return\n}", 2, 31,
     "duplicate attribute k"),
    ("graph @m attributes {a = 1, b = 2, \"a\" = 3} {\n  return\n}", 1, 36,
     "duplicate graph attribute a"),
    ('graph @m attributes {d = {"x": 1, "x": 2}} {\n  return\n}', 1, 35, 'duplicate key "x"'),
    # nested graphs have their own scope: an outer name is not visible inside
    ("graph @m {\n  %x = var\n  %s = f(%x) {\n    graph @g {\n      %y = g(%x)\n"
     "      return %y\n    }\n  }\n  return %s\n}", 5, 14, "undefined value %x"),
    ("graph @m {\n  %s = f() {\n    graph @g {\n      %y = var\n      %y = var\n"
     "      return %y\n    }\n  }\n  return %s\n}", 5, 7, "duplicate definition of %y"),
])
def test_errors_are_located(text, line, column, message):
    err = parse_error(text)
    assert (err.line, err.column) == (line, column), str(err)
    assert err.source == "model.ir"
    assert message in err.bare_message, str(err)
    assert str(err).startswith(f"model.ir:{line}:{column}: ")


def test_parse_error_is_an_mxc_error_with_the_default_source():
    with pytest.raises(ParseError) as info:
        parse_graph("graph")
    assert isinstance(info.value, FrontendError) and isinstance(info.value, MxcError)
    assert str(info.value).startswith("<ir>:1:6: unexpected end of input")


# ---------------------------------------------------------------------------------------
# the docs example runs and prints what the docs say
# ---------------------------------------------------------------------------------------
def test_docs_example_runs_and_output_matches():
    doc = (REPO / "docs" / "textual-ir.md").read_text()
    m = re.search(r"```python\n(.*?)```\s*\n.*?```text\n(.*?)```", doc, re.S)
    assert m, "docs/textual-ir.md needs a ```python example followed by its ```text output"
    code, expected = m.group(1), m.group(2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/textual-ir.md", "exec"), {"__name__": "__docs__"})
    assert out.getvalue() == expected


# ---------------------------------------------------------------------------------------
# property tests: random graphs round-trip exactly
# ---------------------------------------------------------------------------------------
_ODD = '"\\\n\r\t %#@{}()[]=,.-:/;\u2028\xa0\x00\x7f\ud800é中😀ab0_'
text_st = st.one_of(st.text(max_size=10),                 # arbitrary Unicode (no surrogates)
                    st.text(alphabet=_ODD, max_size=10))  # the characters that need care
name_st = st.one_of(
    st.text(alphabet="abcXYZ_019", min_size=1, max_size=8).map(
        lambda s: "n" + s if s[0].isdigit() else s),      # plain identifiers
    st.sampled_from(sorted(RESERVED_WORDS)),
    text_st,
)
op_st = st.one_of(
    st.sampled_from(["Convolution", "relu", "_CachedOp", "SliceChannel", "_contrib_x",
                     "elemwise_add", "var", "graph", "null", "return", "inf"]),
    name_st,
)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10 ** 20, max_value=10 ** 20),
    st.floats(allow_nan=True, allow_infinity=True), text_st,
)
json_st = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(text_st, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def graphs(draw, depth: int = 0) -> Graph:
    names = draw(st.lists(name_st, min_size=0, max_size=8 if depth == 0 else 4, unique=True))
    nodes: list[Node] = []
    for name in names:
        if not nodes or draw(st.integers(0, 3)) == 0:
            op = None
        else:
            op = draw(op_st)
        attrs = draw(st.dictionaries(name_st, text_st, max_size=3))
        inputs = []
        if nodes and (op is not None or draw(st.integers(0, 9)) == 0):
            for _ in range(draw(st.integers(0, 3))):
                src = draw(st.sampled_from(nodes))
                inputs.append(Entry(src, draw(st.sampled_from([0, 0, 1, 2, 17])),
                                    draw(st.sampled_from([0, 0, 0, 1, 3]))))
        deps = draw(st.lists(st.sampled_from(nodes), max_size=2)) if nodes else []
        subgraphs = []
        if depth < 2 and draw(st.integers(0, 5)) == 0:
            subgraphs = draw(st.lists(graphs(depth + 1), min_size=1, max_size=2))
        nodes.append(Node(op, name, attrs, inputs, subgraphs, deps))
    outputs = []
    if nodes:
        for _ in range(draw(st.integers(0, 3))):
            outputs.append(Entry(draw(st.sampled_from(nodes)), draw(st.integers(0, 3)),
                                 draw(st.sampled_from([0, 0, 1]))))
    attrs = draw(st.dictionaries(name_st, json_st, max_size=3))
    return Graph(nodes, outputs, attrs)


PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(graphs(), name_st)
def test_random_graphs_round_trip(graph, gname):
    text = print_graph(graph, name=gname)
    parsed = parse_graph(text)
    assert_same_graph(graph, parsed)
    assert print_graph(parsed, name=gname) == text


@settings(PROPERTY, max_examples=80)
@given(graphs(), st.data())
def test_corrupted_text_fails_only_with_located_parse_errors(graph, data):
    text = print_graph(graph)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 6)))
    junk = data.draw(st.text(st.sampled_from('%#@"\\{}()[],=:/ \nx0-'), max_size=3))
    broken = text[:start] + junk + text[end:]
    assume(broken != text)
    try:
        parse_graph(broken)
    except ParseError as err:
        lines = broken.split("\n")
        assert err.line is not None and 1 <= err.line <= len(lines)
        assert err.column is not None and 1 <= err.column <= len(lines[err.line - 1]) + 1


# ---------------------------------------------------------------------------------------
# scale
# ---------------------------------------------------------------------------------------
def chain(n: int) -> Graph:
    nodes = [Node(None, "data")]
    for i in range(n - 1):
        nodes.append(Node("Activation", f"relu{i}", {"act_type": "relu"}, [nodes[-1].out]))
    return Graph(nodes, [nodes[-1].out], {"mxnet_version": ["int", 10901]})


def test_10k_node_chain_round_trips():
    # scale without recursion limits; speed is measured in bench/bench_text_ir.py
    g = chain(10_000)
    parsed = parse_graph(print_graph(g))
    assert len(parsed.nodes) == 10_000 and parsed.nodes[-1].inputs[0].node is parsed.nodes[-2]
    assert parsed.nodes[5].users == [parsed.nodes[6]]


def test_deep_nesting_and_wide_nodes():
    g = Graph()
    for level in range(40):
        x = Node(None, f"x{level}")
        node = Node("_CachedOp", "sg", {}, [x.out], [g] if level else [])
        g = Graph([x, node], [node.out])
    round_trip(g)
    v = Node(None, "v")
    wide = Node("add_n", "sum", {f"k{i}": str(i) for i in range(500)}, [v.out] * 2000)
    text = round_trip(Graph([v, wide], [wide.out]))
    assert parse_graph(text).nodes[0].num_uses() == 2000


@pytest.mark.parametrize("where", ["attribute", "index", "version", "duplicate"])
def test_integers_longer_than_the_cap_are_a_parse_error_at_the_number(where):
    """Python refuses int() of more than 4,300 digits with a bare ValueError."""
    from mxc.compiler.ir.text import MAX_INT_DIGITS
    from mxc.errors import ParseError
    big = "7" * 5000
    ref = {"index": f"%x#{big}", "version": f"%x@{big}", "duplicate": f"%x~{big}"}.get(where,
                                                                                       "%x")
    attr = f'mxnet_version = ["int", {big}]' if where == "attribute" else \
        'mxnet_version = ["int", 10901]'
    text = (f"graph @main attributes {{{attr}}} {{\n  %x = var\n"
            f"  %y = Activation({ref}) {{act_type = \"relu\"}}\n  return %y\n}}\n")
    with pytest.raises(ParseError, match=f"with 5000 digits; at most {MAX_INT_DIGITS}") as info:
        parse_graph(text)
    assert info.value.line == (1 if where == "attribute" else 3)
    ok = text.replace(big, "7" * MAX_INT_DIGITS) if where == "attribute" else None
    if ok is not None:                    # at the cap it parses (the value is kept)
        assert parse_graph(ok).attrs["mxnet_version"] == ["int", int("7" * MAX_INT_DIGITS)]
