"""DeepNumpy selection and index ops: ``where`` (tensor and scalar forms), ``delete``,
``insert``, ``diff``, ``ediff1d``, ``nonzero``, ``unique``, ``bincount``,
``diag_indices_from`` and ``npx.constraint_check``.

``delete``/``nonzero``/``unique``/``bincount`` have data-dependent output
shapes: their shape inference leaves the output unknown (as MXNet's does) and
the reference kernel computes the real result.  (MXNet 1.9.1's symbolic
executor returns an *empty* array for these under NumPy shape semantics; mxc
returns NumPy's answer.)
"""

from __future__ import annotations

import numpy as np

from ....errors import MxcError
from ..common import broadcast_shapes
from ..registry import Attr, OpDef, optional, register_op, to_bool, to_float, to_int, to_str
from ._common import NumpyFunctionOp, NumpyOpMixin, promote

FAMILY = "numpy.indexing"


def _register(op: str, aliases=()):
    return register_op(op, family=FAMILY, aliases=aliases)


# ---------------------------------------------------------------------------
# where
# ---------------------------------------------------------------------------
class _Where(NumpyOpMixin, OpDef):
    """``where(condition, x, y)`` with broadcasting; a scalar attribute replaces x or y."""

    attrs: dict = {}
    tensors = ("x", "y")   # which of x/y are inputs

    def input_names(self, p):
        return ["condition", *self.tensors]

    def _values(self, p, arrays):
        cond, *rest = arrays
        vals = dict(zip(self.tensors, rest))
        dt = self._dtype([a.dtype.name for a in rest])
        for name in ("x", "y"):
            if name not in vals:
                vals[name] = np.asarray(getattr(p, "scalar", None) if "scalar" in self.attrs
                                        else getattr(p, name), dtype=dt)
        return cond, vals["x"], vals["y"], dt

    def _dtype(self, tensor_dtypes):
        if not tensor_dtypes:
            return "float32"
        if len(tensor_dtypes) == 1:
            return tensor_dtypes[0]
        return promote(*tensor_dtypes)

    def infer_shape(self, p, in_shapes, out_shapes):
        out = in_shapes[0]
        for s in in_shapes[1:]:
            out = broadcast_shapes(p, out, s)
        return list(in_shapes), [out if out is not None else out_shapes[0]]

    def infer_type(self, p, in_types, out_types):
        ts = in_types[1:]
        if any(t is None for t in ts):
            return list(in_types), list(out_types)
        return list(in_types), [self._dtype(list(ts))]

    def forward(self, p, inputs, ctx):
        cond, x, y, dt = self._values(p, [np.asarray(a) for a in inputs])
        return [np.where(cond != 0, x, y).astype(ctx.out_dtypes[0] or dt)]


@_register("_npi_where")
class NpWhere(_Where):
    tensors = ("x", "y")


@_register("_npi_where_lscalar")
class NpWhereLScalar(_Where):
    """``where(condition, scalar, y)``."""
    tensors = ("y",)
    attrs = {"scalar": Attr(to_float, 0.0)}

    def input_names(self, p):
        return ["condition", "y"]


@_register("_npi_where_rscalar")
class NpWhereRScalar(_Where):
    """``where(condition, x, scalar)``."""
    tensors = ("x",)
    attrs = {"scalar": Attr(to_float, 0.0)}


@_register("_npi_where_scalar2")
class NpWhereScalar2(_Where):
    """``where(condition, x, y)`` with both values scalars: float32 result."""
    tensors = ()
    attrs = {"x": Attr(to_float, 0.0), "y": Attr(to_float, 0.0)}

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["float32"]


# ---------------------------------------------------------------------------
# delete / insert
# ---------------------------------------------------------------------------
def _index_of(p):
    """The index argument of delete/insert from ``int_ind`` or ``start:stop:step``."""
    if p.int_ind is not None:
        return p.int_ind
    return slice(p.start, p.stop, p.step)


_SLICE_ATTRS = {"start": Attr(optional(to_int), None), "stop": Attr(optional(to_int), None),
                "step": Attr(optional(to_int), None), "int_ind": Attr(optional(to_int), None),
                "axis": Attr(optional(to_int), None)}


@_register("_npi_delete")
class NpDelete(NumpyOpMixin, OpDef):
    """``delete(arr, obj, axis)``; ``obj`` from attributes or a third input (dynamic shape)."""

    attrs = _SLICE_ATTRS

    def input_names(self, p):
        if p.int_ind is None and p.start is None and p.stop is None and p.step is None:
            return ["arr", "obj"]
        return ["arr"]

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), list(out_shapes)   # data-dependent in general

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [in_types[0]]

    def forward(self, p, inputs, ctx):
        arr = np.asarray(inputs[0])
        obj = np.asarray(inputs[1]).astype(np.int64) if len(inputs) > 1 else _index_of(p)
        return [np.delete(arr, obj, axis=p.axis)]


class _NpInsert(NumpyFunctionOp):
    """``insert(arr, obj, values, axis)``; ``values`` is an input (``val`` an attribute)."""

    attrs = {**_SLICE_ATTRS, "val": Attr(optional(to_float), None)}

    def input_names(self, p):
        return ["arr"] + (["values"] if p.val is None else [])

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [in_types[0]]

    def reported_input_shapes(self, p, in_shapes):
        """MXNet's insert shape functions flatten ``arr`` when ``axis`` is None and
        align ``values`` to ``arr``'s rank (leading 1s; extra leading 1s dropped):
        ``v`` of ``(1,)`` into a 2-D array is reported as ``(1, 1)``."""
        out = list(in_shapes)
        arr = out[0]
        if arr is None or None in arr:
            return out
        if p.axis is None:
            arr = out[0] = (int(np.prod(arr)),)
        elif not arr:
            return out
        if p.val is None and out[1] is not None:
            v = tuple(out[1])
            out[1] = ((1,) * (len(arr) - len(v)) + v)[-len(arr):] if len(v) <= len(arr) \
                else v[len(v) - len(arr):]
        return out

    def _obj(self, p, arrays):
        return _index_of(p)

    def compute(self, p, arrays):
        arr = arrays[0]
        values = arrays[1] if p.val is None else np.asarray(p.val, arr.dtype)
        return [np.insert(arr, self._obj(p, arrays), values, axis=p.axis)]


@_register("_npi_insert_scalar")
class NpInsertScalar(_NpInsert):
    pass


@_register("_npi_insert_slice")
class NpInsertSlice(_NpInsert):
    pass


@_register("_npi_insert_tensor")
class NpInsertTensor(_NpInsert):
    """Indices as the last input (int64)."""

    def input_names(self, p):
        return super().input_names(p) + ["obj"]

    def _obj(self, p, arrays):
        return np.asarray(arrays[-1]).astype(np.int64)



# ---------------------------------------------------------------------------
# differences
# ---------------------------------------------------------------------------
@_register("_npi_diff")
class NpDiff(NumpyFunctionOp):
    arguments = ("a",)
    attrs = {"n": Attr(to_int, 1), "axis": Attr(to_int, -1)}

    def compute(self, p, arrays):
        return [np.diff(arrays[0], n=p.n, axis=p.axis)]


@_register("_npi_ediff1d")
class NpEdiff1d(NumpyFunctionOp):
    """Flattened differences with optional values before/after (scalars or inputs)."""

    attrs = {"to_begin_arr_given": Attr(to_bool, False), "to_end_arr_given": Attr(to_bool, False),
             "to_begin_scalar": Attr(optional(to_float), None),
             "to_end_scalar": Attr(optional(to_float), None)}

    def input_names(self, p):
        return ["input1"] + (["input2"] if p.to_begin_arr_given else []) + \
            (["input3"] if p.to_end_arr_given else [])

    def compute(self, p, arrays):
        x, rest = arrays[0], list(arrays[1:])
        begin = rest.pop(0) if p.to_begin_arr_given else p.to_begin_scalar
        end = rest.pop(0) if p.to_end_arr_given else p.to_end_scalar
        return [np.ediff1d(x, to_end=end, to_begin=begin)]


# ---------------------------------------------------------------------------
# data-dependent shapes
# ---------------------------------------------------------------------------
class _Dynamic(NumpyOpMixin, OpDef):
    """An op whose output extent depends on the values: shape inference stays unknown."""

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), list(out_shapes)


@_register("_npx_nonzero", aliases=("_npi_nonzero",))
class NpxNonzero(_Dynamic):
    """``(N, ndim)`` int64 coordinates of the non-zero elements (``transpose(nonzero(x))``)."""

    arguments = ("x",)

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["int64"]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        return [np.ascontiguousarray(np.transpose(np.nonzero(x))).astype(np.int64)
                .reshape(-1, max(x.ndim, 1))]


@_register("_npi_unique")
class NpUnique(_Dynamic):
    """Sorted unique values, optionally first indices, inverse map and counts (int64)."""

    arguments = ("data",)
    attrs = {"return_index": Attr(to_bool, False), "return_inverse": Attr(to_bool, False),
             "return_counts": Attr(to_bool, False), "axis": Attr(optional(to_int), None)}

    def num_outputs(self, p):
        return 1 + p.return_index + p.return_inverse + p.return_counts

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [in_types[0]] + ["int64"] * (len(out_types) - 1)

    def forward(self, p, inputs, ctx):
        res = np.unique(np.asarray(inputs[0]), return_index=p.return_index,
                        return_inverse=p.return_inverse, return_counts=p.return_counts,
                        axis=p.axis)
        res = list(res) if isinstance(res, tuple) else [res]
        return [res[0]] + [np.asarray(r).astype(np.int64).reshape(-1) for r in res[1:]]


@_register("_npi_bincount")
class NpBincount(_Dynamic):
    """Occurrences of each non-negative integer (int64), or summed ``weights`` (float)."""

    attrs = {"minlength": Attr(to_int, 0), "has_weights": Attr(to_bool, False)}

    def input_names(self, p):
        return ["data", "weights"] if p.has_weights else ["data"]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [in_types[1] if p.has_weights else "int64"]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0]).astype(np.int64)
        if p.has_weights:
            w = np.asarray(inputs[1])
            return [np.bincount(x, w, p.minlength).astype(w.dtype)]
        return [np.bincount(x, minlength=p.minlength).astype(np.int64)]


@_register("_npi_diag_indices_from")
class NpDiagIndicesFrom(NumpyFunctionOp):
    """``(ndim, n)`` int64 indices of the main diagonal of a square array."""

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["int64"]

    def compute(self, p, arrays):
        x = arrays[0]
        return [np.asarray(np.diag_indices_from(x), dtype=np.int64).reshape(x.ndim, -1)]


class ConstraintViolated(MxcError):
    """``npx.constraint_check`` found a false element."""


@_register("_npx_constraint_check")
class NpxConstraintCheck(NumpyOpMixin, OpDef):
    """0-d ``True`` when every element is true; otherwise the run fails with ``msg``."""

    attrs = {"msg": Attr(to_str, "Constraint violated!")}

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [()]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["bool"]

    def forward(self, p, inputs, ctx):
        if not np.all(np.asarray(inputs[0])):
            raise ConstraintViolated(f"operator _npx_constraint_check (node {p.node_ref}): "
                                     f"{p.msg}")
        return [np.asarray(True)]


__all__ = ["ConstraintViolated"]
