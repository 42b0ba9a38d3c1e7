"""Declarative patterns (builders and text) and the greedy rewrite driver."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from mxc.compiler.ir import Entry
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.passes import (PassContext, RewritePattern, is_op, is_param, is_var,
                                 parse_pattern, rewrite, wildcard)
from mxc.errors import ParseError, PassError

from _pass_test_utils import graph_of

CONV_BN = """  %x = var
  %w = var
  %conv = Convolution(%x, %w) {kernel = "(3, 3)", num_filter = "4", no_bias = "True"}
  %g = var
  %b = var
  %m = var
  %v = var
  %bn = BatchNorm(%conv, %g, %b, %m, %v) {fix_gamma = "False"}
  %split = SliceChannel(%bn) {num_outputs = "2"}
  %sum = elemwise_add(%split, %split#1)
  %twice = elemwise_mul(%sum, %sum)
  return %twice"""


@pytest.fixture
def g():
    return graph_of(CONV_BN)


def names(matches):
    return [m.root.node.name for m in matches]


# -- builders ------------------------------------------------------------------------------
def test_op_patterns_with_inputs(g):
    conv = is_op("Convolution")(wildcard(), is_var())
    bn = is_op("BatchNorm")(conv, is_var(), is_var(), is_var(), is_var())
    m = bn.match(g.node("bn"))
    assert m is not None and m.root == g.node("bn").out
    assert m[conv] == g.node("conv").out and m.node(conv).name == "conv"
    assert [n.name for n in m.nodes] == ["bn", "conv"] and bn.size() == 2
    assert {e.node.name for e in m.values} == {"x", "w", "g", "b", "m", "v"}
    # negative: wrong arity, wrong op, wrong input kind
    assert is_op("Convolution")(wildcard()).match(g.node("conv")) is None
    assert is_op("Convolution")(wildcard(), wildcard(), wildcard()).match(g.node("conv")) is None
    assert is_op("Convolution")(is_var(), is_op("exp")).match(g.node("conv")) is None
    assert is_op("Deconvolution").match(g.node("conv")) is None


def test_ellipsis_allows_more_inputs_and_bare_ops_any(g):
    assert is_op("BatchNorm")(is_op("Convolution"), ...).match(g.node("bn")) is not None
    assert is_op("BatchNorm").match(g.node("bn")) is not None
    assert is_op().match(g.node("conv")) is not None  # any operator
    assert is_op().match(g.node("x")) is None


def test_op_sets_and_aliases():
    graph = graph_of("""  %x = var
  %a = identity(%x)
  %b = stop_gradient(%a)
  return %b""")
    assert names(is_op("_copy", "BlockGrad").find(graph)) == ["a", "b"]
    assert names(is_op(["identity"]).find(graph)) == ["a"]  # aliases are the same op


def test_variables_and_params(g):
    assert is_var().match(g.node("w")) is not None
    assert is_var("w").match(g.node("w")) is not None
    assert is_var("x").match(g.node("w")) is None
    assert is_param().match(g.node("conv")) is None
    assert names(is_var().find(g)) == ["x", "w", "g", "b", "m", "v"]


def test_attribute_predicates(g):
    conv = g.node("conv")
    assert is_op("Convolution").has_attr(no_bias=True).match(conv)
    assert is_op("Convolution").has_attr(no_bias="True", kernel=(3, 3)).match(conv)
    assert is_op("Convolution").has_attr(kernel="(3,3)").match(conv)  # parsed, then compared
    assert is_op("Convolution").has_attr(num_group=1, stride=()).match(conv)
    assert not is_op("Convolution").has_attr(no_bias=False).match(conv)
    assert not is_op("Convolution").has_attr(kernel=[1, 1]).match(conv)
    assert is_op("Convolution").has_attr(lambda p: p.num_filter == 4).match(conv)
    assert is_op("Convolution").has_attr(num_filter=lambda n: n > 3).match(conv)
    assert not is_op("Convolution").has_attr(lambda p: p.num_filter == 5).match(conv)
    assert is_op("BatchNorm").has_attr(fix_gamma=False, eps=1e-3).match(g.node("bn"))
    assert is_op().where(lambda n: n.name.startswith("tw")).find(g)[0].root.node.name == "twice"
    assert not wildcard().has_attr(no_bias=True).match(g.node("x"))


def test_use_count_constraints(g):
    # conv feeds only the BatchNorm; sum feeds elemwise_mul twice
    assert is_op("Convolution").one_use().match(g.node("conv"), g)
    assert not is_op("Convolution").multi_use().match(g.node("conv"), g)
    assert is_op("elemwise_add").multi_use().match(g.node("sum"), g)
    assert not is_op("elemwise_add").one_use().match(g.node("sum"), g)
    # graph outputs count as uses
    assert is_op("elemwise_mul").one_use().match(g.node("twice"), g)
    assert not is_op("elemwise_mul").one_use().match(g.node("twice"))
    bn_of_single_use_conv = is_op("BatchNorm")(is_op("Convolution").one_use(), ...)
    assert bn_of_single_use_conv.find(g)
    g.outputs.append(g.node("conv").out)  # now conv has two uses
    assert not bn_of_single_use_conv.find(g)


def test_multi_output_entries(g):
    split = is_op("SliceChannel")(wildcard())
    assert is_op("elemwise_add")(split[0], split[1]).match(g.node("sum"))
    assert not is_op("elemwise_add")(split[1], split[0]).match(g.node("sum"))
    assert not is_op("elemwise_add")(split, split).match(g.node("sum"))  # split is #0 twice
    m = is_op("elemwise_add")(split[0], split[1]).match(g.node("sum"))
    assert m[split[1]] == Entry(g.node("split"), 1)
    any_output = is_op("SliceChannel")[1]
    assert any_output.match(Entry(g.node("split"), 1)) and not any_output.match(g.node("split"))
    assert any_output.match_node(g.node("split")).root.index == 1


def test_same_pattern_object_means_same_value(g):
    x = wildcard()
    assert is_op("elemwise_mul")(x, x).match(g.node("twice"))
    assert not is_op("elemwise_add")(x, x).match(g.node("sum"))  # split#0 vs split#1
    assert is_op("elemwise_add")(wildcard(), wildcard()).match(g.node("sum"))


def test_combinators(g):
    conv_or_fc = is_op("Convolution") | is_op("FullyConnected")
    assert conv_or_fc.match(g.node("conv"))
    assert not conv_or_fc.match(g.node("bn"))
    both = is_op("Convolution") & wildcard().where(lambda n: n.name == "conv")
    assert both.match(g.node("conv"))
    assert not (is_op("Convolution") & is_op("BatchNorm")).match(g.node("conv"))
    assert (~is_var()).match(g.node("conv")) and not (~is_var()).match(g.node("x"))
    # alternatives backtrack their bindings
    x = wildcard()
    p = is_op("elemwise_mul")(is_op("exp")(x) | x, x)
    assert p.match(g.node("twice"))


def test_labels(g):
    p = is_op("BatchNorm")(is_op("Convolution").named("conv"), ...).named("bn")
    m = p.match(g.node("bn"))
    assert m["conv"].node.name == "conv" and m.node("bn").name == "bn"
    assert set(m.labels) == {"bn", "conv"} and "conv" in m
    with pytest.raises(KeyError, match="no sub-pattern named 'nope'"):
        m["nope"]
    assert "named('conv')" in repr(p)


# -- textual patterns ----------------------------------------------------------------------
def test_text_pattern_from_the_issue(g):
    p = parse_pattern("BatchNorm(Convolution(%x, %w), %g, %b, %m, %v)")
    (m,) = p.find(g)
    assert {k: e.node.name for k, e in m.labels.items()} == \
        {"x": "x", "w": "w", "g": "g", "b": "b", "m": "m", "v": "v"}
    assert parse_pattern("BatchNorm(Convolution(%x, %w, %bias), ...)").find(g) == []


def test_text_pattern_features(g):
    p = parse_pattern('%bn:BatchNorm(%c:(Convolution|FullyConnected)(_, %w:var, ...)'
                      '{no_bias = "True"}, ...)')
    (m,) = p.find(g)
    assert m.node("c").name == "conv" and m.node("w").name == "w"
    assert parse_pattern("elemwise_add(SliceChannel(%x)#0, SliceChannel(%x)#1)").find(g)
    assert not parse_pattern("elemwise_add(SliceChannel(%x)#1, _)").find(g)
    assert parse_pattern("elemwise_mul(%s, %s)").find(g)
    assert not parse_pattern("elemwise_add(%s, %s)").find(g)
    assert parse_pattern("elemwise_mul(%s:elemwise_add(...), %s)").find(g)
    assert parse_pattern("Convolution(var, var){kernel = \"(3, 3)\", num_group = 1}").find(g)
    assert not parse_pattern("Convolution(var, var){num_group = 2}").find(g)
    assert names(parse_pattern("exp(_) | SliceChannel(...)").find(g)) == ["split"]
    assert parse_pattern("Convolution()").find(g) == []  # exactly zero inputs


@pytest.mark.parametrize("text, column, message", [
    ("BatchNorm(%x", 13, "unexpected end of the pattern"),
    ("Conv(%x, %x:var)", 10, "%x is defined twice"),
    ("(A|)(_)", 4, "unexpected ')'; expected an operator name"),
    ("exp(%1)", 5, "unexpected character '%'"),
])
def test_text_pattern_errors(text, column, message):
    with pytest.raises(ParseError) as info:
        parse_pattern(text)
    assert info.value.column == column and message in str(info.value)


# -- rewriting -----------------------------------------------------------------------------
def test_rewrite_to_a_fixpoint():
    graph = graph_of("""  %x = var
  %n1 = negative(%x)
  %n2 = negative(%n1)
  %n3 = negative(%n2)
  %n4 = negative(%n3)
  %e = exp(%n4)
  return %e""")
    count = rewrite(graph, parse_pattern("negative(negative(%x))"), lambda m: m["x"])
    assert count == 2
    expected = graph_of("""  %x = var
  %e = exp(%x)
  return %e""")
    assert graph_diff(graph, expected) is None
    assert [n.name for n in graph.nodes] == ["x", "e"]  # dead nodes were erased


def test_declining_and_benefit_order():
    text = """  %x = var
  %a = exp(%x)
  %b = log(%a)
  return %b"""
    tried = []

    def decline(m):
        tried.append("decline")
        return None

    graph = graph_of(text)
    assert rewrite(graph, is_op("log"), decline) == 0 and tried == ["decline"]
    log_of_exp = RewritePattern(parse_pattern("log(exp(%x))"), lambda m: m["x"], name="big")
    log_any = RewritePattern(is_op("log"), lambda m: m.ctx.add_node("negative", [m.root]),
                             name="small")
    assert log_of_exp.effective_benefit == 2 and log_any.effective_benefit == 1
    assert rewrite(graph, [log_any, log_of_exp]) == 1  # the bigger pattern won
    assert [n.name for n in graph.topo_order()] == ["x"]


def test_replacements_built_on_the_root_and_multi_output():
    graph = graph_of("""  %x = var
  %r = relu(%x)
  %s = SliceChannel(%r) {num_outputs = "2"}
  %o = elemwise_add(%s, %s#1)
  return %o""")

    def clip_relu(m):  # relu(x) -> clip(relu(x), 0, 6): the new node reads the root
        return m.ctx.add_node("clip", [m.root], {"a_min": 0, "a_max": 6})

    relu = is_op("relu").where(lambda n: n.users and n.users[0].op != "clip")
    assert rewrite(graph, relu, clip_relu) == 1
    assert [n.op for n in graph.topo_order()] == [None, "relu", "clip", "SliceChannel",
                                                  "elemwise_add"]

    def swap_halves(m):  # one replacement per output of the root node
        s = m.root.node
        if s.meta.get("swapped"):
            return None
        t = m.ctx.add_node("SliceChannel", [s.inputs[0]], {"num_outputs": 2})
        t.meta["swapped"] = True
        return [t[1], t[0]]

    assert rewrite(graph, is_op("SliceChannel"), swap_halves) == 1
    o = graph.node("o")
    assert [e.index for e in o.inputs] == [1, 0]


def test_a_rewrite_that_keeps_matching_is_stopped():
    graph = graph_of("""  %x = var
  %e = exp(%x)
  return %e""")
    grow = lambda m: m.ctx.add_node("exp", [m.root.node.inputs[0]])  # noqa: E731
    with pytest.raises(PassError, match="still changing the graph after 5 rounds"):
        rewrite(graph, is_op("exp"), grow, max_rounds=5)


def test_rewrite_allocates_params_through_the_context():
    graph = graph_of("""  %x = var
  %m = _mul_scalar(%x) {scalar = "3"}
  return %m""")
    ctx = PassContext(graph)

    def as_broadcast_mul(m):
        scale = m.ctx.alloc_arg("scale", value=np.full((1,), m.root.node.params.scalar,
                                                      np.float32))
        return m.ctx.add_node("broadcast_mul", [m.root.node.inputs[0], scale])

    assert rewrite(ctx, is_op("_mul_scalar"), as_broadcast_mul) == 1
    assert ctx.params.allocated == {"scale": "arg"}
    out = mxc.backends.reference.run_graph(graph, {"x": np.ones(2, np.float32),
                                                   "scale": ctx.param("scale")})
    np.testing.assert_array_equal(out[0], [3, 3])


def test_rewrite_pattern_subclass():
    class DropCopies(RewritePattern):
        pattern = is_op("_copy")

        def rewrite(self, match):
            return match.root.node.inputs[0]

    graph = graph_of("""  %x = var
  %c = _copy(%x)
  %e = exp(%c)
  return %e""")
    assert rewrite(graph, DropCopies()) == 1
    assert [n.name for n in graph.topo_order()] == ["x", "e"]
    with pytest.raises(PassError, match="a bare pattern needs a callback"):
        rewrite(graph, is_op("exp"))
