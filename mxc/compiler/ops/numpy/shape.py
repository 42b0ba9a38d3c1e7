"""DeepNumpy shape manipulation: reshape, transpose, squeeze, moveaxis, joining,
splitting, flipping, rolling, padding, diagonals and triangles.

``_np_transpose`` and ``_np_squeeze`` subclass their legacy twins; the rest
are one NumPy expression each (:class:`._common.NumpyFunctionOp`), whose
output shapes come from running that same expression on stand-in arrays.
``_npx_reshape`` has its own codes (different from legacy ``Reshape``):
``-1`` infer, ``-2`` copy one extent, ``-3`` drop an extent of 1, ``-4`` copy
every remaining extent, ``-5`` merge two extents, ``-6 a b`` split one extent.
"""

from __future__ import annotations

import numpy as np

from ..registry import (Attr, Params, enum, optional, register_op, shape_error, to_bool,
                        to_float, to_int, to_shape)
from ..common import fill_one_unknown, merged_shape, numel
from ..shape_manip import Squeeze, Transpose
from ._common import NumpyFunctionOp, NumpyOpMixin, to_nested_ints, to_opt_axes

FAMILY = "numpy.shape"


def _register(op: str, aliases=()):
    return register_op(op, family=FAMILY, aliases=aliases)


# ---------------------------------------------------------------------------
# reshape
# ---------------------------------------------------------------------------
def _fill_minus_one(p, out: list, total: int | None) -> tuple:
    """Replace one ``-1`` in *out* by what makes the element count *total*."""
    if out.count(-1) > 1:
        raise shape_error(p, f"newshape {tuple(out)}: at most one extent can be -1")
    if -1 in out:
        rest = numel([d for d in out if d != -1])
        if total is None or rest is None:
            out[out.index(-1)] = None
        elif rest == 0 or total % rest:
            raise shape_error(p, f"cannot reshape {total} elements into {tuple(out)}")
        else:
            out[out.index(-1)] = total // rest
    return tuple(out)


def npx_reshape_shape(p: Params, codes, dshape: tuple) -> tuple:
    """The output shape of ``_npx_reshape(newshape=codes)`` on *dshape*."""
    out: list = []
    src, i = 0, 0
    codes = list(codes)
    while i < len(codes):
        c = codes[i]
        if c >= 0 or c == -1:
            out.append(c)
        elif c == -2:
            out.append(dshape[src])
            src += 1
        elif c == -3:
            if dshape[src] not in (1, None):
                raise shape_error(p, f"newshape code -3 drops extent {dshape[src]}, not 1")
            src += 1
        elif c == -4:
            out.extend(dshape[src:])
            src = len(dshape)
        elif c == -5:
            a, b = dshape[src], dshape[src + 1]
            out.append(None if a is None or b is None else a * b)
            src += 2
        elif c == -6:
            d, a, b = dshape[src], codes[i + 1], codes[i + 2]
            if a == -1 and d is not None:
                a = d // b
            if b == -1 and d is not None:
                b = d // a
            out.extend([a, b])
            src += 1
            i += 2
        else:
            raise shape_error(p, f"newshape code {c} does not exist")
        if c in (-1,) or c >= 0:
            src += 1
        i += 1
    return _fill_minus_one(p, out, numel(dshape))


class _ReshapeBase(NumpyOpMixin):
    arguments = ("a",)
    twin = "Reshape"

    def out_shape(self, p, dshape):
        raise NotImplementedError

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            oshape = merged_shape(p, oshape, self.out_shape(p, dshape), "output shape")
        if dshape is None and oshape is not None and None not in oshape:
            return list(in_shapes), [oshape]
        if dshape is not None and oshape is not None and None not in oshape:
            dshape = fill_one_unknown(tuple(dshape), numel(oshape))
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        return [x.reshape(self.out_shape(p, x.shape))]


@_register("_np_reshape")
class NpReshape(_ReshapeBase, NumpyFunctionOp):
    """``reshape(a, newshape)``: one extent may be -1; C order only."""

    attrs = {"newshape": Attr(to_shape), "order": Attr(enum("C", "F", "A"), "C")}

    def validate(self, p):
        if p.order != "C":
            raise shape_error(p, "only order='C' is supported (MXNet's own limit)")

    def out_shape(self, p, dshape):
        return _fill_minus_one(p, list(p.newshape), numel(dshape))


@_register("_npx_reshape", aliases=("_npi_reshape",))
class NpxReshape(_ReshapeBase, NumpyFunctionOp):
    """``npx.reshape`` with its special codes (see the module docstring)."""

    attrs = {"newshape": Attr(to_shape), "reverse": Attr(to_bool, False),
             "order": Attr(enum("C", "F", "A"), "C")}

    def out_shape(self, p, dshape):
        if p.reverse:   # MXNet reverses the codes and the input shape as plain lists
            out = npx_reshape_shape(p, tuple(reversed(p.newshape)), tuple(reversed(dshape)))
            return tuple(reversed(out))
        return npx_reshape_shape(p, p.newshape, tuple(dshape))


@_register("_np_transpose")
class NpTranspose(NumpyOpMixin, Transpose):
    """``transpose(a, axes)``: the legacy kernel; no ``axes`` reverses them."""
    arguments = ("a",)
    twin = "transpose"
    attrs = {"axes": Attr(lambda t: () if t.strip() in ("None", "") else to_shape(t), ())}


@_register("_np_squeeze")
class NpSqueeze(NumpyOpMixin, Squeeze):
    """``squeeze``: squeezing every extent of a (1, 1) array gives a 0-d array."""
    arguments = ("a",)
    twin = "squeeze"

    def _out(self, p, dshape):
        axes = self._axes(p, dshape)
        return tuple(d for i, d in enumerate(dshape) if i not in axes)


@_register("_np_moveaxis")
class NpMoveaxis(NumpyFunctionOp):
    arguments = ("a",)
    attrs = {"source": Attr(to_shape), "destination": Attr(to_shape)}

    def compute(self, p, arrays):
        return [np.moveaxis(arrays[0], p.source, p.destination)]


# ---------------------------------------------------------------------------
# joining and splitting
# ---------------------------------------------------------------------------
class _VarArgs(NumpyFunctionOp):
    attrs = {"num_args": Attr(to_int)}

    def input_names(self, p):
        return [f"arg{i}" for i in range(p.num_args)]


@_register("_npi_concatenate")
class NpConcatenate(_VarArgs):
    """``concatenate``; ``axis=None`` joins the flattened inputs."""
    attrs = {"num_args": Attr(to_int), "axis": Attr(optional(to_int), 0)}
    twin = "Concat"

    def output_names(self, p):
        return ["out"]

    def input_names(self, p):
        return [f"data{i}" for i in range(p.num_args)]

    def reported_input_shapes(self, p, in_shapes):
        """``axis=None``: MXNet's shape function flattens each input in place, so its
        ``infer_shape`` lists a ``(2, 3)`` argument as ``(6,)``."""
        if p.axis is not None:
            return in_shapes
        return [s if s is None or None in s else (int(np.prod(s)),) for s in in_shapes]

    def compute(self, p, arrays):
        return [np.concatenate(arrays, axis=p.axis)]


@_register("_npi_stack")
class NpStack(_VarArgs):
    attrs = {"num_args": Attr(to_int), "axis": Attr(to_int, 0)}
    twin = "stack"

    def compute(self, p, arrays):
        return [np.stack(arrays, axis=p.axis)]


for _name, _fn in (("_npi_vstack", np.vstack), ("_npi_hstack", np.hstack),
                   ("_npi_dstack", np.dstack), ("_npi_column_stack", np.column_stack)):
    _register(_name)(type(_name.strip("_").title().replace("_", ""), (_VarArgs,), {
        "compute": (lambda fn: lambda self, p, arrays: [fn(arrays)])(_fn),
        "output_names": (lambda out: lambda self, p: [out])(
            "out" if _name in ("_npi_hstack", "_npi_dstack") else "output"),
        # hstack/dstack parse MXNet's ConcatParam (an unused ``dim`` comes with it)
        "attrs": {"num_args": Attr(to_int), "dim": Attr(to_int, 1)}
        if _name in ("_npi_hstack", "_npi_dstack") else _VarArgs.attrs,
        "__module__": __name__, "__doc__": f"NumPy ``{_fn.__name__}``."}))


for _name, _n in (("_np_atleast_1d", 1), ("_np_atleast_2d", 2), ("_np_atleast_3d", 3)):
    def _atleast(self, p, arrays, _n=_n):
        fn = {1: np.atleast_1d, 2: np.atleast_2d, 3: np.atleast_3d}[_n]
        return [fn(a) for a in arrays]
    _register(_name)(type(f"NpAtleast{_n}d", (_VarArgs,), {
        "compute": _atleast, "num_outputs": lambda self, p: p.num_args,
        "input_names": lambda self, p: [f"arys{i}" for i in range(p.num_args)],
        "infer_type": lambda self, p, i, o: (list(i), list(i)),
        "__module__": __name__, "__doc__": f"NumPy ``atleast_{_n}d`` of each input."}))


class _NpSplit(NumpyFunctionOp):
    """``hsplit``/``dsplit``/``vsplit``: ``sections`` equal parts or at ``indices``."""

    attrs = {"indices": Attr(to_shape, ()), "axis": Attr(to_int, 0),
             "squeeze_axis": Attr(to_bool, False), "sections": Attr(to_int, 0)}
    fn = staticmethod(np.hsplit)

    def num_outputs(self, p):
        return p.sections if p.sections > 0 else max(len(p.indices), 1)

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [in_types[0]] * len(out_types)

    def compute(self, p, arrays):
        x = arrays[0]
        if p.sections > 0:
            parts = type(self).fn(x, p.sections)
        else:   # indices are the boundaries, the first one 0
            parts = type(self).fn(x, list(p.indices[1:]))
        if p.squeeze_axis:
            parts = [np.squeeze(a, axis=p.axis) for a in parts]
        return list(parts)


@_register("_npi_hsplit")
class NpHsplit(_NpSplit):
    fn = staticmethod(np.hsplit)


@_register("_npi_dsplit")
class NpDsplit(_NpSplit):
    fn = staticmethod(np.dsplit)


@_register("_npi_vsplit")
class NpVsplit(_NpSplit):
    fn = staticmethod(np.vsplit)


# ---------------------------------------------------------------------------
# reordering
# ---------------------------------------------------------------------------
@_register("_npi_flip")
class NpFlip(NumpyFunctionOp):
    attrs = {"axis": Attr(to_opt_axes)}
    twin = "reverse"

    def compute(self, p, arrays):
        return [np.flip(arrays[0], axis=p.axis)]


@_register("_np_roll")
class NpRoll(NumpyFunctionOp):
    attrs = {"shift": Attr(to_opt_axes, None), "axis": Attr(to_opt_axes, None)}

    def compute(self, p, arrays):
        shift = p.shift if p.shift is None or len(p.shift) != 1 or p.axis is not None \
            else p.shift[0]
        return [np.roll(arrays[0], shift, axis=p.axis)]


@_register("_npi_rot90")
class NpRot90(NumpyFunctionOp):
    attrs = {"k": Attr(to_int, 1), "axes": Attr(to_shape, (0, 1))}

    def compute(self, p, arrays):
        return [np.rot90(arrays[0], p.k, axes=p.axes)]


@_register("_npi_broadcast_to")
class NpBroadcastTo(NumpyFunctionOp):
    arguments = ("array",)
    attrs = {"shape": Attr(to_shape, ())}
    twin = "broadcast_to"

    def compute(self, p, arrays):
        return [np.broadcast_to(arrays[0], p.shape)]


@_register("_np_copy")
class NpCopy(NumpyFunctionOp):
    arguments = ("a",)
    twin = "_copy"

    def compute(self, p, arrays):
        return [np.array(arrays[0], copy=True)]


# ---------------------------------------------------------------------------
# diagonals and triangles
# ---------------------------------------------------------------------------
@_register("_np_diag")
class NpDiag(NumpyFunctionOp):
    attrs = {"k": Attr(to_int, 0)}

    def compute(self, p, arrays):
        return [np.diag(np.asarray(arrays[0]), p.k)]


@_register("_np_diagflat")
class NpDiagflat(NumpyFunctionOp):
    attrs = {"k": Attr(to_int, 0)}

    def compute(self, p, arrays):
        return [np.diagflat(np.asarray(arrays[0]), p.k)]


@_register("_np_diagonal")
class NpDiagonal(NumpyFunctionOp):
    attrs = {"offset": Attr(to_int, 0), "axis1": Attr(to_int, 0), "axis2": Attr(to_int, 1)}

    def compute(self, p, arrays):
        return [np.diagonal(arrays[0], p.offset, p.axis1, p.axis2)]


@_register("_npi_tril")
class NpTril(NumpyFunctionOp):
    attrs = {"k": Attr(to_int, 0)}

    def compute(self, p, arrays):
        return [np.tril(arrays[0], p.k)]


@_register("_npi_triu")
class NpTriu(NumpyFunctionOp):
    attrs = {"k": Attr(to_int, 0)}

    def compute(self, p, arrays):
        return [np.triu(arrays[0], p.k)]


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "maximum", "minimum")


@_register("_npi_pad")
class NpPad(NumpyFunctionOp):
    """``pad`` with MXNet's modes; ``constant_value`` fills in constant mode."""

    attrs = {"pad_width": Attr(to_nested_ints), "mode": Attr(enum(*_PAD_MODES), "constant"),
             "constant_value": Attr(to_float, 0.0),
             "reflect_type": Attr(enum("even", "odd"), "even")}

    def compute(self, p, arrays):
        x = arrays[0]
        width = p.pad_width
        if len(width) == 1 and x.ndim > 1:
            width = width * x.ndim
        if p.mode == "constant":
            return [np.pad(x, width, mode="constant", constant_values=p.constant_value)]
        if p.mode in ("reflect", "symmetric"):
            return [np.pad(x, width, mode=p.mode, reflect_type=p.reflect_type)]
        return [np.pad(x, width, mode=p.mode)]


__all__ = ["npx_reshape_shape"]
