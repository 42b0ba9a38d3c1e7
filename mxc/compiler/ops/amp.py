"""Automatic mixed precision casts: ``amp_cast`` and ``amp_multicast``.

``mx.contrib.amp`` inserts these around the ops it runs in float16/bfloat16.
Both touch float tensors only (float16, bfloat16, float32); integer and
boolean tensors pass through unchanged, as MXNet's ``AMPCastType`` says.

bfloat16 has no numpy dtype of its own; importing ``ml_dtypes`` registers
one (round-to-nearest-even conversion from float32, as mshadow's ``bf16_t``
and oneDNN do), so ``"bfloat16"`` is an ordinary dtype name everywhere in mxc.
"""

from __future__ import annotations

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16" dtype)

from ...errors import AttributeInvalidError
from .common import merge_all
from .registry import Attr, OpDef, register_op, to_bool, to_dtype, to_int

#: the float dtypes AMP casts; anything else passes through
AMP_FLOATS = ("float16", "bfloat16", "float32")
_WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4}


@register_op("amp_cast")
class AmpCast(OpDef):
    """``amp_cast``: cast float16/bfloat16/float32 input to ``dtype``; others pass unchanged."""

    attrs = {"dtype": Attr(to_dtype)}

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]])
        return [s], [s]

    def infer_type(self, p, in_types, out_types):
        t = in_types[0]
        if t is None:
            return list(in_types), list(out_types)
        return list(in_types), [p.dtype if t in AMP_FLOATS else t]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        if x.dtype.name in AMP_FLOATS:
            return [x.astype(p.dtype)]
        return [x.copy()]


@register_op("amp_multicast")
class AmpMulticast(OpDef):
    """``amp_multicast``: cast every float input to the widest float dtype among them.

    ``cast_narrow=True`` picks the narrowest instead.  Among equally wide
    dtypes (float16 and bfloat16) the first input's wins, as MXNet scans the
    inputs in order and only a strictly wider (narrower) one replaces it.
    """

    attrs = {"num_outputs": Attr(to_int), "cast_narrow": Attr(to_bool, False)}

    def validate(self, p):
        if p.num_outputs < 1:
            raise AttributeInvalidError(f"operator amp_multicast (node {p.node_ref}): "
                                        f"num_outputs must be >= 1, got {p.num_outputs}")

    def input_names(self, p):
        return [f"data_{i}" for i in range(p.num_outputs)]

    def num_outputs(self, p):
        return p.num_outputs

    def target_dtype(self, p, dtypes) -> str | None:
        """The common float dtype of the float inputs (None when none is known)."""
        target = None
        for t in dtypes:
            if t not in AMP_FLOATS:
                continue
            if target is None or (_WIDTH[t] < _WIDTH[target] if p.cast_narrow
                                  else _WIDTH[t] > _WIDTH[target]):
                target = t
        return target

    def infer_shape(self, p, in_shapes, out_shapes):
        pairs = [merge_all(p, [a, b], f"input {i} and output {i}")
                 for i, (a, b) in enumerate(zip(in_shapes, out_shapes))]
        return pairs, list(pairs)

    def infer_type(self, p, in_types, out_types):
        if any(t is None for t in in_types):
            return list(in_types), list(out_types)
        target = self.target_dtype(p, in_types)
        return list(in_types), [target if t in AMP_FLOATS else t for t in in_types]

    def forward(self, p, inputs, ctx):
        target = self.target_dtype(p, [x.dtype.name for x in inputs])
        return [x.astype(target) if x.dtype.name in AMP_FLOATS else x.copy() for x in inputs]
