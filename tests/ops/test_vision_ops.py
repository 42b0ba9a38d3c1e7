"""Vision, detection, quantization and attention ops: what the MXNet corpus does not show.

Attribute validation, shape inference in both directions, MXNet's documented
examples (values from the operator docstrings), hidden outputs and the
corner cases of the detection kernels (topk, background ids, format
conversion, the tie order of Proposal's ``std::sort``).
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ops.detection_proposal import _introsort_desc, _top_desc
from mxc.errors import AttributeInvalidError, AttributeRequiredError, DTypeError, ShapeError


def _build(op, attrs, names, all_outputs=False):
    vs = [Node(None, n) for n in names]
    node = Node(op, "op", {k: str(v) for k, v in attrs.items()}, [Entry(v) for v in vs])
    n_out = node.num_outputs() if all_outputs else node.num_visible_outputs()
    return Graph(vs + [node], [Entry(node, i) for i in range(n_out)]), node, vs


def _node(op, attrs):
    """An unattached node: its attributes are parsed lazily, on ``node.params``."""
    return Node(op, "op", {k: str(v) for k, v in attrs.items()})


def _run(op, attrs, all_outputs=False, **feeds):
    g, _, _ = _build(op, attrs, list(feeds), all_outputs)
    return run_graph(g, {k: np.asarray(v) for k, v in feeds.items()})


def _shapes(op, attrs, names, given):
    g, node, vs = _build(op, attrs, names)
    res = infer_shapes(g, given)
    ins = {v.name: res.get((v, 0)) for v in vs}
    outs = [res.get((node, i)) for i in range(node.num_outputs())]
    return ins, outs


def f32(x):
    return np.asarray(x, dtype=np.float32)


# ---------------------------------------------------------------------------
# attribute validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("op, attrs", [
    ("UpSampling", dict(scale=0, sample_type="nearest", num_args=1)),
    ("_contrib_BilinearResize2D", dict(mode="odd_scale")),
    ("_contrib_BilinearResize2D", dict(scale_height=2.0)),
    ("_contrib_box_nms", dict(score_index=3)),
    ("_contrib_box_nms", dict(id_index=1)),
    ("_contrib_quantized_conv", dict(kernel=(3, 3), num_filter=4, num_group=2)),
    ("_contrib_quantized_conv", dict(kernel=(3,), num_filter=4, no_bias=True)),
    ("_contrib_ROIAlign", dict(pooled_size=(2,), spatial_scale=1.0)),
    ("ROIPooling", dict(pooled_size=(2, 2), spatial_scale=2.0)),
    ("_contrib_DeformableConvolution", dict(kernel=(3, 3, 3), num_filter=2)),
    ("Correlation", dict(kernel_size=2)),
    ("_contrib_MultiBoxDetection", dict(variances=(0.1, 0.2))),
    ("_contrib_MultiBoxPrior", dict(steps=(0.5,))),
    ("_contrib_interleaved_matmul_selfatt_qk", dict(heads=0)),
])
def test_invalid_attributes(op, attrs):
    node = _node(op, attrs)
    with pytest.raises(AttributeInvalidError, match=op):
        node.params


@pytest.mark.parametrize("op, attrs", [
    ("GridGenerator", dict(target_shape=(2, 2))),
    ("UpSampling", dict(scale=2, num_args=1)),
    ("_contrib_ROIAlign", dict(pooled_size=(2, 2))),
    ("_contrib_interleaved_matmul_selfatt_qk", {}),
])
def test_required_attributes(op, attrs):
    node = _node(op, attrs)
    with pytest.raises(AttributeRequiredError):
        node.params


def test_input_and_output_names_follow_attributes():
    _, node, _ = _build("UpSampling", dict(scale=2, sample_type="nearest", num_args=3), [])
    assert node.opdef.input_names(node.params) == ["arg0", "arg1", "arg2"]
    _, node, _ = _build("UpSampling", dict(scale=2, sample_type="bilinear", num_args=2), [])
    assert node.opdef.input_names(node.params) == ["data", "weight"]
    _, node, _ = _build("_contrib_quantized_conv", dict(kernel=(1, 1), num_filter=1,
                                                        no_bias=True), [])
    assert node.opdef.input_names(node.params) == [
        "data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
    assert node.opdef.output_names(node.params) == ["output", "min_output", "max_output"]
    _, node, _ = _build("_contrib_Proposal", dict(output_score=True), [])
    assert node.num_visible_outputs() == 2 and node.num_outputs() == 2
    _, node, _ = _build("_contrib_Proposal", {}, [])
    assert node.num_visible_outputs() == 1
    _, node, _ = _build("_contrib_BilinearResize2D", dict(mode="like"), [])
    assert node.opdef.input_names(node.params) == ["data", "like"]


# ---------------------------------------------------------------------------
# shape inference
# ---------------------------------------------------------------------------
def test_quantized_conv_infers_weight_bias_and_ranges():
    names = ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
             "min_bias", "max_bias"]
    ins, outs = _shapes("_contrib_quantized_conv",
                        dict(kernel=(3, 3), num_filter=8, pad=(1, 1), stride=(2, 2)),
                        names, {"data": (2, 4, 7, 7)})
    assert ins["weight"] == (8, 4, 3, 3) and ins["bias"] == (8,)
    assert all(ins[n] == (1,) for n in names[3:])
    assert outs == [(2, 8, 4, 4), (1,), (1,)]


def test_quantized_fc_without_flatten():
    names = ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
    ins, outs = _shapes("_contrib_quantized_fully_connected",
                        dict(num_hidden=4, no_bias=True, flatten=False), names,
                        {"data": (2, 3, 5)})
    assert ins["weight"] == (4, 5)
    assert outs == [(2, 3, 4), (1,), (1,)]


def test_quantized_dtypes():
    names = ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
             "min_bias", "max_bias"]
    g, node, vs = _build("_contrib_quantized_fully_connected", dict(num_hidden=2), names,
                         all_outputs=True)
    res = infer_types(g, {"data": "uint8"})
    assert [res[(v, 0)] for v in vs] == ["uint8", "int8", "int8"] + ["float32"] * 6
    assert [res[(node, i)] for i in range(3)] == ["int32", "float32", "float32"]
    with pytest.raises(DTypeError):
        infer_types(g, {"data": "float32"})
    g, node, _ = _build("_contrib_quantize_v2", dict(out_type="auto", min_calib_range=0.0,
                                                     max_calib_range=1.0), ["data"])
    assert infer_types(g, {"data": "float32"})[(node, 0)] == "uint8"
    g, node, _ = _build("_contrib_requantize", dict(out_type="uint8"),
                        ["data", "min_range", "max_range"])
    assert infer_types(g, {"data": "int32"})[(node, 0)] == "uint8"


def test_deformable_conv_shapes_with_groups():
    ins, outs = _shapes("_contrib_DeformableConvolution",
                        dict(kernel=(3, 3), num_filter=6, num_group=2, num_deformable_group=2,
                             pad=(1, 1)), ["data", "offset", "weight", "bias"],
                        {"data": (1, 4, 5, 5), "offset": (1, 36, 5, 5)})
    assert ins["weight"] == (6, 2, 3, 3) and ins["bias"] == (6,)
    assert outs == [(1, 6, 5, 5)]
    with pytest.raises(ShapeError, match="offset"):
        _shapes("_contrib_DeformableConvolution", dict(kernel=(3, 3), num_filter=6),
                ["data", "offset", "weight", "bias"],
                {"data": (1, 4, 5, 5), "offset": (1, 18, 5, 5)})    # output is 3x3


def test_proposal_infers_bbox_pred_and_im_info():
    ins, outs = _shapes("_contrib_Proposal", dict(rpn_post_nms_top_n=7),
                        ["cls_prob", "bbox_pred", "im_info"], {"cls_prob": (1, 6, 4, 5)})
    assert ins["bbox_pred"] == (1, 12, 4, 5) and ins["im_info"] == (1, 3)
    assert outs == [(7, 5), (7, 1)]


def test_box_nms_output_shape_fills_input():
    _, node, _ = _build("_contrib_box_nms", {}, ["data"])
    ins, outs = node.opdef.infer_shape(node.params, [None], [(2, 5, 6), None])
    assert ins == [(2, 5, 6)] and outs == [(2, 5, 6), (2, 5, 1)]
    with pytest.raises(ShapeError, match="last dimension"):
        node.opdef.infer_shape(node.params, [(5, 4)], [None, None])


@pytest.mark.parametrize("attrs, out_hw", [
    (dict(height=5, width=7), (5, 7)),
    (dict(scale_height=2.0, scale_width=0.5), (8, 2)),
    (dict(scale_width=3.0, height=2, width=9), (2, 9)),     # scale_width alone is ignored
    (dict(mode="odd_scale", scale_height=2.0, scale_width=2.0), (8, 9)),
    (dict(mode="to_even_up"), (4, 6)),
    (dict(mode="to_odd_down"), (3, 5)),
])
def test_bilinear_resize_output_sizes(attrs, out_hw):
    _, outs = _shapes("_contrib_BilinearResize2D", attrs, ["data"], {"data": (1, 2, 4, 5)})
    assert outs[0] == (1, 2) + out_hw


def test_upsampling_shapes():
    ins, outs = _shapes("UpSampling", dict(scale=3, sample_type="bilinear", num_filter=2,
                                           num_args=2), ["data", "weight"],
                        {"data": (1, 2, 4, 5)})
    assert ins["weight"] == (2, 1, 5, 5) and outs == [(1, 2, 12, 15)]
    _, outs = _shapes("UpSampling", dict(scale=2, sample_type="nearest", num_args=2),
                      ["a", "b"], {"a": (1, 2, 3, 3), "b": (1, 5, 6, 6)})
    assert outs == [(1, 7, 6, 6)]
    with pytest.raises(ShapeError, match="does not divide"):
        _shapes("UpSampling", dict(scale=2, sample_type="nearest", num_args=2),
                ["a", "b"], {"a": (1, 2, 3, 3), "b": (1, 5, 4, 4)})
    with pytest.raises(ShapeError, match="same number of channels"):
        _shapes("UpSampling", dict(scale=2, sample_type="nearest", num_args=2,
                                   multi_input_mode="sum"),
                ["a", "b"], {"a": (1, 2, 3, 3), "b": (1, 5, 6, 6)})


def test_correlation_and_roi_shapes():
    _, outs = _shapes("Correlation", dict(max_displacement=4, stride2=2, pad_size=4),
                      ["data1", "data2"], {"data1": (2, 3, 8, 8), "data2": (2, 3, 8, 8)})
    assert outs == [(2, 25, 8, 8), (2, 16, 16, 3), (2, 16, 16, 3)]
    _, outs = _shapes("_contrib_ROIAlign", dict(pooled_size=(2, 3), spatial_scale=1.0,
                                                position_sensitive=True),
                      ["data", "rois"], {"data": (1, 12, 5, 5), "rois": (4, 5)})
    assert outs == [(4, 2, 2, 3)]


# ---------------------------------------------------------------------------
# values: MXNet's documented examples
# ---------------------------------------------------------------------------
def test_upsampling_bilinear_doc_example():
    out = _run("UpSampling", dict(scale=2, sample_type="bilinear", num_filter=1, num_args=2),
               data=np.ones((1, 1, 3, 3), np.float32), weight=np.ones((1, 1, 4, 4), np.float32))
    row_edge = [1, 2, 2, 2, 2, 1]
    row_mid = [2, 4, 4, 4, 4, 2]
    np.testing.assert_array_equal(out[0][0, 0], [row_edge] + [row_mid] * 4 + [row_edge])


def test_upsampling_nearest_concat_scales_each_input_to_the_output():
    a = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    b = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    out = _run("UpSampling", dict(scale=2, sample_type="nearest", num_args=2), a=a, b=b)[0]
    np.testing.assert_array_equal(out[0, 0], np.kron(a[0, 0], np.ones((2, 2))))
    np.testing.assert_array_equal(out[0, 1], b[0, 0])


def test_box_nms_doc_example():
    x = f32([[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
             [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]])
    out, rec = _run("_contrib_box_nms", dict(overlap_thresh=0.1, coord_start=2, score_index=1,
                                             id_index=0, force_suppress=True),
                    all_outputs=True, data=x)
    np.testing.assert_allclose(out, [[2, 0.6, 0.5, 0.5, 0.7, 0.8], [0, 0.5, 0.1, 0.1, 0.2, 0.2],
                                     [-1] * 6, [-1] * 6], rtol=1e-6)
    np.testing.assert_array_equal(rec[:, 0], [3, 0, -1, -1])


def test_box_iou_doc_example():
    out = _run("_contrib_box_iou", {}, lhs=f32([[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]]),
               rhs=f32([[0.25, 0.25, 0.75, 0.75]]))[0]
    np.testing.assert_allclose(out, [[1 / 7], [1 / 7]], rtol=1e-6)


def test_roi_pooling_doc_example_and_argmax():
    x = np.arange(48, dtype=np.float32).reshape(1, 1, 8, 6)
    rois = f32([[0, 0, 0, 4, 4]])
    out, idx = _run("ROIPooling", dict(pooled_size=(2, 2), spatial_scale=1.0),
                    all_outputs=True, data=x, rois=rois)
    np.testing.assert_array_equal(out[0, 0], [[14, 16], [26, 28]])
    np.testing.assert_array_equal(idx[0, 0], [[14, 16], [26, 28]])   # h*W + w of the max
    out = _run("ROIPooling", dict(pooled_size=(2, 2), spatial_scale=0.7), data=x, rois=rois)[0]
    np.testing.assert_array_equal(out[0, 0], [[7, 9], [19, 21]])


def test_bilinear_sampler_doc_examples():
    data = f32([[[[1, 4, 3, 6], [1, 8, 8, 9], [0, 4, 1, 5], [1, 0, 1, 3]]]])
    grid = _run("GridGenerator", dict(transform_type="affine", target_shape=(4, 4)),
                data=f32([[2, 0, 0, 0, 2, 0]]))[0]
    out = _run("BilinearSampler", {}, data=data, grid=grid)[0]
    np.testing.assert_allclose(out[0, 0], [[0, 0, 0, 0], [0, 3.5, 6.5, 0], [0, 1.25, 2.5, 0],
                                           [0, 0, 0, 0]], rtol=1e-5, atol=1e-6)
    flow = np.zeros((1, 2, 4, 4), np.float32)
    flow[0, 0] = 1
    grid = _run("GridGenerator", dict(transform_type="warp"), data=flow)[0]
    out = _run("BilinearSampler", {}, data=data, grid=grid)[0]
    np.testing.assert_allclose(out[0, 0], [[4, 3, 6, 0], [8, 8, 9, 0], [4, 1, 5, 0],
                                           [0, 1, 3, 0]], rtol=1e-6)


# ---------------------------------------------------------------------------
# values: kernel corner cases
# ---------------------------------------------------------------------------
def test_box_nms_topk_background_and_center_output():
    # [id, score, xmin, ymin, xmax, ymax]; class 0 is background here
    x = f32([[[0, 0.95, 0.0, 0.0, 1.0, 1.0],
              [1, 0.90, 0.0, 0.0, 1.0, 1.0],
              [1, 0.85, 0.0, 0.0, 0.98, 0.98],
              [2, 0.80, 2.0, 2.0, 4.0, 3.0],
              [2, 0.10, 5.0, 5.0, 6.0, 6.0]]])
    out = _run("_contrib_box_nms", dict(id_index=0, background_id=0, topk=3,
                                        out_format="center"), data=x)[0]
    # background dropped; of the top 3 valid boxes the 2nd overlaps the 1st (same class)
    np.testing.assert_allclose(out[0, 0], [1, 0.90, 0.5, 0.5, 1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(out[0, 1], [2, 0.80, 3.0, 2.5, 2.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(out[0, 2:], -1)      # the 0.10 box was beyond topk


def test_box_nms_valid_thresh_and_per_batch():
    x = f32([[[0, 0.2, 0, 0, 1, 1], [0, 0.9, 0, 0, 1, 1]],
             [[0, 0.5, 0, 0, 1, 1], [0, 0.6, 2, 2, 3, 3]]])
    out, rec = _run("_contrib_box_nms", dict(valid_thresh=0.3), all_outputs=True, data=x)
    np.testing.assert_allclose(out[0], [[0, 0.9, 0, 0, 1, 1], [-1] * 6], rtol=1e-6)
    np.testing.assert_allclose(out[1], [[0, 0.6, 2, 2, 3, 3], [0, 0.5, 0, 0, 1, 1]], rtol=1e-6)
    np.testing.assert_array_equal(rec[..., 0], [[1, -1], [3, 2]])


def test_multibox_detection_topk_keeps_values_with_id_minus_one():
    # 3 anchors, classes (background, a, b); zero offsets decode to the anchors
    anchors = f32([[[0.1, 0.1, 0.5, 0.5], [0.1, 0.1, 0.5, 0.52], [0.6, 0.6, 0.9, 0.9]]])
    cls = f32([[[0.1, 0.2, 0.3], [0.5, 0.7, 0.1], [0.4, 0.1, 0.6]]])
    loc = np.zeros((1, 12), np.float32)
    out = _run("_contrib_MultiBoxDetection", dict(nms_topk=2), cls_prob=cls, loc_pred=loc,
               anchor=anchors)[0][0]
    # scores: anchor0 a=0.5, anchor1 a=0.7, anchor2 b=0.6; sorted 0.7, 0.6 kept by topk
    np.testing.assert_allclose(out[0], [0, 0.7, 0.1, 0.1, 0.5, 0.52], rtol=1e-6)
    np.testing.assert_allclose(out[1], [1, 0.6, 0.6, 0.6, 0.9, 0.9], rtol=1e-6)
    # the third valid row (compaction order: anchor 2) is beyond nms_topk: id -1, values kept
    np.testing.assert_allclose(out[2], [-1, 0.6, 0.6, 0.6, 0.9, 0.9], rtol=1e-6)


def test_multibox_prior_steps_offsets_and_clip():
    out = _run("_contrib_MultiBoxPrior", dict(sizes=(0.5, 0.8), ratios=(1, 4), clip=True),
               data=np.zeros((1, 1, 2, 1), np.float32))[0]
    assert out.shape == (1, 6, 4)
    # cell (0, 0): centre (0.5, 0.25); size 0.5 at ratio 1 -> half width 0.5*2/1/2
    np.testing.assert_allclose(out[0, 0], [0.0, 0.0, 1.0, 0.5], rtol=1e-6)
    # ratio 4 at size 0.5: half width 0.5*2*2/2 = 1, half height 0.5/2/2 = 0.125
    np.testing.assert_allclose(out[0, 2], [0.0, 0.125, 1.0, 0.375], rtol=1e-6)


def test_proposal_sort_matches_libstdcxx_introsort_on_ties():
    keys = np.array([0.9, -1, 0.3, -1, 0.5], np.float32)
    assert _introsort_desc(keys) == [0, 4, 2, 1, 3]          # <= 16: insertion sort
    # 17 equal keys: one median-of-three partition, then insertion sort (traced by hand
    # from libstdc++'s __introsort_loop / __unguarded_partition)
    assert _introsort_desc(np.zeros(17, np.float32)) == [8, 16, 15, 14, 13, 12, 11, 10, 9,
                                                        0, 7, 6, 5, 4, 3, 2, 1]
    rng = np.random.default_rng(0)
    keys = rng.permutation(100).astype(np.float32)
    for depth in (None, 0):
        assert _introsort_desc(keys, depth) == list(np.argsort(-keys))


@pytest.mark.parametrize("case", ["distinct", "ties_below_cut", "ties_straddle_cut",
                                  "ties_in_top", "nan"])
def test_proposal_top_order_is_the_introsort_prefix(case):
    """The numpy fast path and the replay agree with the full replay (the old code) on
    which pre_nms_top_n boxes come first, and in what order."""
    rng = np.random.default_rng(3)
    keys = rng.permutation(3000).astype(np.float32) / 3000
    n = 500
    if case == "ties_below_cut":             # filtered boxes' -1 scores, all past the cut
        keys[rng.choice(np.flatnonzero(keys < 0.5), 900, replace=False)] = -1
    elif case == "ties_straddle_cut":        # fewer valid boxes than the cut
        keys[rng.choice(3000, 2700, replace=False)] = -1
    elif case == "ties_in_top":              # saturated scores among the best
        keys[rng.choice(np.flatnonzero(keys > 0.9), 40, replace=False)] = 1.0
    elif case == "nan":
        keys[[5, 700]] = np.nan
    np.testing.assert_array_equal(_top_desc(keys, n), _introsort_desc(keys)[:n])
    np.testing.assert_array_equal(_top_desc(keys, len(keys)), _introsort_desc(keys))
    assert _top_desc(keys[:0], n).size == 0


def test_deformable_conv_zero_offset_is_convolution():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    off = np.zeros((2, 2 * 9 * 2, 3, 3), np.float32)
    out = _run("_contrib_DeformableConvolution",
               dict(kernel=(3, 3), num_filter=6, num_group=2, num_deformable_group=2,
                    stride=(2, 2), pad=(1, 1)),
               data=x, offset=off, weight=w, bias=b)[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 6, 3, 3), np.float64)
    for f in range(6):
        g = f // 3
        for i in range(3):
            for j in range(3):
                patch = xp[:, 2 * g:2 * g + 2, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
                ref[:, f, i, j] = (patch * w[f]).sum(axis=(1, 2, 3)) + b[f]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_deformable_conv_samples_outside_read_zero():
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    off = np.zeros((1, 2, 3, 3), np.float32)
    off[0, 0, 0, 0] = -0.5       # row -0.5: outside [0, H) -> 0 (MXNet's CPU rule)
    off[0, 1, 2, 2] = 0.5        # column 2.5: last column, reads the border value
    out = _run("_contrib_DeformableConvolution", dict(kernel=(1, 1), num_filter=1,
                                                      no_bias=True),
               data=x, offset=off, weight=w)[0]
    assert out[0, 0, 0, 0] == 0 and out[0, 0, 2, 2] == 1 and out[0, 0, 1, 1] == 1


def test_roi_align_negative_batch_index_gives_zeros():
    x = np.ones((1, 2, 4, 4), np.float32)
    out = _run("_contrib_ROIAlign", dict(pooled_size=(2, 2), spatial_scale=1.0),
               data=x, rois=f32([[-1, 0, 0, 3, 3], [0, 0, 0, 3, 3]]))[0]
    np.testing.assert_array_equal(out[0], 0)
    np.testing.assert_allclose(out[1], 1, rtol=1e-6)


def test_quantize_requantize_dequantize_ranges():
    x = f32([[-1.0, -0.5, 0.0, 0.25, 1.5]])
    q, lo, hi = _run("_contrib_quantize_v2", {}, data=x)
    np.testing.assert_array_equal(q, [[-85, -42, 0, 21, 127]])     # rint(x * 127.5 / 1.5)
    assert (lo[0], hi[0]) == (np.float32(-1.5), np.float32(1.5))
    q, lo, hi = _run("_contrib_quantize_v2", dict(out_type="uint8"), data=x)
    np.testing.assert_array_equal(q, [[0, 0, 0, 43, 255]])         # negatives saturate to 0
    assert (lo[0], hi[0]) == (np.float32(-1.0), np.float32(1.5))   # min reported, not used
    y = _run("_contrib_dequantize", {}, data=np.array([[-128, 127]], np.int8),
             min_range=f32([-2.0]), max_range=f32([1.0]))[0]
    np.testing.assert_allclose(y, [[-128 * 2 / 127.5, 127 * 2 / 127.5]], rtol=1e-6)
    q, lo, hi = _run("_contrib_requantize", dict(out_type="uint8", min_calib_range=0.0,
                                                 max_calib_range=2.0),
                     data=np.array([2 ** 30, -5], np.int32), min_range=f32([-4.0]),
                     max_range=f32([4.0]))
    # 2**30 stands for 2.0 in the [-4, 4] int32 range -> 255 in the uint8 range [0, 2]
    np.testing.assert_array_equal(q, [255, 0])
    assert (lo[0], hi[0]) == (0.0, np.float32(2.0))


def test_attention_matmuls_match_per_head_loops():
    rng = np.random.default_rng(2)
    seq, batch, heads, hd = 3, 2, 2, 4
    qkv = rng.standard_normal((seq, batch, 3 * heads * hd)).astype(np.float32)
    scores = _run("_contrib_interleaved_matmul_selfatt_qk", dict(heads=heads),
                  queries_keys_values=qkv)[0]
    att = rng.random((batch * heads, seq, seq)).astype(np.float32)
    ctx = _run("_contrib_interleaved_matmul_selfatt_valatt", dict(heads=heads),
               queries_keys_values=qkv, attention=att)[0]
    r = qkv.reshape(seq, batch, heads, 3, hd)
    for b in range(batch):
        for h in range(heads):
            q, k, v = r[:, b, h, 0], r[:, b, h, 1], r[:, b, h, 2]
            np.testing.assert_allclose(scores[b * heads + h], q @ k.T / np.sqrt(hd), rtol=1e-5)
            np.testing.assert_allclose(ctx[:, b, h * hd:(h + 1) * hd], att[b * heads + h] @ v,
                                       rtol=1e-5)
    kv = rng.standard_normal((5, batch, 2 * heads * hd)).astype(np.float32)
    qs = rng.standard_normal((seq, batch, heads * hd)).astype(np.float32)
    sc = _run("_contrib_interleaved_matmul_encdec_qk", dict(heads=heads), queries=qs,
              keys_values=kv)[0]
    assert sc.shape == (batch * heads, seq, 5)
    kr = kv.reshape(5, batch, heads, 2, hd)
    np.testing.assert_allclose(sc[3], qs[:, 1, 4:] @ kr[:, 1, 1, 0].T / 2, rtol=1e-5)


def test_correlation_abs_difference_with_kernel_matches_loops():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 2, 7, 7)).astype(np.float32)
    b = rng.standard_normal((1, 2, 7, 7)).astype(np.float32)
    attrs = dict(kernel_size=3, max_displacement=2, stride1=2, stride2=2, pad_size=2,
                 is_multiply=False)
    out = _run("Correlation", attrs, data1=a, data2=b)[0]
    pa = np.pad(a, ((0, 0), (0, 0), (2, 2), (2, 2)))
    pb = np.pad(b, ((0, 0), (0, 0), (2, 2), (2, 2)))
    # border = max_displacement + kernel radius = 3 -> ceil((11 - 6) / 2) = 3 positions
    assert out.shape == (1, 9, 3, 3)
    for tc in range(9):
        dy, dx = (tc // 3 - 1) * 2, (tc % 3 - 1) * 2
        for i in range(3):
            for j in range(3):
                y1, x1 = i * 2 + 2, j * 2 + 2          # window top-left: i*stride1 + max_disp
                wa = pa[0, :, y1:y1 + 3, x1:x1 + 3]
                wb = pb[0, :, y1 + dy:y1 + dy + 3, x1 + dx:x1 + dx + 3]
                np.testing.assert_allclose(out[0, tc, i, j], np.abs(wa - wb).sum() / 18,
                                           rtol=1e-5)
