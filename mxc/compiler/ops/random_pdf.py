"""``_random_pdf_<dist>``: densities (or pmfs) of samples under per-row parameters.

Deterministic ops (not samplers).  Inputs are ``sample`` then the parameter
tensors; a parameter tensor's shape is a prefix of ``sample``'s and each of its
elements applies to the trailing sample axes (``_random_pdf_dirichlet``: the
parameters end with the K concentration values, the sample with its K
coordinates, and the output drops that last axis).  ``is_log`` returns the log
density.

Parameterisations are MXNet's and differ from its samplers in one place:
``_random_pdf_gamma``'s ``beta`` is a RATE (pdf = beta^a x^(a-1) e^(-beta x) /
Gamma(a)) while ``_random_gamma``'s ``beta`` is a scale.
"""

from __future__ import annotations

import math

import numpy as np

from .common import fmt_shape, merged_shape
from .registry import Attr, OpDef, register_op, shape_error, to_bool

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _log_normal(x, mu, sigma):
    return -((x - mu) ** 2) / (2 * sigma ** 2) - np.log(np.sqrt(2 * np.pi) * sigma)


def _log_uniform(x, low, high):
    inside = (x >= low) & (x <= high)
    with np.errstate(divide="ignore"):
        return np.where(inside, -np.log(high - low), -np.inf)


def _log_gamma(x, alpha, beta):
    return alpha * np.log(beta) + (alpha - 1) * np.log(x) - beta * x - _lgamma(alpha)


def _log_exponential(x, lam):
    return np.log(lam) - lam * x


def _log_poisson(x, lam):
    return x * np.log(lam) - lam - _lgamma(x + 1)


def _log_negative_binomial(x, k, p):
    return (_lgamma(x + k) - _lgamma(k) - _lgamma(x + 1) + k * np.log(p)
            + x * np.log1p(-p))


def _log_generalized_negative_binomial(x, mu, alpha):
    """NB with k = 1/alpha successes and success probability 1/(1 + alpha mu)."""
    return _log_negative_binomial(x, 1.0 / alpha, 1.0 / (1.0 + alpha * mu))


#: distribution -> (parameter input names, log-density ``(x, *params)``)
PDFS = {
    "normal": (("mu", "sigma"), _log_normal),
    "uniform": (("low", "high"), _log_uniform),
    "gamma": (("alpha", "beta"), _log_gamma),
    "exponential": (("lam",), _log_exponential),
    "poisson": (("lam",), _log_poisson),
    "negative_binomial": (("k", "p"), _log_negative_binomial),
    "generalized_negative_binomial": (("mu", "alpha"), _log_generalized_negative_binomial),
}


class _PdfOp(OpDef):
    attrs = {"is_log": Attr(to_bool, False)}
    dist = ""

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        sample = merged_shape(p, ins[0], outs[0], "sample and output")
        params = None
        for i, s in enumerate(ins[1:], 1):
            params = merged_shape(p, params, s, f"parameter {self.arguments[i]}")
        if sample is not None and params is not None:
            if len(params) > len(sample) or any(
                    a is not None and b is not None and a != b
                    for a, b in zip(params, sample)):
                raise shape_error(p, f"parameter shape {fmt_shape(params)} must be a prefix of "
                                     f"the sample shape {fmt_shape(sample)}")
        return [sample] + [params] * (len(ins) - 1), [sample]

    def forward(self, p, inputs, ctx):
        x = inputs[0].astype(np.float64)
        tail = (1,) * (x.ndim - inputs[1].ndim)
        params = [a.astype(np.float64).reshape(a.shape + tail) for a in inputs[1:]]
        with np.errstate(divide="ignore", invalid="ignore"):
            logp = PDFS[self.dist][1](x, *params)
            out = logp if p.is_log else np.exp(logp)
        return [out.astype(inputs[0].dtype)]


for _dist, (_names, _fn) in PDFS.items():
    register_op(f"_random_pdf_{_dist}", aliases=(f"random_pdf_{_dist}",))(type(
        "Pdf" + "".join(w.title() for w in _dist.split("_")), (_PdfOp,),
        {"arguments": ("sample",) + _names, "dist": _dist,
         "__doc__": f"``_random_pdf_{_dist}``: density of ``sample`` under {_dist}."}))


@register_op("_random_pdf_dirichlet", aliases=("random_pdf_dirichlet",))
class PdfDirichlet(OpDef):
    """Dirichlet density of K-vectors: ``sample (P..., M..., K)``, ``alpha (P..., K)``."""

    attrs = {"is_log": Attr(to_bool, False)}
    arguments = ("sample", "alpha")

    def infer_shape(self, p, in_shapes, out_shapes):
        sample, alpha = in_shapes
        outs = list(out_shapes)
        if sample is not None:
            if len(sample) < 1:
                raise shape_error(p, "sample must have rank >= 1")
            outs[0] = merged_shape(p, outs[0], tuple(sample[:-1]), "output")
            if alpha is not None and (len(alpha) > len(sample) or alpha[-1] != sample[-1]):
                raise shape_error(p, f"alpha {fmt_shape(alpha)} does not fit sample "
                                     f"{fmt_shape(sample)}")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        x = inputs[0].astype(np.float64)
        a = inputs[1].astype(np.float64)
        a = a.reshape(a.shape[:-1] + (1,) * (x.ndim - a.ndim) + a.shape[-1:])
        with np.errstate(divide="ignore", invalid="ignore"):
            logp = (_lgamma(a.sum(axis=-1)) - _lgamma(a).sum(axis=-1)
                    + ((a - 1) * np.log(x)).sum(axis=-1))
            out = logp if p.is_log else np.exp(logp)
        return [out.astype(inputs[0].dtype)]
