"""Variable-length sequence ops: ``SequenceLast``, ``SequenceMask``, ``SequenceReverse``.

Data is ``(T, B, ...)`` (``axis=0``) or ``(B, T, ...)`` (``axis=1``); with
``use_sequence_length=True`` a second input ``sequence_length`` of shape
``(B,)`` gives each batch entry's length (C-cast to an integer).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape, merged_shape
from .registry import Attr, OpDef, register_op, shape_error, to_bool, to_float, to_int


class _SequenceOp(OpDef):
    attrs = {"use_sequence_length": Attr(to_bool, False), "axis": Attr(to_int, 0)}
    allowed_axes: tuple[int, ...] = (0, 1)

    def validate(self, p):
        if p.axis not in self.allowed_axes:
            raise attr_error(p, "axis",
                             f"must be {' or '.join(map(str, self.allowed_axes))}", op=self)

    def input_names(self, p):
        return ["data", "sequence_length"] if p.use_sequence_length else ["data"]

    def _batch(self, p, dshape):
        if len(dshape) < 2:
            raise shape_error(p, f"data must have rank 2 or more, got {fmt_shape(dshape)}")
        return dshape[0] if p.axis == 1 else dshape[1]

    def _out_shape(self, p, dshape):
        return tuple(dshape)

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        oshape = out_shapes[0]
        dshape = ins[0]
        if dshape is not None:
            batch = self._batch(p, dshape)
            if p.use_sequence_length:
                ins[1] = merged_shape(p, ins[1], (batch,), "sequence_length shape")
            oshape = merged_shape(p, oshape, self._out_shape(p, dshape), "output shape")
        return ins, [oshape]

    def infer_type(self, p, in_types, out_types):
        t = in_types[0] or out_types[0]
        ins = list(in_types)
        ins[0] = t
        if len(ins) > 1 and ins[1] is None:
            ins[1] = t
        return ins, [t]

    def _lengths(self, p, inputs, batch: int, steps: int) -> np.ndarray:
        if not p.use_sequence_length:
            return np.full(batch, steps, dtype=np.int64)
        lens = inputs[1]
        if lens.dtype.kind == "f":
            return np.trunc(lens).astype(np.int64).reshape(-1)
        return lens.astype(np.int64).reshape(-1)

    @staticmethod
    def _time_major(x: np.ndarray, axis: int) -> np.ndarray:
        return x if axis == 0 else np.swapaxes(x, 0, 1)


@register_op("SequenceLast")
class SequenceLast(_SequenceOp):
    """``SequenceLast``: the last valid step of each sequence -> ``(B, ...)``."""

    def _out_shape(self, p, dshape):
        return (self._batch(p, dshape),) + tuple(dshape[2:])

    def forward(self, p, inputs, ctx):
        x = self._time_major(inputs[0], p.axis)
        steps, batch = x.shape[0], x.shape[1]
        last = self._lengths(p, inputs, batch, steps) - 1
        return [np.ascontiguousarray(x[last, np.arange(batch)])]


@register_op("SequenceMask")
class SequenceMask(_SequenceOp):
    """``SequenceMask``: steps at or beyond each length are set to ``value``."""

    attrs = dict(_SequenceOp.attrs, value=Attr(to_float, 0.0))

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        if not p.use_sequence_length:
            return [x.copy()]
        xt = self._time_major(x, p.axis)
        steps, batch = xt.shape[0], xt.shape[1]
        lens = self._lengths(p, inputs, batch, steps)
        masked = np.arange(steps)[:, None] >= lens[None, :]
        masked = masked.reshape(masked.shape + (1,) * (xt.ndim - 2))
        value = np.array(p.value).astype(x.dtype)
        out = np.where(masked, value, xt)
        return [np.ascontiguousarray(self._time_major(out, p.axis))]


@register_op("SequenceReverse")
class SequenceReverse(_SequenceOp):
    """``SequenceReverse``: reverse the first ``length`` steps of each sequence (axis 0)."""

    allowed_axes = (0,)

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        steps, batch = x.shape[0], x.shape[1]
        lens = np.clip(self._lengths(p, inputs, batch, steps), 0, steps)
        out = x.copy()
        for b in range(batch):
            n = int(lens[b])
            out[:n, b] = x[:n, b][::-1]
        return [out]
