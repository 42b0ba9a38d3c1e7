"""Tensor manipulation, indexing, reduction, sorting, creation and sequence ops.

Behaviour the MXNet corpus cases do not pin down: MXNet's reshape codes with
``reverse``, backward shape inference (reshape, concat, legacy ``shape=(0,
32)`` creation ops), out-of-range index rules, hidden outputs, dtype rules
and attribute validation.  Expected values are hand-computed from MXNet's
documented semantics.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Graph, Node
from mxc.errors import (AttributeInvalidError, AttributeRequiredError, DTypeError,
                        ExecutionError, ShapeError)


def graph_of(op: str, attrs: dict | None = None, inputs=("data",)) -> Graph:
    """A one-operator graph: variables named *inputs* feeding node ``op``."""
    vs = [Node(None, name) for name in inputs]
    node = Node(op, "op", {k: str(v) for k, v in (attrs or {}).items()},
                [Entry(v, 0) for v in vs])
    return Graph([*vs, node], [Entry(node, i) for i in range(node.num_visible_outputs())])


def run(op: str, attrs: dict | None = None, **feeds):
    g = graph_of(op, attrs, tuple(feeds))
    outs = run_graph(g, {k: np.asarray(v) for k, v in feeds.items()})
    return outs[0] if len(outs) == 1 else outs


def shapes(op: str, attrs: dict | None, given: dict, inputs=None, out=None):
    """(input shapes by name, output shape) inferred from *given* and a known output.

    A known output shape is pinned through ``where``, whose x, y and output
    share one shape, so the test only depends on this module's ops.
    """
    g = graph_of(op, attrs, inputs or tuple(given))
    node = g.outputs[0].node
    if out is not None:
        cond = Node(None, "cond")
        known = Node(None, "known_out", {"__shape__": str(out)})
        sink = Node("where", "sink", {}, [Entry(cond, 0), Entry(node, 0), Entry(known, 0)])
        g = Graph([*g.nodes, cond, known, sink], [Entry(sink, 0)])
    res = infer_shapes(g, given)
    ins = {e.node.name: res.get(e.key) for e in node.inputs}
    return ins, res.get((node, 0))


# ---------------------------------------------------------------------------
# Reshape codes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("src, spec, reverse, want", [
    # MXNet's documented examples
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
])
def test_reshape_codes(src, spec, reverse, want):
    x = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src)
    _, out = shapes("Reshape", {"shape": spec, "reverse": reverse}, {"data": src})
    assert out == want
    y = run("Reshape", {"shape": spec, "reverse": reverse}, data=x)
    np.testing.assert_array_equal(y, x.reshape(want))


def test_reshape_infers_unknown_input_extent_from_output():
    # MXNet fills the one unknown input extent once the output is known
    ins, out = shapes("Reshape", {"shape": (-1, 32)}, {"data": (None, 4, 8)}, out=(6, 32))
    assert ins["data"] == (6, 4, 8)
    assert out == (6, 32)


def test_reshape_unknown_extent_propagates_forward():
    ins, out = shapes("Reshape", {"shape": (0, -1)}, {"data": (None, 4, 8)})
    assert out == (None, None)
    ins, out = shapes("Reshape", {"shape": (0, -3)}, {"data": (None, 4, 8)})
    assert out == (None, 32)


def test_reshape_size_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match="Reshape"):
        shapes("Reshape", {"shape": (5, -1)}, {"data": (2, 3, 4)})


@pytest.mark.parametrize("spec", [(-1, -1), (2, -5), (-4, 2)])
def test_reshape_invalid_codes_rejected(spec):
    with pytest.raises(AttributeInvalidError, match="shape"):
        graph_of("Reshape", {"shape": spec}).outputs[0].node.params


def test_flatten_batch_flows_back():
    ins, out = shapes("Flatten", None, {"data": (None, 3, 4)}, out=(5, 12))
    assert ins["data"] == (5, 3, 4)


# ---------------------------------------------------------------------------
# legacy shape=(0, ...) creation ops: batch inferred from consumers
# ---------------------------------------------------------------------------
def test_zeros_batch_inferred_from_consumer_and_run():
    data = Node(None, "data")
    zeros = Node("_zeros", "state", {"shape": "(0, 3)", "dtype": "float32"})
    cat = Node("Concat", "cat", {"num_args": "2", "dim": "1"},
               [Entry(data, 0), Entry(zeros, 0)])
    g = Graph([data, zeros, cat], [Entry(cat, 0)])
    res = infer_shapes(g, {"data": (4, 2)})
    assert res[(zeros, 0)] == (4, 3)
    assert res[(cat, 0)] == (4, 5)
    x = np.ones((4, 2), np.float32)
    (y,) = run_graph(g, {"data": x})
    np.testing.assert_array_equal(y, np.concatenate([x, np.zeros((4, 3), np.float32)], 1))


def test_zeros_shape_left_unknown_without_consumer_information():
    g = graph_of("_zeros", {"shape": (0, 32)}, inputs=())
    res = infer_shapes(g, {})
    assert res[g.outputs[0].key] == (None, 32)
    with pytest.raises(ShapeError, match="not fully known"):
        run_graph(g, {})


def test_arange_infer_range_takes_length_from_consumer():
    cond = Node(None, "cond")
    rng = Node("_arange", "rng", {"start": "2", "step": "3", "infer_range": "True"})
    y = Node(None, "y")
    sink = Node("where", "w", {}, [Entry(cond, 0), Entry(rng, 0), Entry(y, 0)])
    g = Graph([cond, rng, y, sink], [Entry(sink, 0)])
    (out,) = run_graph(g, {"cond": np.ones(5, np.float32), "y": np.zeros(5, np.float32)})
    np.testing.assert_array_equal(out, [2, 5, 8, 11, 14])


def test_arange_single_value_is_stop_and_int_dtype():
    out = run("_arange", {"start": 4, "dtype": "int32"})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [0, 1, 2, 3])
    out = run("_arange", {"start": 0, "stop": 2.5, "step": 0.5, "repeat": 2})
    np.testing.assert_array_equal(out, [0, 0, .5, .5, 1, 1, 1.5, 1.5, 2, 2])


def test_full_int_dtype_truncates_value():
    out = run("_full", {"shape": (2,), "value": -2.7, "dtype": "int32"})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [-2, -2])


# ---------------------------------------------------------------------------
# joins and splits
# ---------------------------------------------------------------------------
def test_concat_infers_missing_input_extent_from_output():
    ins, out = shapes("Concat", {"num_args": 2, "dim": 1}, {"a": (2, 3)},
                      inputs=("a", "b"), out=(2, 7))
    assert ins == {"a": (2, 3), "b": (2, 4)}


def test_concat_input_names_and_rank_check():
    g = graph_of("Concat", {"num_args": 3}, inputs=("x", "y", "z"))
    node = g.outputs[0].node
    assert node.opdef.input_names(node.params) == ["arg0", "arg1", "arg2"]
    with pytest.raises(ShapeError, match="rank"):
        infer_shapes(g, {"x": (2, 3), "y": (2, 3, 1)})


def test_slice_channel_names_and_backward_shape():
    g = graph_of("SliceChannel", {"num_outputs": 1}, inputs=("data",))
    node = g.outputs[0].node
    assert g.list_outputs() == ["op_output0"]
    ins, _ = shapes("SliceChannel", {"num_outputs": 2, "axis": 1, "squeeze_axis": True},
                    {"data": None}, out=(3, 4))
    assert ins["data"] == (3, 2, 4)
    assert node.num_outputs() == 1


def test_split_v2_indices_and_sections():
    x = np.arange(10, dtype=np.float32)
    a, b, c = run("_split_v2", {"indices": (0, 2, 7), "axis": 0}, data=x)
    np.testing.assert_array_equal(a, [0, 1])
    np.testing.assert_array_equal(c, [7, 8, 9])
    parts = run("_split_v2", {"indices": (), "sections": 5, "axis": 0}, data=x)
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_reverse_rejects_negative_axis():
    with pytest.raises(ShapeError, match="negative"):
        shapes("reverse", {"axis": -1}, {"data": (2, 3)})


def test_pad_reflect_and_constraints():
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    y = run("Pad", {"mode": "reflect", "pad_width": (0, 0, 0, 0, 1, 1, 2, 0)}, data=x)
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 0)], "reflect"))
    with pytest.raises(ShapeError, match="first two axes"):
        shapes("Pad", {"mode": "edge", "pad_width": (1, 0, 0, 0, 0, 0, 0, 0)},
               {"data": (1, 1, 3, 3)})
    with pytest.raises(AttributeRequiredError, match="mode"):
        graph_of("Pad", {"pad_width": (0,) * 8}).outputs[0].node.params


def test_crop_like_second_input():
    x = np.arange(2 * 5 * 6, dtype=np.float32).reshape(1, 2, 5, 6)
    like = np.zeros((1, 1, 3, 2), np.float32)
    y = run("Crop", {"num_args": 2, "offset": (1, 3)}, data=x, like=like)
    np.testing.assert_array_equal(y, x[:, :, 1:4, 3:5])
    with pytest.raises(AttributeInvalidError, match="num_args"):
        graph_of("Crop", {"num_args": 3}).outputs[0].node.params


# ---------------------------------------------------------------------------
# slicing
# ---------------------------------------------------------------------------
def test_slice_negative_steps_mxnet_example():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    y = run("slice", {"begin": (None, 0), "end": (None, 3), "step": (-1, 2)}, data=x)
    np.testing.assert_array_equal(y, [[9, 11], [5, 7], [1, 3]])


def test_slice_clamps_and_empty_ranges():
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(run("slice", {"begin": (-10,), "end": (10,)}, data=x), x)
    assert run("slice", {"begin": (3,), "end": (1,)}, data=x).shape == (0,)
    np.testing.assert_array_equal(run("slice", {"begin": (3,), "end": (None,), "step": (-2,)},
                                      data=x), [3, 1])
    with pytest.raises(AttributeInvalidError, match="step"):
        graph_of("slice", {"begin": (0,), "end": (1,), "step": (0,)}).outputs[0].node.params


# ---------------------------------------------------------------------------
# indexing rules
# ---------------------------------------------------------------------------
def test_take_modes():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([-1, 5, 1.7], np.float32)
    np.testing.assert_array_equal(run("take", {"mode": "clip"}, a=a, indices=idx),
                                  a[[0, 3, 1]])
    np.testing.assert_array_equal(run("take", {"mode": "wrap"}, a=a, indices=idx),
                                  a[[3, 1, 1]])
    with pytest.raises(ExecutionError, match="out-of-bound"):
        run("take", {"mode": "raise"}, a=a, indices=idx)
    with pytest.raises(AttributeInvalidError, match="mode"):
        graph_of("take", {"mode": "nearest"}, ("a", "indices")).outputs[0].node.params


def test_pick_wrap_and_one_hot_out_of_range():
    x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    y = run("pick", {"axis": 1, "mode": "wrap"}, data=x, index=np.array([2, -1, -2], np.float32))
    np.testing.assert_array_equal(y, [1, 4, 5])
    y = run("one_hot", {"depth": 3}, indices=np.array([-1, 1, 3], np.float32))
    np.testing.assert_array_equal(y, [[0, 0, 0], [0, 1, 0], [0, 0, 0]])


def test_embedding_weight_shape_and_dtype_from_attrs():
    ins, out = shapes("Embedding", {"input_dim": 7, "output_dim": 3}, {"data": (2, 5)},
                      inputs=("data", "weight"))
    assert ins["weight"] == (7, 3) and out == (2, 5, 3)
    g = graph_of("Embedding", {"input_dim": 7, "output_dim": 3, "dtype": "float16"},
                 ("data", "weight"))
    types = infer_types(g, {"data": "int32"})
    assert types[(g.nodes[1], 0)] == "float16"
    assert types[g.outputs[0].key] == "float16"
    with pytest.raises(AttributeInvalidError, match="input_dim"):
        graph_of("Embedding", {"input_dim": 0, "output_dim": 3}).outputs[0].node.params


def test_gather_nd_negative_indices_wrap_once():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = run("gather_nd", data=x, indices=np.array([[-1, 0], [-3, 2]], np.float32))
    np.testing.assert_array_equal(y, [x[1, 0], x[0, 2]])


def test_where_with_row_condition():
    x = np.ones((3, 2), np.float32)
    y = np.zeros((3, 2), np.float32)
    out = run("where", condition=np.array([0, -0.5, 2], np.float32), x=x, y=y)
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [1, 1]])


def test_batch_take_requires_int32_indices():
    g = graph_of("batch_take", None, ("a", "indices"))
    with pytest.raises(DTypeError, match="int32"):
        infer_types(g, {"a": "float32", "indices": "float32"})


# ---------------------------------------------------------------------------
# reductions, sorting, casts: shapes and dtypes
# ---------------------------------------------------------------------------
def test_reduce_exclude_and_keepdims():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = run("sum", {"axis": 1, "exclude": True}, data=x)
    np.testing.assert_array_equal(y, x.sum(axis=(0, 2)))
    _, out = shapes("sum", {"axis": (0, 2), "exclude": True, "keepdims": True},
                    {"data": (2, 3, 4)})
    assert out == (2, 1, 4)
    _, out = shapes("sum", {"axis": (0, 2), "exclude": True}, {"data": (2, 3, 4)})
    assert out == (2, 4)
    _, out = shapes("mean", {"axis": ()}, {"data": (2, 3, 4)})
    assert out == (1,)


def test_integer_mean_truncates_toward_zero():
    x = np.array([[-3, -4], [3, 4]], np.int32)
    y = run("mean", {"axis": 1}, data=x)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [-3, 3])


def test_argmax_keeps_input_dtype_and_flattens_without_axis():
    x = np.array([[1, 9, 3], [7, 2, 8]], np.int32)
    y = run("argmax", None, data=x)
    assert y.dtype == np.int32 and y.tolist() == [1]
    y = run("argmin", {"axis": 0, "keepdims": True}, data=x.astype(np.float32))
    assert y.dtype == np.float32 and y.tolist() == [[0, 1, 0]]


def test_topk_mask_flattened_and_hidden_outputs():
    x = np.array([[3, 1, 4], [1, 5, 9]], np.float32)
    mask = run("topk", {"k": 2, "ret_typ": "mask"}, data=x)
    np.testing.assert_array_equal(mask, [[1, 0, 1], [0, 1, 1]])
    idx = run("topk", {"k": 3, "axis": None, "is_ascend": True, "dtype": "int64"}, data=x)
    assert idx.dtype == np.int64 and idx.tolist() == [1, 3, 0]
    g = graph_of("topk", {"k": 2, "ret_typ": "value"})
    node = g.outputs[0].node
    assert node.num_outputs() == 2 and node.num_visible_outputs() == 1
    types = infer_types(g, {"data": "float16"})
    assert types[(node, 0)] == "float16" and types[(node, 1)] == "int32"


def test_sort_descending_and_argsort_dtype():
    x = np.array([[3, 1, 2]], np.float32)
    np.testing.assert_array_equal(run("sort", {"is_ascend": False}, data=x), [[3, 2, 1]])
    y = run("argsort", {"dtype": "int32"}, data=x)
    assert y.dtype == np.int32 and y.tolist() == [[1, 2, 0]]


def test_cast_truncates_and_amp_cast_keeps_non_float16_32():
    x = np.array([-1.7, 2.9], np.float32)
    np.testing.assert_array_equal(run("Cast", {"dtype": "int32"}, data=x), [-1, 2])
    for dtype in ("int32", "float64"):
        g = graph_of("amp_cast", {"dtype": "float16"})
        assert infer_types(g, {"data": dtype})[g.outputs[0].key] == dtype
    with pytest.raises(AttributeRequiredError, match="dtype"):
        graph_of("Cast").outputs[0].node.params


def test_shape_and_size_array_are_int64():
    g = graph_of("shape_array")
    assert infer_types(g, {"data": "float16"})[g.outputs[0].key] == "int64"
    np.testing.assert_array_equal(run("size_array", data=np.zeros((2, 5))), [10])


def test_unknown_attribute_is_rejected():
    with pytest.raises(AttributeInvalidError, match="unknown attribute 'axes'"):
        graph_of("squeeze", {"axes": 1}).outputs[0].node.params


# ---------------------------------------------------------------------------
# sequences
# ---------------------------------------------------------------------------
def test_sequence_reverse_and_last_with_lengths():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)   # (T=4, B=2)
    lens = np.array([2, 3], np.float32)
    y = run("SequenceReverse", {"use_sequence_length": True}, data=x, sequence_length=lens)
    np.testing.assert_array_equal(y, [[2, 5], [0, 3], [4, 1], [6, 7]])
    y = run("SequenceLast", {"use_sequence_length": True, "axis": 1},
            data=x.T.copy(), sequence_length=lens)  # (B, T)
    np.testing.assert_array_equal(y, [2, 5])
    y = run("SequenceMask", {"use_sequence_length": True, "value": -1},
            data=x, sequence_length=lens)
    np.testing.assert_array_equal(y, [[0, 1], [2, 3], [-1, 5], [-1, -1]])
    with pytest.raises(AttributeInvalidError, match="axis"):
        graph_of("SequenceReverse", {"axis": 1}).outputs[0].node.params
