"""Losses and gradient-only operators, MXNet 1.9.1 inference semantics.

* ``CTCLoss`` (``ctc_loss``, ``_contrib_ctc_loss``, ``_contrib_CTCLoss``):
  the per-sample negative log-likelihood of the label sequences under the
  softmax of ``data (T, N, C)``; one visible output (the loss, ``(N,)``) and a
  hidden one (the gradient, ``data``'s shape; zeros in inference).
  ``blank_label='first'``: class 0 is blank and label value 0 pads;
  ``'last'``: class C-1 is blank and -1 pads.
* ``softmax_cross_entropy``: the SUM over the batch of ``-log softmax(data)[label]``,
  shape ``(1,)``.
* Identities in inference (their work is in the gradient): ``SVMOutput``,
  ``MakeLoss``, ``IdentityAttachKLSparseReg`` (aux ``moving_avg`` unused),
  ``_contrib_gradientmultiplier``; straight-through estimators
  ``_contrib_round_ste`` (round half away from zero) and ``_contrib_sign_ste``.

All run on the host except the identities, which the TVM backend lowers.
"""

from __future__ import annotations

import numpy as np

from .common import cast_to, compute_dtype, fmt_shape, merge_all, merge_into, UnaryOp
from .elemwise_scalar import SCALAR_ATTRS, ScalarOp
from .registry import Attr, OpDef, enum, register_op, shape_error, to_bool, to_float


class _IdentityLoss(OpDef):
    """Forward is ``data``; extra inputs only feed the gradient."""

    def unused_inputs(self, p):
        return list(range(1, len(self.input_names(p))))

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0]], "data and output")
        ins[0] = outs[0] = d
        if d is not None:
            self.side_shapes(p, d, ins)
        return ins, outs

    def side_shapes(self, p, d, ins) -> None:
        """Fill the shapes of the inputs after ``data``."""

    def infer_type(self, p, in_types, out_types):
        known = next((t for t in [in_types[0], out_types[0]] if t is not None), None)
        if known is None:
            return in_types, out_types
        return [known] + [t if t is not None else known for t in in_types[1:]], [known]

    def forward(self, p, inputs, ctx):
        return [inputs[0].copy()]


@register_op("SVMOutput")
class SVMOutput(_IdentityLoss):
    attrs = {
        "margin": Attr(to_float, 1.0),
        "regularization_coefficient": Attr(to_float, 1.0),
        "use_linear": Attr(to_bool, False),
    }
    arguments = ("data", "label")

    def side_shapes(self, p, d, ins):
        merge_into(p, ins, 1, (d[0],), "label")


@register_op("MakeLoss")
class MakeLoss(_IdentityLoss):
    attrs = {
        "grad_scale": Attr(to_float, 1.0),
        "valid_thresh": Attr(to_float, 0.0),
        "normalization": Attr(enum("null", "batch", "valid"), "null"),
    }


@register_op("IdentityAttachKLSparseReg")
class IdentityAttachKLSparseReg(_IdentityLoss):
    attrs = {
        "sparseness_target": Attr(to_float, 0.1),
        "penalty": Attr(to_float, 0.001),
        "momentum": Attr(to_float, 0.9),
    }
    aux = ("moving_avg",)

    def side_shapes(self, p, d, ins):
        if len(d) < 2:
            raise shape_error(p, f"data must have rank >= 2, got {fmt_shape(d)}")
        merge_into(p, ins, 1, (d[1],), "moving_avg")


@register_op("_contrib_gradientmultiplier")
class GradientMultiplier(ScalarOp):
    """Identity forward; the gradient is scaled by ``scalar``."""

    attrs = SCALAR_ATTRS
    kernel = staticmethod(lambda a, s: a)


@register_op("_contrib_round_ste")
class RoundSTE(UnaryOp):
    """``round`` (half away from zero) with a straight-through gradient."""

    fn = staticmethod(lambda x: np.sign(x) * np.floor(np.abs(x) + x.dtype.type(0.5)))


@register_op("_contrib_sign_ste")
class SignSTE(UnaryOp):
    """``sign`` with a straight-through gradient."""

    fn = staticmethod(np.sign)


@register_op("softmax_cross_entropy")
class SoftmaxCrossEntropy(OpDef):
    """``sum_i -log softmax(data_i)[label_i]`` over the batch, shape ``(1,)``."""

    arguments = ("data", "label")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        d = ins[0]
        if d is not None:
            if len(d) != 2:
                raise shape_error(p, f"data must be 2-D (batch, classes), got {fmt_shape(d)}")
            merge_into(p, ins, 1, (d[0],), "label")
        return ins, [merge_all(p, [out_shapes[0], (1,)], "output")]

    def infer_type(self, p, in_types, out_types):
        known = next((t for t in [in_types[0], out_types[0]] if t is not None), None)
        if known is None:
            return in_types, out_types
        return [known, in_types[1] or known], [known]

    def forward(self, p, inputs, ctx):
        x = inputs[0].astype(compute_dtype(inputs[0].dtype))
        label = inputs[1].astype(np.int64)
        shifted = x - x.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss = -logp[np.arange(x.shape[0]), label].sum()
        return [cast_to(np.array([loss]), ctx.out_dtypes[0] or inputs[0].dtype)]


def ctc_nll(logp: np.ndarray, label: list[int], blank: int) -> float:
    """``-log p(label)`` for one sequence of per-step log-probabilities ``(T, C)``."""
    ext = [blank]
    for c in label:
        ext += [c, blank]
    steps, size = logp.shape[0], len(ext)
    if steps == 0:
        return 0.0 if not label else np.inf
    alpha = np.full(size, -np.inf)
    alpha[0] = logp[0, blank]
    if size > 1:
        alpha[1] = logp[0, ext[1]]
    skip = np.array([s >= 2 and ext[s] != blank and ext[s] != ext[s - 2] for s in range(size)])
    for t in range(1, steps):
        prev1 = np.concatenate(([-np.inf], alpha))[:size]
        prev2 = np.where(skip, np.concatenate(([-np.inf, -np.inf], alpha))[:size], -np.inf)
        alpha = np.logaddexp(np.logaddexp(alpha, prev1), prev2) + logp[t, ext]
    tail = np.logaddexp(alpha[-1], alpha[-2]) if size > 1 else alpha[-1]
    return float(-tail)


@register_op("CTCLoss", aliases=("ctc_loss", "_contrib_ctc_loss", "_contrib_CTCLoss"))
class CTCLoss(OpDef):
    attrs = {
        "use_data_lengths": Attr(to_bool, False),
        "use_label_lengths": Attr(to_bool, False),
        "blank_label": Attr(enum("first", "last"), "first"),
    }

    def input_names(self, p):
        names = ["data", "label"]
        if p.use_data_lengths:
            names.append("data_lengths")
        if p.use_label_lengths:
            names.append("label_lengths")
        return names

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[1]], "data and gradient")
        ins[0] = outs[1] = d
        if d is not None:
            if len(d) != 3:
                raise shape_error(p, f"data must be 3-D (time, batch, classes), got "
                                     f"{fmt_shape(d)}")
            lab = ins[1]
            if lab is not None and (len(lab) != 2 or lab[0] not in (None, d[1])):
                raise shape_error(p, f"label must be (batch, max_label_length), got "
                                     f"{fmt_shape(lab)} for data {fmt_shape(d)}")
            outs[0] = merge_all(p, [outs[0], (d[1],)], "loss")
            for i in range(2, len(ins)):
                merge_into(p, ins, i, (d[1],), self.input_names(p)[i])
        return ins, outs

    def forward(self, p, inputs, ctx):
        data = inputs[0].astype(np.float64)
        steps, batch, classes = data.shape
        shifted = data - data.max(axis=2, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
        names = self.input_names(p)
        first = p.blank_label == "first"
        blank, pad = (0, 0) if first else (classes - 1, -1)
        labels = inputs[1].astype(np.int64)
        loss = np.zeros(batch)
        for n in range(batch):
            t_len = int(inputs[names.index("data_lengths")][n]) if p.use_data_lengths else steps
            row = labels[n]
            if p.use_label_lengths:
                seq = row[:int(inputs[names.index("label_lengths")][n])]
            else:
                ends = np.nonzero(row == pad)[0]
                seq = row[:ends[0]] if ends.size else row
            loss[n] = ctc_nll(logp[:t_len, n], seq.tolist(), blank)
        dt = inputs[0].dtype
        return [loss.astype(dt), np.zeros(data.shape, dtype=dt)]
