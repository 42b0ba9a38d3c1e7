"""Every operator accepts exactly the attributes MXNet 1.9.1's attribute parser accepts.

* An op MXNet registers without a parameter struct keeps every attribute and
  reads none (gluoncv's CenterNet decoder writes ``F.zeros_like(x,
  dtype='int64')``; the output stays the input's dtype): mxc ignores unknown
  attributes of such ops, with a debug log, and refuses them for the others.
* ``None`` is taken wherever MXNet's parser takes it: ``dmlc::optional`` fields
  and shapes/tuples (``GridGenerator(target_shape=None)``: unknown rank).

Oracle: :mod:`mxnet_attr_parsers` (facts read from MXNet 1.9.1's sources).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import mxc
from mxc.compiler.ops.registry import OPS, OpDef, registered_ops, to_float_tuple, to_shape
from mxc.errors import AttributeInvalidError, ShapeError
from mxnet_attr_parsers import NO_PARAM_STRUCT, OPTIONAL_FIELDS


def _plain_ops() -> dict[str, OpDef]:
    """Registered names whose definition parses with the schema machinery (not the
    subgraph/custom ops, whose parsers keep arbitrary attributes by design)."""
    OPS.load_builtins()
    return {name: op for name, op in sorted(registered_ops().items())
            if type(op).parse_attrs is OpDef.parse_attrs}


PLAIN = _plain_ops()


def test_the_flag_is_derived_from_the_schema_once():
    for name, op in PLAIN.items():
        assert op.has_param_struct == bool(op.attrs), name


@pytest.mark.parametrize("name", sorted(NO_PARAM_STRUCT & set(PLAIN)))
def test_ops_without_a_parameter_struct_ignore_unknown_attributes(name, caplog):
    op = PLAIN[name]
    assert not op.has_param_struct
    with caplog.at_level(logging.DEBUG, logger="mxc.compiler.ops.registry"):
        p = op.parse_attrs({"dtype": "int64", "no_such_attribute": "1"})
    assert dict(p) == {}
    assert "attribute no_such_attribute='1' ignored" in caplog.text


def test_ops_with_a_parameter_struct_refuse_unknown_attributes():
    with_struct = [n for n, op in PLAIN.items() if n not in NO_PARAM_STRUCT and op.attrs]
    assert len(with_struct) > 300
    for name in with_struct:
        with pytest.raises(AttributeInvalidError, match="unknown attribute 'no_such_attribute'"):
            PLAIN[name].parse_attrs({"no_such_attribute": "1"})


def test_every_op_mxnet_registers_without_a_struct_declares_no_attributes():
    registered = NO_PARAM_STRUCT & set(PLAIN)
    assert len(registered) > 150
    assert [n for n in sorted(registered) if PLAIN[n].attrs] == []


@pytest.mark.parametrize("name", sorted(set(OPTIONAL_FIELDS) & set(PLAIN)))
def test_none_is_taken_where_mxnet_declares_an_optional_field(name):
    for field in OPTIONAL_FIELDS[name]:
        PLAIN[name].attrs[field].convert("None")  # parses (None, or () for slice's tuples)


def test_shapes_and_tuples_take_none_as_mxnets_tuple_parser_does():
    assert to_shape("None") is None and to_float_tuple("None") is None
    assert to_shape("(2, 3)") == (2, 3) and to_shape("4") == (4,)


def _node_graph(op: str, attrs: dict, shape=(2, 3), out_dtype=None):
    nodes = [{"op": "null", "name": "x", "inputs": []},
             {"op": op, "name": "y", "attrs": attrs, "inputs": [[0, 0, 0]]}]
    return mxc.sym.load_json(json.dumps({"nodes": nodes, "arg_nodes": [0],
                                         "heads": [[1, 0, 0]]}))


@pytest.mark.parametrize("op,fill", [("zeros_like", 0), ("ones_like", 1)])
def test_fill_like_with_a_dtype_keeps_the_input_dtype(op, fill):
    sym = _node_graph(op, {"dtype": "int64"})
    assert sym.infer_type(x="float32")[1] == [np.float32]
    out = sym.eval(x=np.full((2, 3), 5, np.float32))[0]
    assert out.dtype == np.float32 and (out == fill).all()
    assert json.loads(sym.tojson())["nodes"][1]["attrs"] == {"dtype": "int64"}  # kept


def test_make_loss_ignores_makeloss_and_dtype_attributes():
    sym = _node_graph("make_loss", {"dtype": "float16", "grad_scale": "2",
                                    "normalization": "whatever"})
    assert sym.infer_type(x="float32")[1] == [np.float32]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sym.eval(x=x)[0], x)
    assert sym.list_outputs() == ["y_loss"]


def test_grid_generator_warp_with_target_shape_none():
    sym = _node_graph("GridGenerator", {"transform_type": "warp", "target_shape": "None"})
    flow = np.zeros((1, 2, 3, 4), np.float32)
    assert sym.infer_shape(x=flow.shape)[1] == [(1, 2, 3, 4)]
    grid = sym.eval(x=flow)[0]
    # zero flow: the identity grid, x then y normalised to [-1, 1] (MXNet's warp formula)
    np.testing.assert_allclose(grid[0, 0, 0], [-1, -1 / 3, 1 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(grid[0, 1, :, 0], [-1, 0, 1], rtol=1e-6)


def test_an_affine_grid_needs_its_target_shape():
    sym = _node_graph("GridGenerator", {"transform_type": "affine", "target_shape": "None"})
    with pytest.raises(ShapeError, match="target_shape=None"):
        sym.infer_shape(x=(1, 6))


def test_a_required_shape_given_as_none_is_a_typed_error():
    with pytest.raises(AttributeInvalidError, match="kernel=None is a shape of unknown rank"):
        registered_ops()["Convolution"].parse_attrs({"kernel": "None", "num_filter": "4"})


def test_a_window_length_of_none_parses_and_inference_says_it_is_missing():
    nodes = [{"op": "_npi_hanning", "name": "h", "attrs": {"M": "None"}, "inputs": []}]
    sym = mxc.sym.load_json(json.dumps({"nodes": nodes, "arg_nodes": [], "heads": [[0, 0, 0]]}))
    with pytest.raises(ShapeError, match="required positional argument: 'M'"):
        sym.infer_shape()
