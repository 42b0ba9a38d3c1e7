"""Joining, splitting, repeating, flipping, padding and cropping tensors.

``Concat``, ``stack``, ``SliceChannel`` (``split``), ``_split_v2``, ``tile``,
``repeat``, ``reverse`` (``flip``), ``Pad`` and ``Crop``.
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, check_axis, fmt_shape, merge_all, merged_shape, normalize_axis, numel
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool,
                       to_float, to_int, to_shape)


def _num_args_names(n: int) -> list[str]:
    return [f"arg{i}" for i in range(n)]


class _VarArgOp(OpDef):
    """An op whose inputs are ``arg0 .. arg{num_args-1}``."""

    def input_names(self, p):
        return _num_args_names(p.num_args)

    def validate(self, p):
        if p.num_args < 1:
            raise attr_error(p, "num_args", "must be at least 1", op=self)


@register_op("Concat", aliases=("concat",))
class Concat(_VarArgOp):
    """``Concat``: join ``num_args`` inputs along ``dim``."""

    attrs = {"num_args": Attr(to_int), "dim": Attr(to_int, 1)}

    def infer_shape(self, p, in_shapes, out_shapes):
        known = [s for s in list(in_shapes) + list(out_shapes) if s is not None]
        if not known:
            return list(in_shapes), list(out_shapes)
        ndim = len(known[0])
        if ndim == 0:
            raise shape_error(p, "zero-dimensional arrays cannot be concatenated")
        for s in known:
            if len(s) != ndim:
                raise shape_error(p, f"all inputs and the output must have the same rank, got "
                                     f"{', '.join(fmt_shape(x) for x in known)}")
        axis = check_axis(p, p.dim, ndim, "dim")

        def off_axis(s):
            return None if s is None else s[:axis] + (None,) + s[axis + 1:]
        common = merge_all(p, [off_axis(s) for s in known], "inputs (off the concat axis)")
        ins = []
        for s in in_shapes:
            s = s if s is not None else off_axis(common)
            ins.append(merged_shape(p, s, off_axis(common), "input shape"))
        sizes = [s[axis] for s in ins]
        total = None if None in sizes else sum(sizes)
        out = merged_shape(p, out_shapes[0], common[:axis] + (total,) + common[axis + 1:],
                         "output shape")
        # one input of unknown extent along the axis follows from the output
        missing = [i for i, d in enumerate(sizes) if d is None]
        if len(missing) == 1 and out[axis] is not None:
            rest = sum(d for d in sizes if d is not None)
            if out[axis] < rest:
                raise shape_error(p, f"output extent {out[axis]} along dim {axis} is smaller "
                                     f"than the known inputs' {rest}")
            s = ins[missing[0]]
            ins[missing[0]] = s[:axis] + (out[axis] - rest,) + s[axis + 1:]
        return ins, [out]

    def forward(self, p, inputs, ctx):
        axis = check_axis(p, p.dim, inputs[0].ndim, "dim")
        return [np.concatenate(inputs, axis=axis)]


@register_op("stack")
class Stack(_VarArgOp):
    """``stack``: join ``num_args`` equally shaped inputs along a new ``axis``."""

    attrs = {"axis": Attr(to_int, 0), "num_args": Attr(to_int)}

    def infer_shape(self, p, in_shapes, out_shapes):
        data = merge_all(p, list(in_shapes), "stacked inputs")
        oshape = out_shapes[0]
        if data is None and oshape is not None:
            axis = check_axis(p, p.axis, len(oshape))
            data = oshape[:axis] + oshape[axis + 1:]
        if data is None:
            return list(in_shapes), list(out_shapes)
        axis = check_axis(p, p.axis, len(data) + 1)
        oshape = merged_shape(p, oshape, data[:axis] + (p.num_args,) + data[axis:], "output shape")
        data = merged_shape(p, data, oshape[:axis] + oshape[axis + 1:], "input shape")
        return [data] * len(in_shapes), [oshape]

    def forward(self, p, inputs, ctx):
        axis = check_axis(p, p.axis, inputs[0].ndim + 1)
        return [np.stack(inputs, axis=axis)]


class _SplitBase(OpDef):
    """Shared shape logic: output i takes ``[starts[i], ends[i])`` along the axis."""

    attrs: dict = {}

    def _axis(self, p, ndim):
        return normalize_axis(p, p.axis, ndim)

    def _bounds(self, p, extent):
        """(start, end) per output along the split axis; None when extent unknown."""
        raise NotImplementedError

    def _split_shape(self, p, dshape, start, end, axis):
        size = None if start is None or end is None else end - start
        if p.squeeze_axis:
            if size is not None and size != 1:
                raise shape_error(p, f"squeeze_axis=True needs parts of extent 1 along axis "
                                     f"{axis}, got {size}")
            return dshape[:axis] + dshape[axis + 1:]
        return dshape[:axis] + (size,) + dshape[axis + 1:]

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape = in_shapes[0]
        outs = list(out_shapes)
        n = len(outs)
        if dshape is None:
            known = next((s for s in outs if s is not None), None)
            if known is None:
                return [dshape], outs
            ndim = len(known) + (1 if p.squeeze_axis else 0)
            dshape = (None,) * ndim
        axis = self._axis(p, len(dshape))
        bounds = self._bounds(p, dshape[axis])
        for i in range(n):
            outs[i] = merged_shape(p, outs[i], self._split_shape(p, dshape, *bounds[i], axis),
                                 f"output {i} shape")
        # back-propagate the off-axis extents and, when possible, the axis extent
        off = [o[:axis] + o[axis + (0 if p.squeeze_axis else 1):] for o in outs]
        common = merge_all(p, off, "outputs (off the split axis)")
        if p.squeeze_axis:
            axis_ext = n
        else:
            sizes = [o[axis] for o in outs]
            axis_ext = None if None in sizes else sum(sizes)
        back = common[:axis] + (axis_ext,) + common[axis:]
        dshape = merged_shape(p, dshape, back, "input shape")
        if dshape[axis] is not None and any(None in b for b in bounds):
            bounds = self._bounds(p, dshape[axis])
            for i in range(n):
                outs[i] = merged_shape(p, outs[i], self._split_shape(p, dshape, *bounds[i], axis),
                                     f"output {i} shape")
        return [dshape], outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axis = self._axis(p, x.ndim)
        outs = []
        for start, end in self._bounds(p, x.shape[axis]):
            part = np.take(x, np.arange(start, end), axis=axis)
            if p.squeeze_axis:
                part = part.reshape(part.shape[:axis] + part.shape[axis + 1:])
            outs.append(part)
        return outs


@register_op("SliceChannel", aliases=("split",))
class SliceChannel(_SplitBase):
    """``SliceChannel``: split into ``num_outputs`` equal parts along ``axis``."""

    arguments = ("data",)
    attrs = {
        "num_outputs": Attr(to_int),
        "axis": Attr(to_int, 1),
        "squeeze_axis": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.num_outputs < 1:
            raise attr_error(p, "num_outputs", "must be at least 1", op=self)

    def num_outputs(self, p):
        return p.num_outputs

    def output_names(self, p):
        return [f"output{i}" for i in range(p.num_outputs)]

    def _bounds(self, p, extent):
        n = p.num_outputs
        if extent is None:
            return [(None, None)] * n
        if extent % n:
            raise shape_error(p, f"extent {extent} along axis {p.axis} is not divisible by "
                                 f"num_outputs={n}")
        step = extent // n
        return [(i * step, (i + 1) * step) for i in range(n)]


@register_op("_split_v2", aliases=("_npi_split",))
class SplitV2(_SplitBase):
    """``_split_v2``: split at boundary ``indices`` or into ``sections`` equal parts."""

    arguments = ("data",)
    attrs = {
        "indices": Attr(to_shape),
        "axis": Attr(to_int, 1),
        "squeeze_axis": Attr(to_bool, False),
        "sections": Attr(to_int, 0),
    }

    def validate(self, p):
        if p.sections < 0:
            raise attr_error(p, "sections", "must be non-negative", op=self)
        if p.sections == 0 and not p.indices:
            raise attr_error(p, "indices", "must not be empty when sections=0", op=self)

    def num_outputs(self, p):
        return p.sections if p.sections > 0 else len(p.indices)

    def _bounds(self, p, extent):
        n = self.num_outputs(p)
        if p.sections > 0:
            if extent is None:
                return [(None, None)] * n
            step = extent // p.sections
            starts = [i * step for i in range(n)]
        else:
            starts = list(p.indices)
        bounds = []
        for i in range(n):
            end = starts[i + 1] if i + 1 < n else extent
            if end is not None:
                if extent is not None and extent != 0 and not starts[i] < end <= extent:
                    raise shape_error(p, f"split part {i} [{starts[i]}, {end}) is empty or "
                                         f"outside the axis extent {extent}")
            bounds.append((starts[i], end))
        return bounds


@register_op("tile", aliases=("_npi_tile",))
class Tile(OpDef):
    """``tile``: repeat the whole array ``reps`` times per axis (numpy.tile)."""

    attrs = {"reps": Attr(to_shape)}

    def validate(self, p):
        if any(r < 0 for r in p.reps):
            raise attr_error(p, "reps", "entries must be non-negative", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return [dshape], [oshape]
        if not p.reps:
            return [dshape], [merged_shape(p, oshape, dshape, "output shape")]
        n = max(len(dshape), len(p.reps))
        d = (1,) * (n - len(dshape)) + tuple(dshape)
        r = (1,) * (n - len(p.reps)) + tuple(p.reps)
        new = tuple(None if a is None else a * b for a, b in zip(d, r))
        return [dshape], [merged_shape(p, oshape, new, "output shape")]

    def forward(self, p, inputs, ctx):
        return [np.tile(inputs[0], p.reps) if p.reps else inputs[0].copy()]


@register_op("repeat", aliases=("_np_repeat",))
class Repeat(OpDef):
    """``repeat``: repeat each element ``repeats`` times (flattening when axis is None)."""

    attrs = {"repeats": Attr(to_int), "axis": Attr(optional(to_int), None)}

    def validate(self, p):
        if p.repeats < 0:
            raise attr_error(p, "repeats", "cannot be negative", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if p.repeats == 0:
            return [dshape], [merged_shape(p, oshape, (0,), "output shape")]
        if dshape is None:
            return [dshape], [oshape]
        if p.axis is None:
            n = numel(dshape)
            new = (None if n is None else n * p.repeats,)
        else:
            axis = normalize_axis(p, p.axis, len(dshape))
            new = tuple(None if d is None else (d * p.repeats if i == axis else d)
                        for i, d in enumerate(dshape))
        return [dshape], [merged_shape(p, oshape, new, "output shape")]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        if p.repeats == 0:
            return [np.zeros((0,), dtype=x.dtype)]
        if p.axis is None:
            return [np.repeat(x.reshape(-1), p.repeats)]
        return [np.repeat(x, p.repeats, axis=normalize_axis(p, p.axis, x.ndim))]


@register_op("reverse", aliases=("flip",))
class Reverse(OpDef):
    """``reverse``: flip the element order along each of ``axis`` (non-negative axes)."""

    attrs = {"axis": Attr(to_shape)}

    def _axes(self, p, ndim):
        for a in p.axis:
            if not 0 <= a < ndim:
                raise shape_error(p, f"axis {a} must be in [0, {ndim}) (MXNet's reverse does not "
                                     f"accept negative axes)")
        return tuple(p.axis)

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]])
        if s is not None:
            self._axes(p, len(s))
        return [s], [s]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [np.ascontiguousarray(np.flip(x, self._axes(p, x.ndim)))]


@register_op("Pad", aliases=("pad",))
class Pad(OpDef):
    """``Pad``: pad a 4-D/5-D input on its spatial axes (constant, edge or reflect)."""

    attrs = {
        "mode": Attr(enum("constant", "edge", "reflect")),
        "pad_width": Attr(to_shape),
        "constant_value": Attr(to_float, 0.0),
    }

    def validate(self, p):
        if any(w < 0 for w in p.pad_width):
            raise attr_error(p, "pad_width", "entries must be non-negative", op=self)

    def _check(self, p, dshape):
        rank = len(dshape)
        if rank not in (4, 5):
            raise shape_error(p, f"Pad supports only 4-D or 5-D inputs, got {fmt_shape(dshape)}")
        if len(p.pad_width) != 2 * rank:
            raise shape_error(p, f"pad_width={p.pad_width} must have 2*{rank} entries for a "
                                 f"{rank}-D input")
        if any(p.pad_width[:4]):
            raise shape_error(p, f"pad_width={p.pad_width}: padding of the first two axes must "
                                 f"be zero")
        if p.mode == "reflect":
            for i in range(2, rank):
                d = dshape[i]
                if d is not None and (p.pad_width[2 * i] >= d or p.pad_width[2 * i + 1] >= d):
                    raise shape_error(p, "reflect padding must be smaller than the input extent")

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return [dshape], [oshape]
        self._check(p, dshape)
        w = p.pad_width
        new = tuple(None if d is None else d + w[2 * i] + w[2 * i + 1]
                    for i, d in enumerate(dshape))
        oshape = merged_shape(p, oshape, new, "output shape")
        back = tuple(None if d is None else d - w[2 * i] - w[2 * i + 1]
                     for i, d in enumerate(oshape))
        return [merged_shape(p, dshape, back, "input shape")], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        self._check(p, x.shape)
        w = [(p.pad_width[2 * i], p.pad_width[2 * i + 1]) for i in range(x.ndim)]
        if p.mode == "constant":
            value = np.array(p.constant_value).astype(x.dtype)
            return [np.pad(x, w, mode="constant", constant_values=value)]
        return [np.pad(x, w, mode=p.mode)]


@register_op("Crop")
class Crop(_VarArgOp):
    """``Crop`` (legacy): crop a 4-D input to ``h_w`` (or to the 2nd input's H, W)."""

    attrs = {
        "num_args": Attr(to_int),
        "offset": Attr(to_shape, (0, 0)),
        "h_w": Attr(to_shape, (0, 0)),
        "center_crop": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.num_args not in (1, 2):
            raise attr_error(p, "num_args", "must be 1 or 2", op=self)
        if len(p.offset) != 2:
            raise attr_error(p, "offset", "must have two entries (y, x)", op=self)
        if len(p.h_w) != 2:
            raise attr_error(p, "h_w", "must have two entries (h, w)", op=self)

    def _crop_hw(self, p, dshape, like):
        if p.num_args == 1:
            h, w = p.h_w
            for name, v, d in (("h_w[0]", h, dshape[2]), ("h_w[1]", w, dshape[3])):
                if v < 1 or (d is not None and v > d):
                    raise shape_error(p, f"crop size {name}={v} must be in [1, {d}]")
            return h, w
        if like is None:
            return None, None
        if len(like) != 4:
            raise shape_error(p, f"crop_like must be 4-D, got {fmt_shape(like)}")
        return like[2], like[3]

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return list(in_shapes), [oshape]
        if len(dshape) != 4:
            raise shape_error(p, f"Crop needs a 4-D (N, C, H, W) input, got {fmt_shape(dshape)}")
        like = in_shapes[1] if p.num_args == 2 else None
        h, w = self._crop_hw(p, dshape, like)
        oshape = merged_shape(p, oshape, (dshape[0], dshape[1], h, w), "output shape")
        return list(in_shapes), [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        h, w = self._crop_hw(p, x.shape, inputs[1].shape if p.num_args == 2 else None)
        H, W = x.shape[2], x.shape[3]
        if h > H or w > W:
            raise ValueError(f"crop size {(h, w)} exceeds the input's {(H, W)}")
        if p.center_crop:
            oy, ox = (H - h) // 2, (W - w) // 2
        else:
            oy, ox = p.offset
            if not (0 <= oy <= H - h and 0 <= ox <= W - w):
                raise ValueError(f"offset={p.offset} leaves the {H}x{W} input for a {h}x{w} "
                                 f"crop")
        return [x[:, :, oy:oy + h, ox:ox + w].copy()]

