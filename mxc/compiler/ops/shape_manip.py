"""Shape manipulation: reshapes, axis permutations, dtype casts.

Ops here move or relabel elements without arithmetic: ``Reshape`` (with
MXNet's legacy special codes), ``Flatten``, ``expand_dims``, ``squeeze``,
``transpose``, ``SwapAxis`` and ``reshape_like``; plus the dtype cast ``Cast``.  The shape queries ``shape_array``/``size_array``
are in ``shape_query.py``; ``depth_to_space``, ``space_to_depth`` and ``diag``,
which move elements across axes, in ``shape_rearrange.py``.

The helpers these ops share with the other families (:func:`attr_error`,
:func:`numel`, :func:`merged_shape` ...) live in :mod:`.common`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .common import (attr_error, contiguous, fill_one_unknown, fmt_shape, is_known, merge_all,
                     merged_shape, normalize_axis, numel, same_dtype)
from .registry import (Attr, OpDef, Params, optional, register_op, shape_error, to_bool,
                       to_dtype, to_int, to_shape)

# ---------------------------------------------------------------------------
# Reshape
# ---------------------------------------------------------------------------


def reshape_shape(p: Params, spec: Sequence[int], dshape: tuple, reverse: bool) -> tuple:
    """Apply MXNet's legacy reshape codes to a (partially known) input shape.

    ``0`` copies an input extent, ``-1`` is inferred from the total size (at
    most once), ``-2`` copies all remaining extents, ``-3`` merges two
    consecutive extents and ``-4 a b`` splits one extent into ``a`` and ``b``
    (one of them may be -1).  With *reverse* the codes are matched from the
    right.  Unknown extents (None) propagate.
    """
    dims = list(dshape)
    params = list(spec)
    if reverse:
        dims.reverse()
        params.reverse()
    out: list = []
    src = 0
    inferred = -1
    i = 0
    nd = len(dims)
    while i < len(params):
        code = params[i]
        if code == 0:
            if src >= nd:
                raise shape_error(p, f"shape={tuple(spec)}: code 0 at position {i} has no input "
                                     f"dimension to copy (input {fmt_shape(dshape)})")
            out.append(dims[src])
            src += 1
        elif code == -1:
            if inferred >= 0:
                raise shape_error(p, f"shape={tuple(spec)}: at most one dimension can be -1")
            inferred = len(out)
            out.append(1)
            src += 1
        elif code == -2:
            out.extend(dims[src:])
            src = nd
        elif code == -3:
            if src + 1 >= nd:
                raise shape_error(p, f"shape={tuple(spec)}: code -3 needs two input dimensions "
                                     f"(input {fmt_shape(dshape)})")
            d1, d2 = dims[src], dims[src + 1]
            src += 2
            out.append(None if d1 is None or d2 is None else d1 * d2)
        elif code == -4:
            if i + 2 >= len(params):
                raise shape_error(p, f"shape={tuple(spec)}: code -4 must be followed by two "
                                     f"dimensions")
            if src >= nd:
                raise shape_error(p, f"shape={tuple(spec)}: code -4 has no input dimension to "
                                     f"split (input {fmt_shape(dshape)})")
            d0 = dims[src]
            src += 1
            d1, d2 = params[i + 1], params[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise shape_error(p, f"shape={tuple(spec)}: the two dimensions after -4 cannot "
                                     f"both be -1")
            if d1 <= 0 and d1 != -1 or d2 <= 0 and d2 != -1:
                raise shape_error(p, f"shape={tuple(spec)}: the dimensions after -4 must be "
                                     f"positive or -1")
            if d0 is not None:
                if d1 == -1:
                    d1 = d0 // d2
                if d2 == -1:
                    d2 = d0 // d1
                if d1 * d2 != d0:
                    raise shape_error(p, f"shape={tuple(spec)}: split dimensions {d1}, {d2} do "
                                         f"not multiply to the input dimension {d0}")
            out.append(None if d1 == -1 else d1)
            out.append(None if d2 == -1 else d2)
        elif code > 0:
            out.append(code)
            src += 1
        else:
            raise shape_error(p, f"shape={tuple(spec)}: invalid code {code} (allowed: positive "
                                 f"extents, 0, -1, -2, -3, -4)")
        i += 1
    if inferred >= 0:
        total = numel(dshape)
        rest = numel(out[:inferred] + out[inferred + 1:])
        if total is None or rest is None:
            out[inferred] = None
        else:
            if rest == 0 or total % rest:
                raise shape_error(p, f"cannot reshape {fmt_shape(dshape)} with shape="
                                     f"{tuple(spec)}: {total} elements do not divide into "
                                     f"{rest}")
            out[inferred] = total // rest
    if reverse:
        out.reverse()
    return tuple(out)


def check_same_size(p: Params, a, b, what: str) -> None:
    na, nb = numel(a) if a is not None else None, numel(b) if b is not None else None
    if na is not None and nb is not None and na != nb:
        raise shape_error(p, f"{what}: cannot reshape {fmt_shape(a)} ({na} elements) to "
                             f"{fmt_shape(b)} ({nb} elements)")


@register_op("Reshape", aliases=("reshape",))
class Reshape(OpDef):
    """``Reshape``: new shape from MXNet's special codes (0, -1, -2, -3, -4)."""

    attrs = {
        "shape": Attr(to_shape, ()),
        "reverse": Attr(to_bool, False),
        "target_shape": Attr(to_shape, ()),  # deprecated; 0 marks the one inferred dim
        "keep_highest": Attr(to_bool, False),  # deprecated with target_shape
    }

    def validate(self, p):
        codes = list(p.shape)
        if any(c < -4 for c in codes):
            raise attr_error(p, "shape", "codes below -4 do not exist (allowed: positive "
                                               "extents, 0, -1, -2, -3, -4)", op=self)
        if p.reverse:
            return  # with reverse the groups are read right to left; checked at inference
        free, i = 0, 0
        while i < len(codes):
            if codes[i] == -4:
                if i + 2 >= len(codes):
                    raise attr_error(p, "shape", "-4 must be followed by two extents", op=self)
                if codes[i + 1] == -1 and codes[i + 2] == -1:
                    raise attr_error(p, "shape", "the two extents after -4 cannot both "
                                                       "be -1", op=self)
                i += 3
                continue
            free += codes[i] == -1
            i += 1
        if free > 1:
            raise attr_error(p, "shape", "at most one dimension can be -1", op=self)

    def _out_from(self, p, dshape):
        if p.shape:
            return reshape_shape(p, p.shape, dshape, p.reverse)
        if p.target_shape:
            out = list(p.target_shape)
            start = 1 if p.keep_highest else 0
            if p.keep_highest:
                out[0] = dshape[0]
            zeros = [i for i in range(start, len(out)) if out[i] == 0]
            if len(zeros) == 1:
                rest = numel(out[:zeros[0]] + out[zeros[0] + 1:])
                total = numel(dshape)
                out[zeros[0]] = (None if rest is None or total is None or rest == 0
                                 else total // rest)
            return tuple(out)
        return None

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return list(in_shapes), list(out_shapes)
        new_out = self._out_from(p, dshape)
        if new_out is not None:
            oshape = merged_shape(p, oshape, new_out, "output shape")
        check_same_size(p, dshape, oshape, "Reshape")
        if is_known(oshape):
            dshape = fill_one_unknown(dshape, numel(oshape))
            check_same_size(p, dshape, oshape, "Reshape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        shape = self._out_from(p, x.shape)
        if shape is None or not is_known(shape):
            shape = ctx.out_shapes[0]
        return [x.reshape(shape)]


@register_op("Flatten", aliases=("flatten",))
class Flatten(OpDef):
    """``Flatten``: ``(d0, d1, ..., dk) -> (d0, d1*...*dk)``."""

    attrs = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            if len(dshape) == 0:
                raise shape_error(p, "cannot flatten a 0-D input")
            oshape = merged_shape(p, oshape, (dshape[0], numel(dshape[1:])), "output shape")
            if oshape is not None:
                # the batch extent passes back; so does one unknown trailing extent
                head = merged_shape(p, dshape[:1], oshape[:1], "input shape")
                tail = dshape[1:]
                if oshape[1] is not None:
                    tail = fill_one_unknown(tail, oshape[1])
                dshape = head + tail
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [x.reshape(x.shape[0], -1) if x.ndim else x.reshape(1, 1)]


@register_op("expand_dims", aliases=("_npi_expand_dims",))
class ExpandDims(OpDef):
    """``expand_dims``: insert a size-1 axis at ``axis`` (in ``[-ndim-1, ndim]``)."""

    attrs = {"axis": Attr(to_int)}

    def _axis(self, p, ndim):
        axis = p.axis + ndim + 1 if p.axis < 0 else p.axis
        if not 0 <= axis <= ndim:
            raise shape_error(p, f"axis={p.axis} must be in [{-ndim - 1}, {ndim}] for a "
                                 f"{ndim}-D input")
        return axis

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None and oshape is None:
            return [dshape], [oshape]
        ndim = len(dshape) if dshape is not None else len(oshape) - 1
        axis = self._axis(p, ndim)
        if dshape is not None:
            oshape = merged_shape(p, oshape, dshape[:axis] + (1,) + dshape[axis:], "output shape")
        if oshape[axis] != 1:
            raise shape_error(p, f"output {fmt_shape(oshape)} must have extent 1 at axis {axis}")
        dshape = merged_shape(p, dshape, oshape[:axis] + oshape[axis + 1:], "input shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [np.expand_dims(x, self._axis(p, x.ndim))]


@register_op("squeeze")
class Squeeze(OpDef):
    """``squeeze``: drop size-1 axes (all, or those in ``axis``); keeps at least 1 dim."""

    attrs = {"axis": Attr(optional(to_shape), None)}

    def _axes(self, p, dshape):
        nd = len(dshape)
        if p.axis is None:
            return [i for i, d in enumerate(dshape) if d == 1]
        axes = []
        for a in p.axis:
            ax = a + nd if a < 0 else a
            if not 0 <= ax < nd:
                raise shape_error(p, f"axis {a} is out of bounds for a {nd}-D input")
            if ax in axes:
                raise shape_error(p, f"duplicate value {a} in axis={p.axis}")
            if dshape[ax] is not None and dshape[ax] != 1:
                raise shape_error(p, f"cannot squeeze axis {a} of extent {dshape[ax]} (input "
                                     f"{fmt_shape(dshape)})")
            axes.append(ax)
        return axes

    def _out(self, p, dshape):
        axes = set(self._axes(p, dshape))
        out = tuple(d for i, d in enumerate(dshape) if i not in axes)
        return out if out else (1,)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None and (p.axis is not None or is_known(dshape)):
            oshape = merged_shape(p, oshape, self._out(p, dshape), "output shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [x.reshape(self._out(p, x.shape))]


@register_op("transpose")
class Transpose(OpDef):
    """``transpose``: permute axes (default: reverse them)."""

    attrs = {"axes": Attr(to_shape, ())}

    def _perm(self, p, ndim):
        if not p.axes:
            return tuple(range(ndim - 1, -1, -1))
        if len(p.axes) != ndim:
            raise shape_error(p, f"axes={p.axes} has {len(p.axes)} entries for a {ndim}-D input")
        perm = tuple(a + ndim if a < 0 else a for a in p.axes)
        if sorted(perm) != list(range(ndim)):
            raise shape_error(p, f"axes={p.axes} is not a permutation of {ndim} axes")
        return perm

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None and oshape is None:
            return [dshape], [oshape]
        ndim = len(dshape) if dshape is not None else len(oshape)
        if ndim > 6:
            raise shape_error(p, "transpose supports at most 6 dimensions")
        perm = self._perm(p, ndim)
        if dshape is not None:
            oshape = merged_shape(p, oshape, tuple(dshape[a] for a in perm), "output shape")
        back = [None] * ndim
        for i, a in enumerate(perm):
            back[a] = oshape[i]
        dshape = merged_shape(p, dshape, tuple(back), "input shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [contiguous(np.transpose(x, self._perm(p, x.ndim)))]


@register_op("SwapAxis", aliases=("swapaxes",))
class SwapAxis(OpDef):
    """``SwapAxis``: exchange axes ``dim1`` and ``dim2``."""

    attrs = {"dim1": Attr(to_int, 0), "dim2": Attr(to_int, 0)}

    def _dims(self, p, ndim):
        return (normalize_axis(p, p.dim1, ndim, "dim1"), normalize_axis(p, p.dim2, ndim, "dim2"))

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        known = dshape if dshape is not None else oshape
        if known is None:
            return [dshape], [oshape]
        a, b = self._dims(p, len(known))

        def swap(s):
            s = list(s)
            s[a], s[b] = s[b], s[a]
            return tuple(s)
        if dshape is not None:
            oshape = merged_shape(p, oshape, swap(dshape), "output shape")
        dshape = merged_shape(p, dshape, swap(oshape), "input shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        a, b = self._dims(p, x.ndim)
        return [contiguous(np.swapaxes(x, a, b))]


def _like_range(p: Params, ndim: int, side: str, begin, end) -> tuple[int, int]:
    b = 0 if begin is None else begin
    if b < 0:
        b += ndim
    e = ndim if end is None else end
    if e < 0:
        e += ndim
    if not (0 <= b < e <= ndim):
        raise shape_error(p, f"invalid {side}_begin={begin}, {side}_end={end} for a {ndim}-D "
                             f"{side}")
    return b, e


@register_op("reshape_like", aliases=("_npx_reshape_like",))
class ReshapeLike(OpDef):
    """``reshape_like``: reshape (a range of) ``lhs`` dims to (a range of) ``rhs`` dims."""

    arguments = ("lhs", "rhs")
    attrs = {
        "lhs_begin": Attr(optional(to_int), None),
        "lhs_end": Attr(optional(to_int), None),
        "rhs_begin": Attr(optional(to_int), None),
        "rhs_end": Attr(optional(to_int), None),
    }

    def _out(self, p, lshape, rshape):
        lb, le = _like_range(p, len(lshape), "lhs", p.lhs_begin, p.lhs_end)
        rb, re = _like_range(p, len(rshape), "rhs", p.rhs_begin, p.rhs_end)
        return tuple(lshape[:lb]) + tuple(rshape[rb:re]) + tuple(lshape[le:])

    def infer_shape(self, p, in_shapes, out_shapes):
        lshape, rshape = in_shapes
        oshape = out_shapes[0]
        if lshape is not None and rshape is not None:
            oshape = merged_shape(p, oshape, self._out(p, lshape, rshape), "output shape")
            check_same_size(p, lshape, oshape, "reshape_like")
        return [lshape, rshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        return same_dtype(in_types, out_types, ins=(0,))

    def forward(self, p, inputs, ctx):
        lhs, rhs = inputs
        return [lhs.reshape(self._out(p, lhs.shape, rhs.shape))]


# ---------------------------------------------------------------------------
# dtype casts
# ---------------------------------------------------------------------------


@register_op("Cast", aliases=("cast", "_npx_cast"))
class Cast(OpDef):
    """``Cast``: convert to ``dtype`` (C casts: floats truncate toward zero)."""

    attrs = {"dtype": Attr(to_dtype)}

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]])
        return [s], [s]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        return [_c_cast(inputs[0], p.dtype)]


def _c_cast(x: np.ndarray, dtype) -> np.ndarray:
    """``static_cast`` semantics: float -> integer truncates toward zero."""
    dt = np.dtype(dtype)
    if x.dtype.kind == "f" and dt.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(dt)
    if dt.kind == "b":
        return x != 0
    return x.astype(dt)
