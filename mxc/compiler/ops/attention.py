"""Fused self/encoder-decoder attention matmuls on interleaved projections
(``_contrib_interleaved_matmul_*``) and ``_contrib_div_sqrt_dim``.

Layouts (sequence-major, as GluonNLP's BERT/Transformer use them):

* ``queries_keys_values``: ``(L, B, 3*E)``; per position and batch element the
  last axis is ``heads`` blocks of ``[q, k, v]``, each ``head_dim`` long, i.e.
  it reshapes to ``(L, B, heads, 3, head_dim)``.
* ``keys_values``: ``(L, B, 2*E)`` -> ``(L, B, heads, 2, head_dim)``;
  ``queries``: ``(L, B, E)`` -> ``(L, B, heads, head_dim)``.
* attention scores: ``(B*heads, Lq, Lk)`` with batch index ``b*heads + h``.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import AttributeInvalidError, DTypeError
from .common import UnaryOp, cast_to, compute_dtype, fmt_shape, merge_all
from .registry import Attr, OpDef, register_op, shape_error, to_int


def _check_heads(p, op):
    if p.heads < 1:
        raise AttributeInvalidError(f"operator {op} (node {p.node_ref}): attribute "
                                    f"heads={p.heads} must be >= 1")


def _need_3d(p, s, name):
    if s is not None and len(s) != 3:
        raise shape_error(p, f"{name} must be 3-D (seq_length, batch, features), got "
                             f"{fmt_shape(s)}")


def _mul(a, b):
    return None if a is None or b is None else a * b


def _split_heads(x, heads, parts):
    """(L, B, parts*E) -> (parts, B*heads, L, head_dim)."""
    seq, batch, width = x.shape
    hd = width // parts // heads
    return x.reshape(seq, batch, heads, parts, hd).transpose(3, 1, 2, 0, 4).reshape(
        parts, batch * heads, seq, hd)


def _merge_heads(x, batch, heads):
    """(B*heads, L, head_dim) -> (L, B, heads*head_dim)."""
    bh, seq, hd = x.shape
    return x.reshape(batch, heads, seq, hd).transpose(2, 0, 1, 3).reshape(seq, batch, heads * hd)


class _InterleavedBase(OpDef):
    attrs = {"heads": Attr(to_int)}

    def validate(self, p):
        _check_heads(p, self.name)

    def infer_type(self, p, in_types, out_types):
        t = next((x for x in list(in_types) + list(out_types) if x is not None), None)
        if t is not None and t not in ("float32", "float16"):
            raise DTypeError(f"operator {self.name} (node {p.node_ref}): only float32 "
                             f"(and float16) are supported, got {t}")
        return super().infer_type(p, in_types, out_types)


@register_op("_contrib_interleaved_matmul_selfatt_qk")
class InterleavedSelfAttQK(_InterleavedBase):
    """``q @ k^T / sqrt(head_dim)`` per (batch, head): ``(B*heads, L, L)``."""

    arguments = ("queries_keys_values",)

    def infer_shape(self, p, in_shapes, out_shapes):
        s = in_shapes[0]
        _need_3d(p, s, "queries_keys_values")
        if s is None:
            return list(in_shapes), list(out_shapes)
        out = (_mul(s[1], p.heads), s[0], s[0])
        return list(in_shapes), [merge_all(p, [out, out_shapes[0]], "output")]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        x = x0.astype(compute_dtype(x0.dtype), copy=False)
        q, k, _ = _split_heads(x, p.heads, 3)
        hd = q.shape[-1]
        scale = np.float32(1.0 / math.sqrt(np.float32(hd)))
        out = np.matmul(q * scale, k.transpose(0, 2, 1))
        return [cast_to(out, x0.dtype)]


@register_op("_contrib_interleaved_matmul_selfatt_valatt")
class InterleavedSelfAttValAtt(_InterleavedBase):
    """``attention @ v`` per (batch, head), heads merged back: ``(L, B, E)``."""

    arguments = ("queries_keys_values", "attention")

    def infer_shape(self, p, in_shapes, out_shapes):
        s, att = in_shapes
        _need_3d(p, s, "queries_keys_values")
        _need_3d(p, att, "attention")
        if s is None:
            return list(in_shapes), list(out_shapes)
        if s[2] is not None and s[2] % 3:
            raise shape_error(p, f"queries_keys_values.shape[2] ({s[2]}) must be a multiple "
                                 f"of 3")
        if att is not None:
            for i in (1, 2):
                if att[i] is not None and s[0] is not None and att[i] != s[0]:
                    raise shape_error(p, f"attention {fmt_shape(att)} does not match the "
                                         f"sequence length {s[0]}")
        out = (s[0], s[1], None if s[2] is None else s[2] // 3)
        return list(in_shapes), [merge_all(p, [out, out_shapes[0]], "output")]

    def forward(self, p, inputs, ctx):
        x0, att0 = inputs
        dt = compute_dtype(x0.dtype)
        x = x0.astype(dt, copy=False)
        _, _, v = _split_heads(x, p.heads, 3)
        out = np.matmul(att0.astype(dt, copy=False), v)
        return [cast_to(_merge_heads(out, x.shape[1], p.heads), x0.dtype)]


@register_op("_contrib_interleaved_matmul_encdec_qk")
class InterleavedEncDecQK(_InterleavedBase):
    """Encoder-decoder ``q @ k^T / sqrt(head_dim)``: ``(B*heads, Lq, Lkv)``."""

    arguments = ("queries", "keys_values")

    def infer_shape(self, p, in_shapes, out_shapes):
        q, kv = in_shapes
        _need_3d(p, q, "queries")
        _need_3d(p, kv, "keys_values")
        if q is None or kv is None:
            return list(in_shapes), list(out_shapes)
        if q[2] is not None and kv[2] is not None and kv[2] != 2 * q[2]:
            raise shape_error(p, f"keys_values.shape[2] ({kv[2]}) must be twice "
                                 f"queries.shape[2] ({q[2]})")
        if q[1] is not None and kv[1] is not None and q[1] != kv[1]:
            raise shape_error(p, f"queries and keys_values batch sizes differ ({q[1]} vs "
                                 f"{kv[1]})")
        out = (_mul(q[1], p.heads), q[0], kv[0])
        return list(in_shapes), [merge_all(p, [out, out_shapes[0]], "output")]

    def forward(self, p, inputs, ctx):
        q0, kv0 = inputs
        dt = compute_dtype(q0.dtype)
        q = _split_heads(q0.astype(dt, copy=False), p.heads, 1)[0]
        k, _ = _split_heads(kv0.astype(dt, copy=False), p.heads, 2)
        scale = np.float32(1.0 / math.sqrt(np.float32(q.shape[-1])))
        out = np.matmul(q * scale, k.transpose(0, 2, 1))
        return [cast_to(out, q0.dtype)]


@register_op("_contrib_interleaved_matmul_encdec_valatt")
class InterleavedEncDecValAtt(_InterleavedBase):
    """Encoder-decoder ``attention @ v``: ``(Lq, B, E)``."""

    arguments = ("keys_values", "attention")

    def infer_shape(self, p, in_shapes, out_shapes):
        kv, att = in_shapes
        _need_3d(p, kv, "keys_values")
        _need_3d(p, att, "attention")
        if kv is None or att is None:
            return list(in_shapes), list(out_shapes)
        if kv[0] is not None and att[2] is not None and kv[0] != att[2]:
            raise shape_error(p, f"keys_values.shape[0] ({kv[0]}) must equal "
                                 f"attention.shape[2] ({att[2]})")
        if kv[1] is not None and att[0] is not None and kv[1] * p.heads != att[0]:
            raise shape_error(p, f"attention.shape[0] ({att[0]}) must equal "
                                 f"keys_values.shape[1] * heads ({kv[1] * p.heads})")
        out = (att[1], kv[1], None if kv[2] is None else kv[2] // 2)
        return list(in_shapes), [merge_all(p, [out, out_shapes[0]], "output")]

    def forward(self, p, inputs, ctx):
        kv0, att0 = inputs
        dt = compute_dtype(kv0.dtype)
        _, v = _split_heads(kv0.astype(dt, copy=False), p.heads, 2)
        out = np.matmul(att0.astype(dt, copy=False), v)
        return [cast_to(_merge_heads(out, kv0.shape[1], p.heads), kv0.dtype)]


@register_op("_contrib_div_sqrt_dim")
class DivSqrtDim(UnaryOp):
    """``x / sqrt(x.shape[-1])``."""

    attrs: dict = {}

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        dt = compute_dtype(x0.dtype)
        y = x0.astype(dt, copy=False) / np.sqrt(dt.type(x0.shape[-1]))
        return [cast_to(y, ctx.out_dtypes[0] or x0.dtype)]
