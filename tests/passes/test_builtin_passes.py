"""The built-in passes on small hand-built graphs with hand-computed expectations."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.passes import run_graph as run_pipeline

from _pass_test_utils import assert_close_outputs, graph_of, op_count, outputs, random_params

F32 = np.float32


def check(before, pipeline, args=None, aux=None, feeds=None, **kwargs):
    """Run *pipeline* on graph *before*; outputs must not change.  Returns the result."""
    args, aux, feeds = args or {}, aux or {}, feeds or {}
    result = run_pipeline(before, pipeline, args, aux, **kwargs)
    result.graph.verify()
    assert_close_outputs(outputs(before, args, aux, feeds),
                         outputs(result.graph, result.args, result.aux, feeds))
    return result


# -- dce -------------------------------------------------------------------------------------
def test_dce_removes_dead_nodes_and_their_params():
    g = graph_of("""  %x = var
  %w = var
  %dead = broadcast_mul(%x, %w)
  %e = exp(%x)
  return %e""")
    r = check(g, "dce", {"w": np.ones(2, F32)}, feeds={"x": np.ones(2, F32)})
    assert [n.name for n in r.graph.nodes] == ["x", "e"]
    assert r.args == {} and r.removed == ["w"]
    assert r.statistics == [("dce", {"nodes removed": 2})]


# -- remove-dropout --------------------------------------------------------------------------
def test_remove_dropout():
    g = graph_of("""  %x = var
  %d1 = Dropout(%x) {p = "0.5"}
  %e = exp(%d1)
  %d2 = Dropout(%e) {p = "0.2", mode = "always"}
  %d3 = Dropout(%d2) {p = "0.1"}
  return %d3, %d3#1""")
    r = run_pipeline(g, "remove-dropout")  # mode="always" is random: no numeric check
    expected = graph_of("""  %x = var
  %e = exp(%x)
  %d2 = Dropout(%e) {p = "0.2", mode = "always"}
  %d3 = Dropout(%d2) {p = "0.1"}
  return %d3, %d3#1""")
    assert graph_diff(r.graph, expected) is None  # d3's mask is an output: kept
    assert r.statistics[0][1] == {"dropouts removed": 1, "dropouts kept": 2}
    r = run_pipeline(g, "remove-dropout{always=true}")
    assert op_count(r.graph, "Dropout") == 1


def test_remove_dropout_keeps_outputs_numerically():
    x = mxc.sym.var("data")
    y = mxc.sym.FullyConnected(mxc.sym.Dropout(x, p=0.4), num_hidden=4, name="fc")
    y = mxc.sym.Dropout(mxc.sym.relu(y), p=0.5)
    args, aux = random_params(y, data=(2, 5))
    r = check(y.graph, "remove-dropout", args, aux, {"data": np.ones((2, 5), F32)})
    assert op_count(r.graph, "Dropout") == 0


# -- simplify --------------------------------------------------------------------------------
def test_simplify_identity_ops():
    g = graph_of("""  %x = var {__shape__ = "(2, 3)"}
  %c = _copy(%x)
  %b = BlockGrad(%c)
  %s = stop_gradient(%b)
  %r = Reshape(%s) {shape = "(2, 3)"}
  %r2 = Reshape(%r) {shape = "(3, 2)"}
  %f = Flatten(%r2)
  %m = _mul_scalar(%f) {scalar = "1"}
  %p = _plus_scalar(%m) {scalar = "0"}
  %m2 = _mul_scalar(%p) {scalar = "2"}
  %k = Cast(%m2) {dtype = "float32"}
  %t = transpose(%k) {axes = "(0, 1)"}
  %t2 = transpose(%t)
  %sw = SwapAxis(%t2) {dim1 = "1", dim2 = "1"}
  %e = exp(%sw)
  return %e""")
    x = np.arange(6, dtype=F32).reshape(2, 3)
    r = check(g, "simplify", feeds={"x": x})
    expected = graph_of("""  %x = var {__shape__ = "(2, 3)"}
  %r2 = Reshape(%x) {shape = "(3, 2)"}
  %m2 = _mul_scalar(%r2) {scalar = "2"}
  %t2 = transpose(%m2)
  %e = exp(%t2)
  return %e""")
    assert graph_diff(r.graph, expected) is None, graph_diff(r.graph, expected)


def test_simplify_needs_shapes_for_reshapes_and_keeps_named_outputs():
    g = graph_of("""  %x = var
  %r = Reshape(%x) {shape = "(2, 3)"}
  %c = _copy(%x)
  return %r, %c""")
    r = run_pipeline(g, "simplify")  # no shapes known: the Reshape may change the shape
    assert [n.name for n in r.graph.topo_order()] == ["x", "r", "c"]  # c would become %x
    r = run_pipeline(g, "simplify", shapes={"x": (2, 3)})
    assert [n.name for n in r.graph.topo_order()] == ["x", "r", "c"]
    r = run_pipeline(g, "simplify", {"x": np.zeros((2, 3), F32)})  # shape from the array
    assert [n.name for n in r.graph.topo_order()] == ["x", "r", "c"]


def test_simplify_reshape_with_known_shape():
    g = graph_of("""  %x = var
  %r = Reshape(%x) {shape = "(-1, 3)"}
  %e = exp(%r)
  return %e""")
    assert [n.name for n in run_pipeline(g, "simplify", shapes={"x": (4, 3)}).graph.nodes] \
        == ["x", "e"]
    assert len(run_pipeline(g, "simplify", shapes={"x": (3, 4)}).graph.nodes) == 3


# -- fold-constants --------------------------------------------------------------------------
def test_fold_constants_hand_computed():
    g = graph_of("""  %x = var
  %w = var
  %b = var
  %w2 = _mul_scalar(%w) {scalar = "2"}
  %wb = elemwise_add(%w2, %b)
  %y = elemwise_add(%x, %wb)
  %e = exp(%x)
  %z = elemwise_mul(%y, %e)
  return %z""")
    args = {"w": np.array([1, 2], F32), "b": np.array([10, 20], F32)}
    r = check(g, "fold-constants", args, feeds={"x": np.array([0.5, -1], F32)})
    assert [n.name for n in r.graph.topo_order()] == ["x", "wb_folded", "y", "e", "z"]
    np.testing.assert_array_equal(r.args["wb_folded"], [12, 24])
    assert sorted(r.removed) == ["b", "w"] and r.allocated == {"wb_folded": "arg"}


def test_fold_constants_never_folds_data_or_bare_generators():
    g = graph_of("""  %x = var
  %w = var
  %o = _ones() {shape = "(2,)"}
  %wo = elemwise_add(%w, %o)
  %xo = elemwise_add(%x, %o)
  %y = elemwise_mul(%xo, %wo)
  return %y""")
    args = {"w": np.array([3, 4], F32)}
    feeds = {"x": np.array([1, 2], F32)}
    r = check(g, "fold-constants", args, feeds=feeds)
    # w + ones folded; x is data, and the bare _ones read by xo stays an op
    assert [n.name for n in r.graph.topo_order()] == ["x", "o", "xo", "wo_folded", "y"]
    np.testing.assert_array_equal(r.args["wo_folded"], [4, 5])
    # an array for a declared data input does not make it a constant ...
    r = check(g, "fold-constants", {**args, **feeds}, shapes={"x": (2,)})
    assert "x" in [n.name for n in r.graph.topo_order()]
    # ... and keep= protects a variable by name
    r = check(g, "fold-constants{keep=w}", args, feeds=feeds)
    assert r.allocated == {}
    r = check(g, "fold-constants{max_elements=1}", args, feeds=feeds)
    assert r.allocated == {} and r.statistics[0][1] == {"skipped (larger than max_elements)": 1}


def test_fold_constants_without_values_does_nothing():
    g = graph_of("""  %w = var
  %e = exp(%w)
  %x = var
  %y = broadcast_add(%x, %e)
  return %y""")
    assert graph_diff(run_pipeline(g, "fold-constants").graph, g) is None


# -- fold-batchnorm --------------------------------------------------------------------------
CONV_BN = """  %data = var
  %w = var
  %conv = Convolution(%data, %w) {kernel = "(1, 1)", num_filter = "2", no_bias = "True"}
  %g = var
  %be = var
  %mm = var
  %mv = var
  %bn = BatchNorm(%conv, %g, %be, %mm, %mv) {eps = "1", fix_gamma = "False"}
  %r = relu(%bn)
  return %r"""


def test_fold_batchnorm_hand_computed():
    args = {"w": np.array([2, 3], F32).reshape(2, 1, 1, 1), "g": np.array([1, 2], F32),
            "be": np.array([0.5, -1], F32)}
    aux = {"mm": np.array([1, 0], F32), "mv": np.array([3, 0], F32)}
    feeds = {"data": np.arange(8, dtype=F32).reshape(1, 1, 2, 4)}
    r = check(graph_of(CONV_BN), "fold-batchnorm", args, aux, feeds)
    # scale = g / sqrt(var + eps) = [0.5, 2]: w' = [1, 6], b' = (0 - mean) * scale + beta
    np.testing.assert_allclose(r.args["w"].reshape(-1), [1, 6])
    np.testing.assert_allclose(r.args["conv_bias"], [0, -1])
    assert sorted(r.removed) == ["be", "g", "mm", "mv"] and r.aux == {}
    expected = graph_of("""  %data = var
  %w = var
  %conv_bias = var
  %conv = Convolution(%data, %w, %conv_bias) {kernel = "(1, 1)", num_filter = "2", no_bias = "False"}
  %r = relu(%conv)
  return %r""")
    assert graph_diff(r.graph, expected) is None, graph_diff(r.graph, expected)
    assert r.statistics[0][1]["folded into Convolution"] == 1


def test_fold_batchnorm_fix_gamma_and_existing_bias():
    text = CONV_BN.replace('no_bias = "True"', 'no_bias = "False"') \
        .replace("%conv = Convolution(%data, %w)", "%cb = var\n  %conv = Convolution(%data, %w, %cb)") \
        .replace('fix_gamma = "False"', 'fix_gamma = "True"')
    args = {"w": np.array([2, 3], F32).reshape(2, 1, 1, 1), "cb": np.array([1, 1], F32),
            "g": np.array([100, 100], F32), "be": np.array([0.5, -1], F32)}
    aux = {"mm": np.array([1, 0], F32), "mv": np.array([3, 0], F32)}
    r = check(graph_of(text), "fold-batchnorm", args, aux,
              {"data": np.ones((1, 1, 2, 2), F32)})
    # gamma ignored: scale = [0.5, 1]; b' = (cb - mean) * scale + beta = [0.5, 0]
    np.testing.assert_allclose(r.args["w"].reshape(-1), [1, 3])
    np.testing.assert_allclose(r.args["cb"], [0.5, 0])
    assert "g" not in r.args


@pytest.mark.parametrize("layer, shapes", [
    ("Convolution(%data, %w) {kernel = \"(3, 3)\", num_filter = \"6\", num_group = \"3\", "
     "no_bias = \"True\"}", {"data": (2, 3, 5, 5)}),
    ("Convolution(%data, %w, %b) {kernel = \"(3,)\", num_filter = \"4\", pad = \"(1,)\"}",
     {"data": (2, 3, 7)}),
    ("Convolution(%data, %w) {kernel = \"(1, 1)\", num_filter = \"4\", layout = \"NHWC\", "
     "no_bias = \"True\"}", {"data": (2, 5, 5, 3)}),
    ("Deconvolution(%data, %w) {kernel = \"(2, 2)\", num_filter = \"4\", num_group = \"2\", "
     "stride = \"(2, 2)\"}", {"data": (1, 4, 3, 3)}),
    ("FullyConnected(%data, %w, %b) {num_hidden = \"5\"}", {"data": (3, 2, 2)}),
    ("FullyConnected(%data, %w) {num_hidden = \"5\", flatten = \"False\", no_bias = \"True\"}",
     {"data": (3, 2, 4)}),
])
def test_fold_batchnorm_layers(layer, shapes):
    axis = "3" if "NHWC" in layer else "-1" if "flatten" in layer else "1"
    text = f"""  %data = var
  %w = var
  %b = var
  %layer = {layer}
  %g = var
  %be = var
  %mm = var
  %mv = var
  %bn = BatchNorm(%layer, %g, %be, %mm, %mv) {{fix_gamma = "False", axis = "{axis}"}}
  return %bn"""
    g = graph_of(text)
    sym = mxc.sym.Symbol.from_graph(g)
    args, aux = random_params(sym, seed=3, **shapes)
    feeds = {"data": np.random.default_rng(1).standard_normal(shapes["data"]).astype(F32)}
    r = check(g, "fold-batchnorm", args, aux, feeds, shapes=shapes)
    assert op_count(r.graph, "BatchNorm") == 0, r.statistics


def test_fold_batchnorm_declines_what_it_cannot_fold():
    base = graph_of(CONV_BN)
    args = {"w": np.ones((2, 1, 1, 1), F32), "g": np.ones(2, F32), "be": np.ones(2, F32)}
    aux = {"mm": np.zeros(2, F32), "mv": np.ones(2, F32)}
    feeds = {"data": np.ones((1, 1, 2, 2), F32)}
    # no parameter values: nothing to fold
    r = run_pipeline(base, "fold-batchnorm")
    assert op_count(r.graph, "BatchNorm") == 1
    assert r.statistics[0][1]["not folded: parameter values unknown"] == 1
    # the conv output is also a graph output: two uses
    g = graph_of(CONV_BN.replace("return %r", "return %r, %conv"))
    assert op_count(check(g, "fold-batchnorm", args, aux, feeds).graph, "BatchNorm") == 1
    # BatchNorm over another axis than the channels
    g = graph_of(CONV_BN.replace('fix_gamma = "False"', 'fix_gamma = "False", axis = "3"'))
    aux2 = {"mm": np.zeros(2, F32), "mv": np.ones(2, F32)}
    args2 = {**args, "g": np.ones(2, F32), "be": np.ones(2, F32)}
    r = check(g, "fold-batchnorm", args2, aux2, feeds)
    assert r.statistics[0][1]["not folded: axis is not the channel axis"] == 1
    # ... which, with the data's rank known, becomes a scale and shift instead
    r = check(g, "fold-batchnorm", args2, aux2, feeds, shapes={"data": (1, 1, 2, 2)})
    assert op_count(r.graph, "BatchNorm") == 0
    assert r.statistics[0][1]["became a per-channel scale and shift"] == 1
    # the statistics outputs are read
    g = graph_of(CONV_BN.replace("return %r", "return %r, %bn#1"))
    assert op_count(run_pipeline(g, "fold-batchnorm", args, aux).graph, "BatchNorm") == 1


def test_fold_batchnorm_shared_weight_gets_a_new_variable():
    other = ('%other = Convolution(%data, %w) {kernel = "(1, 1)", num_filter = "2", '
             'no_bias = "True"}\n  %sum = elemwise_add(%r, %other)\n  return %sum')
    g = graph_of(CONV_BN.replace("return %r", other))
    args = {"w": np.array([2, 3], F32).reshape(2, 1, 1, 1), "g": np.array([1, 2], F32),
            "be": np.array([0.5, -1], F32)}
    aux = {"mm": np.array([1, 0], F32), "mv": np.array([3, 0], F32)}
    r = check(g, "fold-batchnorm", args, aux, {"data": np.ones((1, 1, 2, 2), F32)})
    np.testing.assert_allclose(r.args["w"].reshape(-1), [2, 3])  # the other conv's weight
    np.testing.assert_allclose(r.args["conv_weight_folded"].reshape(-1), [1, 6])


# -- cse -------------------------------------------------------------------------------------
def test_cse_merges_equal_nodes():
    g = graph_of("""  %x = var
  %w = var
  %a = exp(%x)
  %b = exp(%x)
  %c1 = Convolution(%a, %w) {kernel = "(1,1)", num_filter = "2", no_bias = "True"}
  %c2 = Convolution(%b, %w) {kernel = "(1, 1)", num_filter = "2", no_bias = "1"}
  %c3 = Convolution(%b, %w) {kernel = "(1, 1)", num_filter = "2", no_bias = "True", stride = "(2, 2)"}
  %d1 = Dropout(%x) {mode = "always"}
  %d2 = Dropout(%x) {mode = "always"}
  %s = add_n(%c1, %c2) {num_args = "2"}
  %o = elemwise_add(%d1, %d2)
  return %s, %c3, %o""")
    r = run_pipeline(g, "cse")
    expected = graph_of("""  %x = var
  %w = var
  %a = exp(%x)
  %c1 = Convolution(%a, %w) {kernel = "(1,1)", num_filter = "2", no_bias = "True"}
  %c3 = Convolution(%a, %w) {kernel = "(1, 1)", num_filter = "2", no_bias = "True", stride = "(2, 2)"}
  %d1 = Dropout(%x) {mode = "always"}
  %d2 = Dropout(%x) {mode = "always"}
  %s = add_n(%c1, %c1) {num_args = "2"}
  %o = elemwise_add(%d1, %d2)
  return %s, %c3, %o""")
    assert graph_diff(r.graph, expected) is None, graph_diff(r.graph, expected)
    assert r.statistics[0][1] == {"nodes merged": 2}


# -- partition and print-ir ------------------------------------------------------------------
def test_partition_pass_in_a_pipeline(capsys):
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    sym = mxc.sym.log(mxc.sym.exp(mxc.sym.sin(a) + b))
    r = mxc.passes.run(sym, "partition{backend=default op_names=exp;log},print-ir{label=after}",
                       {"a": np.ones(2, F32), "b": np.ones(2, F32)})
    assert [n.op for n in r.graph.topo_order() if n.op] == ["sin", "elemwise_add", "_CachedOp"]
    text = capsys.readouterr().err    # an IR dump goes to stderr, as mlir-opt's
    assert text.startswith("// after\ngraph @main {") and "_CachedOp" in text
    feeds = {"a": np.full(2, 0.5, F32), "b": np.ones(2, F32)}
    assert_close_outputs(outputs(sym, {}, {}, feeds), outputs(r.symbol, {}, {}, feeds))
