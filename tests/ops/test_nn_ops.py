"""Neural-network ops: behaviour the MXNet corpus cases do not pin down.

Attribute validation, backward shape inference, layouts, hidden outputs,
dtype rules and a few hand-checked numerics (naive loop references for
convolution/deconvolution, pooling edge windows, RNN sequence lengths).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ops.registry import get_op
from mxc.errors import AttributeInvalidError, AttributeRequiredError, ShapeError

RNG = np.random.default_rng(0)


def graph_of(op: str, attrs: dict | None, inputs) -> Graph:
    vs = [Node(None, name) for name in inputs]
    node = Node(op, "op", {k: str(v) for k, v in (attrs or {}).items()},
                [Entry(v, 0) for v in vs])
    return Graph([*vs, node], [Entry(node, i) for i in range(node.num_visible_outputs())])


def run(op: str, attrs: dict | None = None, **feeds):
    g = graph_of(op, attrs, tuple(feeds))
    outs = run_graph(g, {k: np.asarray(v) for k, v in feeds.items()})
    return outs[0] if len(outs) == 1 else outs


def hook_shapes(op: str, attrs: dict, ins: list, outs: list):
    """Call the op's infer_shape hook directly (partial shapes, both directions)."""
    node = Node(op, "op", {k: str(v) for k, v in attrs.items()})
    opdef = get_op(op)
    return opdef.infer_shape(node.params, list(ins), list(outs))


def params(op: str, attrs: dict):
    return Node(op, "op", {k: str(v) for k, v in attrs.items()}).params


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


# ---------------------------------------------------------------------------
# naive references
# ---------------------------------------------------------------------------
def naive_conv2d(x, w, b, stride, pad, dilate, groups):
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])])
    oh = (h + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, f, oh, ow))
    fg = f // groups
    for ni, fi, i, j in itertools.product(range(n), range(f), range(oh), range(ow)):
        gi = fi // fg
        acc = 0.0
        for ci, a, bb in itertools.product(range(cg), range(kh), range(kw)):
            acc += xp[ni, gi * cg + ci, i * stride[0] + a * dilate[0],
                      j * stride[1] + bb * dilate[1]] * w[fi, ci, a, bb]
        out[ni, fi, i, j] = acc + (0 if b is None else b[fi])
    return out


def naive_deconv2d(x, w, stride, pad, dilate, adj, groups):
    n, c, h, wd = x.shape
    _, fg, kh, kw = w.shape
    cg = c // groups
    oh = stride[0] * (h - 1) + dilate[0] * (kh - 1) + 1 - 2 * pad[0] + adj[0]
    ow = stride[1] * (wd - 1) + dilate[1] * (kw - 1) + 1 - 2 * pad[1] + adj[1]
    out = np.zeros((n, fg * groups, oh, ow))
    for ni, ci, i, j, a, bb, fo in itertools.product(range(n), range(c), range(h), range(wd),
                                                     range(kh), range(kw), range(fg)):
        y = i * stride[0] + a * dilate[0] - pad[0]
        xx = j * stride[1] + bb * dilate[1] - pad[1]
        if 0 <= y < oh and 0 <= xx < ow:
            out[ni, (ci // cg) * fg + fo, y, xx] += x[ni, ci, i, j] * w[ci, fo, a, bb]
    return out


# ---------------------------------------------------------------------------
# Convolution / Deconvolution
# ---------------------------------------------------------------------------
def test_convolution_matches_naive_loops_grouped_strided_dilated():
    x, w, b = rand(2, 4, 9, 8), rand(6, 2, 3, 2), rand(6)
    attrs = dict(kernel=(3, 2), num_filter=6, num_group=2, stride=(2, 1), pad=(1, 2),
                 dilate=(2, 1))
    got = run("Convolution", attrs, data=x, weight=w, bias=b)
    want = naive_conv2d(x, w, b, (2, 1), (1, 2), (2, 1), 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_convolution_nhwc_layout_is_a_permuted_nchw():
    x, w = rand(1, 3, 6, 5), rand(4, 3, 3, 3)
    want = run("Convolution", dict(kernel=(3, 3), num_filter=4, no_bias=True), data=x, weight=w)
    got = run("Convolution", dict(kernel=(3, 3), num_filter=4, no_bias=True, layout="NHWC"),
              data=x.transpose(0, 2, 3, 1), weight=w.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)
    ins, outs = hook_shapes("Convolution", dict(kernel=(3, 3), num_filter=6, layout="NHWC",
                                                num_group=3),
                            [(1, 6, 5, 3), None, None], [None])
    assert ins[1] == (6, 3, 3, 1) and ins[2] == (6,) and outs[0] == (1, 4, 3, 6)


def test_convolution_backward_inference_batch_and_stride1_extents():
    ins, outs = hook_shapes("Convolution", dict(kernel=(3, 3), num_filter=8, pad=(1, 0),
                                                stride=(1, 2)),
                            [(None, 3, None, None), None, None], [(5, 8, 7, 4)])
    # batch always, height because its stride is 1, width not (stride 2)
    assert ins[0] == (5, 3, 7, None)
    assert ins[1] == (8, 3, 3, 3)


def test_convolution_float16_computes_in_float32_and_keeps_dtype():
    x, w = rand(1, 2, 5, 5, dtype=np.float16), rand(3, 2, 3, 3, dtype=np.float16)
    got = run("Convolution", dict(kernel=(3, 3), num_filter=3, no_bias=True), data=x, weight=w)
    assert got.dtype == np.float16
    want = naive_conv2d(x.astype(np.float32), w.astype(np.float32), None, (1, 1), (0, 0),
                        (1, 1), 1)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("attrs, msg", [
    (dict(kernel=(1, 1, 1, 1), num_filter=2), "4-D"),
    (dict(kernel=(3, 3), num_filter=2, stride=(1, 1, 1)), "stride"),
    (dict(kernel=(3, 3), num_filter=3, num_group=2), "divisible"),
    (dict(kernel=(3, 3), num_filter=2, layout="NCW"), "layout"),
    (dict(kernel=(3, 3, 3), num_filter=2, dilate=(2, 1, 1)), "dilation"),
    (dict(kernel=(3, 3), num_filter=2, cudnn_tune="slow"), "cudnn_tune"),
])
def test_convolution_attribute_validation(attrs, msg):
    with pytest.raises(AttributeInvalidError, match=msg):
        params("Convolution", attrs)


def test_convolution_requires_kernel_and_rejects_unknown_attributes():
    with pytest.raises(AttributeRequiredError, match="kernel"):
        params("Convolution", dict(num_filter=2))
    with pytest.raises(AttributeInvalidError, match="unknown attribute 'filters'"):
        params("Convolution", dict(kernel=(3, 3), num_filter=2, filters=3))


def test_convolution_kernel_larger_than_padded_input_is_a_shape_error():
    with pytest.raises(ShapeError, match="exceeds input"):
        hook_shapes("Convolution", dict(kernel=(5, 5), num_filter=1), [(1, 1, 3, 8), None, None],
                    [None])


def test_deconvolution_matches_naive_loops_and_defaults_to_no_bias():
    x, w = rand(2, 4, 3, 4), rand(4, 3, 3, 2)
    attrs = dict(kernel=(3, 2), num_filter=6, num_group=2, stride=(2, 3), pad=(1, 0), adj=(1, 2),
                 dilate=(1, 2))
    assert get_op("Deconvolution").input_names(params("Deconvolution", attrs)) == \
        ["data", "weight"]
    got = run("Deconvolution", attrs, data=x, weight=w)
    want = naive_deconv2d(x, w, (2, 3), (1, 0), (1, 2), (1, 2), 2)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_deconvolution_target_shape_derives_pad_and_adj():
    # natural size 2*(4-1)+3 = 9; target 8 -> total 1: pad 1, adj 1
    attrs = dict(kernel=(3, 3), num_filter=2, stride=(2, 2), target_shape=(8, 8))
    ins, outs = hook_shapes("Deconvolution", attrs, [(1, 3, 4, 4), None], [None])
    assert outs[0] == (1, 2, 8, 8) and ins[1] == (3, 2, 3, 3)
    x, w = rand(1, 3, 4, 4), rand(3, 2, 3, 3)
    got = run("Deconvolution", attrs, data=x, weight=w)
    want = naive_deconv2d(x, w, (2, 2), (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_deconvolution_adj_must_be_smaller_than_stride():
    with pytest.raises(ShapeError, match="adj"):
        hook_shapes("Deconvolution", dict(kernel=(3,), num_filter=1, adj=(1,)),
                    [(1, 1, 5), None], [None])


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------
def test_pooling_avg_full_convention_divisor_stops_at_padded_edge():
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    attrs = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                 pooling_convention="full")
    got = run("Pooling", attrs, data=x)
    assert got.shape == (1, 1, 3, 3)
    # corner window rows/cols -1..1 -> 9 cells counted (padding included)
    assert got[0, 0, 0, 0] == pytest.approx((0 + 1 + 5 + 6) / 9)
    # last window rows 3..5: row 5 is the pad row (counted), so 3 rows x 3 cols
    assert got[0, 0, 2, 2] == pytest.approx((18 + 19 + 23 + 24) / 9)
    excl = run("Pooling", {**attrs, "count_include_pad": False}, data=x)
    assert excl[0, 0, 0, 0] == pytest.approx((0 + 1 + 5 + 6) / 4)


def test_pooling_full_convention_window_past_the_padding():
    # x=4, k=2, s=3, full: out = 1 + ceil(2/3) = 2; second window covers [3, 5) -> only x[3]
    x = np.array([[[1.0, 2.0, 3.0, 4.0]]], dtype=np.float32)
    avg = run("Pooling", dict(kernel=(2,), stride=(3,), pool_type="avg",
                              pooling_convention="full"), data=x)
    np.testing.assert_allclose(avg, [[[1.5, 4.0]]])  # divisor clipped to x+pad
    mx = run("Pooling", dict(kernel=(2,), stride=(3,), pool_type="max",
                             pooling_convention="full"), data=-x)
    np.testing.assert_allclose(mx, [[[-1.0, -4.0]]])


def test_pooling_lp3_is_a_signed_cube_root_and_max_ignores_padding():
    x = np.array([[[-2.0, 1.0, -3.0, 0.5]]], dtype=np.float32)
    lp = run("Pooling", dict(kernel=(2,), stride=(2,), pool_type="lp", p_value=3), data=x)
    np.testing.assert_allclose(lp, [[[np.cbrt(-7.0), np.cbrt(-27 + 0.125)]]], rtol=1e-6)
    mx = run("Pooling", dict(kernel=(3,), pad=(1,), pool_type="max"), data=-np.abs(x) - 1)
    np.testing.assert_allclose(mx, [[[-2.0, -2.0, -1.5, -1.5]]])


def test_pooling_nhwc_layout_and_global_pool():
    x = rand(2, 5, 6, 3)
    got = run("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type="max", layout="NHWC"),
              data=x)
    want = run("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type="max"),
               data=x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1))
    g = run("Pooling", dict(global_pool=True, pool_type="avg", layout="NHWC"), data=x)
    np.testing.assert_allclose(g, x.mean(axis=(1, 2), keepdims=True), rtol=1e-5, atol=1e-7)
    assert run("Pooling", dict(global_pool=True, pool_type="sum"), data=rand(1, 2, 3, 4, 5)) \
        .shape == (1, 2, 1, 1, 1)


def test_pooling_same_convention_is_1d_only():
    ins, outs = hook_shapes("Pooling", dict(kernel=(3,), stride=(2,),
                                            pooling_convention="same"), [(1, 2, 7)], [None])
    assert outs[0] == (1, 2, 4)
    with pytest.raises(ShapeError, match="1-D"):
        hook_shapes("Pooling", dict(kernel=(3, 3), pooling_convention="same"),
                    [(1, 2, 7, 7)], [None])


@pytest.mark.parametrize("attrs, msg", [
    (dict(kernel=(2, 2), pool_type="lp"), "p_value"),
    (dict(kernel=(2, 2), pool_type="lp", p_value=4), "not supported"),
    (dict(kernel=(2, 2), stride=(1,)), "same length"),
    (dict(kernel=(2, 2), pool_type="median"), "pool_type"),
    (dict(kernel=(2, 2), pooling_convention="same", pad=(1, 1)), "padding"),
])
def test_pooling_attribute_validation(attrs, msg):
    with pytest.raises(AttributeInvalidError, match=msg):
        params("Pooling", attrs)


def test_adaptive_avg_pooling_bins_overlap():
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5) * np.ones((1, 1, 3, 1), np.float32)
    got = run("_contrib_AdaptiveAvgPooling2D", dict(output_size=(1, 3)), data=x)
    # bins [0,2), [1,4), [3,5)
    np.testing.assert_allclose(got[0, 0, 0], [0.5, 2.0, 3.5])


# ---------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------
def test_batchnorm_aux_inputs_hidden_outputs_and_float16_params():
    opdef = get_op("BatchNorm")
    p = params("BatchNorm", {})
    assert opdef.input_names(p) == ["data", "gamma", "beta", "moving_mean", "moving_var"]
    assert opdef.mutable_inputs(p) == [3, 4]
    assert (opdef.num_outputs(p), opdef.num_visible_outputs(p)) == (3, 1)
    assert opdef.input_var_attrs(p, "moving_var") == {"__init__": '["one", {}]'}
    g = graph_of("BatchNorm", {"output_mean_var": True},
                 ("data", "gamma", "beta", "mm", "mv"))
    types = infer_types(g, {"data": "float16"})
    node = g.outputs[0].node
    assert [types[e.key] for e in node.inputs] == ["float16"] + ["float32"] * 4
    assert [types[(node, i)] for i in range(3)] == ["float16", "float32", "float32"]


def test_batchnorm_fix_gamma_ignores_gamma_and_outputs_inverse_std():
    x = rand(2, 3, 4)
    gamma, beta = np.full(3, 5.0, np.float32), rand(3)
    mean, var = rand(3), np.abs(rand(3)) + 0.5
    out, m, inv = run("BatchNorm", {"output_mean_var": True, "axis": -2}, data=x, gamma=gamma,
                      beta=beta, moving_mean=mean, moving_var=var)
    want = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-3) + beta[:, None]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, mean)
    np.testing.assert_allclose(inv, 1 / np.sqrt(var + 1e-3), rtol=1e-6)


def test_groupnorm_gamma_is_per_group():
    x = rand(2, 4, 3)
    gamma, beta = np.array([2.0, -1.0], np.float32), np.array([0.5, 0.0], np.float32)
    got = run("GroupNorm", {"num_groups": 2}, data=x, gamma=gamma, beta=beta)
    xr = x.reshape(2, 2, 6).astype(np.float64)
    norm = (xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + 1e-5)
    want = (norm * gamma[None, :, None] + beta[None, :, None]).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="divisible"):
        hook_shapes("GroupNorm", {"num_groups": 3}, [(2, 4, 3), None, None], [None] * 3)


def test_layernorm_and_instancenorm_statistics_shapes():
    ins, outs = hook_shapes("LayerNorm", {"axis": 1}, [(2, 5, 3), None, None], [None] * 3)
    assert ins[1:] == [(5,), (5,)] and outs[1:] == [(2, 1, 3), (2, 1, 3)]
    ins, outs = hook_shapes("InstanceNorm", {}, [(2, 5, 3), None, None], [None] * 3)
    assert outs[1:] == [(2, 5), (2, 5)]
    assert get_op("InstanceNorm").num_visible_outputs(params("InstanceNorm", {})) == 1
    assert get_op("LayerNorm").num_visible_outputs(params("LayerNorm",
                                                          {"output_mean_var": True})) == 3


def test_l2normalization_spatial_mode_and_norm_shape():
    x = rand(2, 3, 2, 2)
    got = run("L2Normalization", {"mode": "spatial"}, data=x)
    want = x / np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3), keepdims=True) + 1e-10)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    _, outs = hook_shapes("L2Normalization", {"mode": "channel"}, [(2, 3, 4)], [None, None])
    assert outs[1] == (2, 1, 4)


def test_lrn_even_window_is_asymmetric():
    x = rand(1, 5, 2, 2)
    got = run("LRN", {"nsize": 4, "alpha": 0.5, "beta": 0.75, "knorm": 1.0}, data=x)
    sq = x.astype(np.float64) ** 2
    want = np.empty_like(sq)
    for c in range(5):  # window [c-1, c+2]
        s = sq[:, max(c - 1, 0):min(c + 3, 5)].sum(axis=1)
        want[:, c] = x[:, c] / (1.0 + 0.5 / 4 * s) ** 0.75
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---------------------------------------------------------------------------
# activations and softmax
# ---------------------------------------------------------------------------
def test_leakyrelu_prelu_gamma_inferred_and_rrelu_hidden_mask():
    ins, _ = hook_shapes("LeakyReLU", {"act_type": "prelu"}, [(2, 7, 3), None], [None])
    assert ins[1] == (7,)
    p = params("LeakyReLU", {"act_type": "rrelu"})
    assert get_op("LeakyReLU").output_names(p) == ["output", "mask"]
    x = np.array([-2.0, 3.0], np.float32)
    got = run("LeakyReLU", {"act_type": "rrelu", "lower_bound": 0.1, "upper_bound": 0.3},
              data=x)
    np.testing.assert_allclose(got, [-0.4, 3.0], rtol=1e-6)
    scalar = run("LeakyReLU", {"act_type": "prelu"}, data=rand(2, 3), gamma=np.array([0.5],
                                                                                       np.float32))
    assert scalar.shape == (2, 3)


def test_softmax_dtype_attribute_and_length():
    x = rand(2, 4, dtype=np.float16)
    g = graph_of("softmax", {"dtype": "float32"}, ("data",))
    assert infer_types(g, {"data": "float16"})[g.outputs[0].key] == "float32"
    y = run("softmax", {"dtype": "float32"}, data=x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.sum(-1), 1, rtol=1e-6)
    x = rand(3, 5)
    length = np.array([1, 3, 5], np.int32)
    got = run("softmax", {"use_length": True, "temperature": 2.0}, data=x, length=length)
    for i, n in enumerate(length):
        e = np.exp(x[i, :n].astype(np.float64) / 2)
        np.testing.assert_allclose(got[i, :n], e / e.sum(), rtol=1e-5, atol=1e-6)
        assert (got[i, n:] == 0).all()
    # log_softmax/softmin register a single input in MXNet 1.9.1
    with pytest.raises(AttributeInvalidError, match="use_length"):
        params("log_softmax", {"use_length": True})
    ins, _ = hook_shapes("softmax", {"use_length": True, "axis": 1}, [(3, 5, 2), None], [None])
    assert ins[1] == (3, 2)


def test_softmin_and_softmaxactivation_channel():
    x = rand(2, 3, 4)
    np.testing.assert_allclose(run("softmin", {"axis": 1}, data=x),
                               run("softmax", {"axis": 1}, data=-x), rtol=1e-6)
    np.testing.assert_allclose(run("SoftmaxActivation", {"mode": "channel"}, data=x),
                               run("softmax", {"axis": 1}, data=x), rtol=1e-6)


# ---------------------------------------------------------------------------
# dense, dot, dropout, loss heads
# ---------------------------------------------------------------------------
def test_fullyconnected_shapes_both_directions():
    ins, outs = hook_shapes("FullyConnected", {"num_hidden": 7, "flatten": False},
                            [(4, 5, 3), None, None], [None])
    assert ins[1] == (7, 3) and ins[2] == (7,) and outs[0] == (4, 5, 7)
    # a batch-less legacy shape learns its batch from a known output
    ins, outs = hook_shapes("FullyConnected", {"num_hidden": 7}, [(None, 32), None, None],
                            [(6, 7)])
    assert ins[0] == (6, 32) and ins[1] == (7, 32)
    # MXNet also accepts a (num_hidden, 1) bias
    ins, _ = hook_shapes("FullyConnected", {"num_hidden": 7}, [(2, 3), None, (7, 1)], [None])
    assert ins[2] == (7, 1)


def test_dot_transposed_nd_operands():
    a, b = rand(4, 2, 3), rand(5, 4)
    got = run("dot", {"transpose_a": True, "transpose_b": True}, lhs=a, rhs=b)
    want = np.tensordot(a, b, axes=([0], [1]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match="dot shape error"):
        hook_shapes("dot", {}, [(3, 4), (5, 2)], [None])


def test_gemm2_row_axis():
    a, b = rand(2, 3, 4, 5), rand(2, 5, 4, 6)
    got = run("_linalg_gemm2", {"axis": 1, "alpha": 2.0}, A=a, B=b)
    want = 2 * np.swapaxes(np.swapaxes(a, 1, 2) @ np.swapaxes(b, 1, 2), 1, 2)
    assert got.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dropout_hidden_mask_follows_axes():
    p = params("Dropout", {"axes": (1,)})
    assert get_op("Dropout").num_visible_outputs(p) == 1
    _, outs = hook_shapes("Dropout", {"axes": (1,)}, [(2, 3, 4)], [None, None])
    assert outs == [(2, 3, 4), (2, 1, 4)]
    x = rand(2, 3)
    np.testing.assert_array_equal(run("Dropout", {"p": 0.7}, data=x), x)


def test_softmaxoutput_label_shapes_and_native_flatten():
    ins, _ = hook_shapes("SoftmaxOutput", {"multi_output": True}, [(2, 3, 4, 5), None], [None])
    assert ins[1] == (2, 20)
    ins, _ = hook_shapes("SoftmaxOutput", {}, [(2, 3, 4), None], [None])
    assert ins[1] == (2, 3)
    # 3-D float32 is not a oneDNN shape: the native kernel normalises (N, rest) rows
    x = rand(2, 3, 4)
    got = run("SoftmaxOutput", {}, data=x, label=np.zeros((2, 3), np.float32))
    flat = np.exp(x.reshape(2, -1).astype(np.float64))
    np.testing.assert_allclose(got, (flat / flat.sum(1, keepdims=True)).reshape(x.shape),
                               rtol=1e-5)
    assert get_op("SoftmaxOutput").unused_inputs(params("SoftmaxOutput", {})) == [1]


def test_regression_output_label_shape_rules():
    ins, _ = hook_shapes("LinearRegressionOutput", {}, [(4, 1), None], [None])
    assert ins[1] == (4,)
    with pytest.raises(ShapeError, match="inconsistent"):
        hook_shapes("MAERegressionOutput", {}, [(4, 3), (4, 2)], [None])
    x = rand(3, 2)
    np.testing.assert_allclose(run("LogisticRegressionOutput", {}, data=x, label=x),
                               1 / (1 + np.exp(-x)), rtol=1e-6)


# ---------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------
def _rnn_feeds(mode, layers, bidir, t, n, x_size, h):
    from mxc.compiler.ops.rnn import rnn_param_size
    d = 2 if bidir else 1
    feeds = {"data": rand(t, n, x_size),
             "parameters": rand(rnn_param_size(layers, x_size, h, d, mode)) * 0.5,
             "state": rand(layers * d, n, h)}
    if mode == "lstm":
        feeds["state_cell"] = rand(layers * d, n, h)
    return feeds


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_rnn_sequence_length_equals_running_each_truncated_sequence(mode):
    attrs = {"mode": mode, "num_layers": 2, "bidirectional": True, "state_size": 3,
             "state_outputs": True}
    feeds = _rnn_feeds(mode, 2, True, 5, 3, 4, 3)
    lengths = np.array([5, 2, 4], np.int32)
    outs = run("RNN", {**attrs, "use_sequence_length": True}, **feeds, sequence_length=lengths)
    for b, ln in enumerate(lengths):
        one = {k: (v[:ln, b:b + 1] if k == "data" else
                   v[:, b:b + 1] if k.startswith("state") else v) for k, v in feeds.items()}
        ref = run("RNN", attrs, **one)
        np.testing.assert_allclose(outs[0][:ln, b], ref[0][:, 0], rtol=1e-5, atol=1e-6)
        assert (outs[0][ln:, b] == 0).all()
        for o, r in zip(outs[1:], ref[1:]):
            np.testing.assert_allclose(o[:, b], r[:, 0], rtol=1e-5, atol=1e-6)


def test_rnn_shapes_with_projection_and_sequence_length():
    attrs = {"mode": "lstm", "num_layers": 2, "bidirectional": True, "state_size": 8,
             "projection_size": 3, "state_outputs": True, "use_sequence_length": True}
    p = params("RNN", attrs)
    assert get_op("RNN").input_names(p) == ["data", "parameters", "state", "state_cell",
                                            "sequence_length"]
    ins, outs = hook_shapes("RNN", attrs, [(6, 2, 5), None, None, None, None], [None] * 3)
    g, h, pr, d = 4, 8, 3, 2
    size = (d * g * h * (5 + pr + 2) + d * g * h * (pr * d + pr + 2) + pr * h * 2 * d)
    assert ins[1:] == [(size,), (4, 2, 3), (4, 2, 8), (2,)]
    assert outs == [(6, 2, 6), (4, 2, 3), (4, 2, 8)]
    with pytest.raises(AttributeInvalidError, match="LSTM"):
        params("RNN", {"mode": "gru", "num_layers": 1, "state_size": 2, "projection_size": 1})


def test_rnn_sequence_length_keeps_its_own_dtype():
    g = graph_of("RNN", {"mode": "gru", "num_layers": 1, "state_size": 2,
                         "use_sequence_length": True},
                 ("data", "parameters", "state", "sequence_length"))
    t = infer_types(g, {"data": "float32", "sequence_length": "int32"})
    node = g.outputs[0].node
    assert [t[e.key] for e in node.inputs] == ["float32", "float32", "float32", "int32"]


def test_whole_graph_inference_reaches_weights():
    g = graph_of("Convolution", {"kernel": (3, 3), "num_filter": 4},
                 ("data", "weight", "bias"))
    s = infer_shapes(g, {"data": (1, 2, 5, 5)})
    node = g.outputs[0].node
    assert [s[e.key] for e in node.inputs] == [(1, 2, 5, 5), (4, 2, 3, 3), (4,)]
