"""Small contrib operators: ``_contrib_index_array``, ``_contrib_quadratic``,
``_contrib_allclose`` and the Hawkes process log-likelihood ``_contrib_hawkesll``.

* ``index_array(data, axes)``: int64 ``data.shape + (len(axes),)`` holding each
  element's coordinates along ``axes`` (all axes by default);
* ``quadratic(data, a, b, c)``: ``a x^2 + b x + c``;
* ``allclose(a, b, rtol, atol, equal_nan)``: one 0-d uint8, 1 when
  ``|a - b| <= atol + rtol |b|`` everywhere (NumPy's rule);
* ``hawkesll``: log-likelihood of marked event sequences under a
  self-exciting process with exponential kernels, and the updated states
  (MXNet's ``hawkes_ll``: per sample, intensity ``mu_k + alpha_k beta_k s_k
  e^{-beta_k d}`` at each event, compensators up to ``max_time``).
"""

from __future__ import annotations

import numpy as np

from .common import compute_dtype, fmt_shape, merge_all, merge_into, UnaryOp
from .registry import Attr, OpDef, optional, register_op, shape_error, to_bool, to_float, to_shape


@register_op("_contrib_index_array")
class IndexArray(OpDef):
    attrs = {"axes": Attr(optional(to_shape), None)}

    def _axes(self, p, ndim: int) -> list[int]:
        if p.axes is None:
            return list(range(ndim))
        axes = []
        for a in p.axes:
            if not -ndim <= a < ndim:
                raise shape_error(p, f"axis {a} is out of range for a {ndim}-D input")
            axes.append(a % ndim)
        return axes

    def infer_shape(self, p, in_shapes, out_shapes):
        d, outs = in_shapes[0], list(out_shapes)
        if d is not None:
            merge_into(p, outs, 0, tuple(d) + (len(self._axes(p, len(d))),), "output")
        return list(in_shapes), outs

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["int64"]

    def forward(self, p, inputs, ctx):
        shape = inputs[0].shape
        grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
        picked = [grids[a] for a in self._axes(p, len(shape))]
        return [np.stack(picked, axis=-1) if picked else np.zeros(shape + (0,), np.int64)]


@register_op("_contrib_quadratic")
class Quadratic(UnaryOp):
    attrs = {"a": Attr(to_float, 0.0), "b": Attr(to_float, 0.0), "c": Attr(to_float, 0.0)}

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        a, b, c = (dt.type(v) for v in (p.a, p.b, p.c))
        xw = x.astype(dt, copy=False)
        return [(a * xw * xw + b * xw + c).astype(x.dtype)]


@register_op("_contrib_allclose")
class Allclose(OpDef):
    attrs = {"rtol": Attr(to_float, 1e-5), "atol": Attr(to_float, 1e-8),
             "equal_nan": Attr(to_bool, True)}
    arguments = ("a", "b")

    def infer_shape(self, p, in_shapes, out_shapes):
        merge_all(p, list(in_shapes), "a and b")
        return list(in_shapes), [merge_all(p, [out_shapes[0], ()], "output")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["uint8"]

    def forward(self, p, inputs, ctx):
        a, b = (x.astype(np.float64) for x in inputs)
        close = np.isclose(a, b, rtol=p.rtol, atol=p.atol, equal_nan=p.equal_nan)
        return [np.array(close.all(), dtype=np.uint8)]


@register_op("_contrib_hawkesll")
class HawkesLL(OpDef):
    """Outputs ``[log-likelihood (N,), states (N, K)]``."""

    arguments = ("lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time")

    def num_outputs(self, p):
        return 2

    def output_names(self, p):
        return ["output", "out_state"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        mu, lags = ins[0], ins[4]
        if mu is None or lags is None:
            return ins, outs
        if len(mu) != 2 or len(lags) != 2:
            raise shape_error(p, f"lda must be (N, K) and lags (N, T), got {fmt_shape(mu)} and "
                                 f"{fmt_shape(lags)}")
        n, t, k = lags[0], lags[1], mu[1]
        want = {0: (n, k), 1: (k,), 2: (k,), 3: (n, k), 5: (n, t), 6: (n,), 7: (n,)}
        for i, shape in want.items():
            merge_into(p, ins, i, shape, self.arguments[i])
        merge_into(p, outs, 0, (n,), "log-likelihood")
        merge_into(p, outs, 1, (n, k), "states")
        return ins, outs

    def infer_type(self, p, in_types, out_types):
        known = next((t for i, t in enumerate(in_types) if i != 5 and t is not None),
                     out_types[0])
        if known is None:
            return in_types, out_types
        return [known] * 5 + ["int32", known, known], [known, known]

    def forward(self, p, inputs, ctx):
        mu, alpha, beta, state, lags, marks, valid, max_time = inputs
        dt = compute_dtype(mu.dtype)
        one = dt.type(1)
        mu, alpha, beta, lags = (x.astype(dt) for x in (mu, alpha, beta, lags))
        states = state.astype(dt).copy()
        n, k = mu.shape
        loglik = np.zeros(n, dtype=dt)
        for i in range(n):
            last = np.zeros(k, dtype=dt)
            t = dt.type(0)
            s = states[i]
            for j in range(int(valid[i])):
                c = int(marks[i, j])
                t = dt.type(t + lags[i, j])
                d = dt.type(t - last[c])
                ed = np.exp(-beta[c] * d)
                lda = mu[i, c] + alpha[c] * beta[c] * s[c] * ed
                comp = mu[i, c] * d + alpha[c] * s[c] * (one - ed)
                loglik[i] += np.log(lda) - comp
                s[c] = one + s[c] * ed
                last[c] = t
            d = dt.type(max_time[i]) - last
            ed = np.exp(-beta * d)
            loglik[i] -= (mu[i] * d + alpha * s * (one - ed)).sum()
            states[i] = ed * s
        return [loglik.astype(inputs[0].dtype), states.astype(inputs[0].dtype)]
