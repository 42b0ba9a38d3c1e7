"""Rearrangements across axes: ``depth_to_space``/``space_to_depth`` (blocks
of the channel axis to and from the spatial axes, DCR order) and ``diag``
(a vector onto a diagonal, or a diagonal out of a matrix stack)."""

from __future__ import annotations

import numpy as np

from .common import attr_error, check_axis, fmt_shape, merged_shape
from .registry import Attr, OpDef, register_op, shape_error, to_int


class _BlockOp(OpDef):
    attrs = {"block_size": Attr(to_int)}

    def validate(self, p):
        if p.block_size <= 0:
            raise attr_error(p, "block_size", "must be a positive integer", op=self)


@register_op("depth_to_space")
class DepthToSpace(_BlockOp):
    """``depth_to_space``: ``(N, C, H, W) -> (N, C/b^2, H*b, W*b)`` (DCR order)."""

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        b = p.block_size
        if dshape is not None:
            if len(dshape) != 4:
                raise shape_error(p, f"depth_to_space needs a 4-D input, got {fmt_shape(dshape)}")
            n, c, h, w = dshape
            if c is not None and c % (b * b):
                raise shape_error(p, f"channels {c} are not a multiple of block_size^2 = {b * b}")
            new = (n, None if c is None else c // (b * b), None if h is None else h * b,
                   None if w is None else w * b)
            oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        b = p.block_size
        n, c, h, w = x.shape
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        return [y.reshape(n, c // (b * b), h * b, w * b)]


@register_op("space_to_depth")
class SpaceToDepth(_BlockOp):
    """``space_to_depth``: ``(N, C, H, W) -> (N, C*b^2, H/b, W/b)``."""

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        b = p.block_size
        if dshape is not None:
            if len(dshape) != 4:
                raise shape_error(p, f"space_to_depth needs a 4-D input, got {fmt_shape(dshape)}")
            n, c, h, w = dshape
            for name, d in (("height", h), ("width", w)):
                if d is not None and d % b:
                    raise shape_error(p, f"{name} {d} is not a multiple of block_size {b}")
            new = (n, None if c is None else c * b * b, None if h is None else h // b,
                   None if w is None else w // b)
            oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        b = p.block_size
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        return [y.reshape(n, c * b * b, h // b, w // b)]


@register_op("diag")
class Diag(OpDef):
    """``diag``: 1-D input -> matrix with it on diagonal ``k``; N-D -> that diagonal."""

    attrs = {"k": Attr(to_int, 0), "axis1": Attr(to_int, 0), "axis2": Attr(to_int, 1)}

    def _axes(self, p, ndim):
        a1 = check_axis(p, p.axis1, ndim, "axis1")
        a2 = check_axis(p, p.axis2, ndim, "axis2")
        if a1 == a2:
            raise shape_error(p, f"axis1 and axis2 refer to the same axis {a1}")
        return a1, a2

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return [dshape], [oshape]
        if len(dshape) == 0:
            raise shape_error(p, "diag needs an input of at least 1 dimension")
        if len(dshape) == 1:
            s = None if dshape[0] is None else dshape[0] + abs(p.k)
            new = (s, s)
        else:
            a1, a2 = self._axes(p, len(dshape))
            h, w = dshape[a1], dshape[a2]
            if h is None or w is None:
                s = None
            else:
                if p.k > 0:
                    w -= p.k
                elif p.k < 0:
                    h += p.k
                s = min(h, w)
                if s < 0:
                    raise shape_error(p, f"k={p.k} is outside the {dshape[a1]}x{dshape[a2]} "
                                         f"matrix")
            new = tuple(d for i, d in enumerate(dshape) if i not in (a1, a2)) + (s,)
        oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        if x.ndim == 1:
            return [np.diag(x, p.k)]
        a1, a2 = self._axes(p, x.ndim)
        return [np.ascontiguousarray(np.diagonal(x, p.k, a1, a2))]
