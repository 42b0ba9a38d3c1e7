"""DeepNumpy samplers: ``_npi_<distribution>`` (``mx.np.random.*`` and ``mx.npx.random.*``).

NumPy's parameterisations, as MXNet implements them:

* each distribution parameter is either a float attribute or, when the
  attribute is ``None``, a tensor input (named ``input1``, ``input2`` in
  order), broadcast against the others;
* the output shape is ``size`` when given, else the broadcast parameter shape
  (``()`` for scalar parameters); the ``*_n`` variants prepend ``size`` to the
  broadcast parameter shape instead;
* ``exponential(scale)`` takes the SCALE (1/rate, unlike ``_random_exponential``'s
  ``lam``), ``gamma(shape, scale)``, ``pareto(a)`` is NumPy's Lomax
  (mean 1/(a-1)), ``powerd(a)`` has density a x^(a-1) on [0, 1];
* normal, exponential, gumbel, logistic, pareto, rayleigh and weibull have a
  second, hidden float32 output (MXNet keeps the base noise there for the
  reparameterised gradient); mxc returns the base draw in it.

Samples come from :mod:`mxc.compiler.rng`; they run on the host.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .common import attr_error, broadcast_shapes, is_known, merged_shape
from .random import RandomOp
from .registry import (Attr, enum, optional, register_op, shape_error, to_bool, to_float,
                       to_float_tuple, to_int, to_shape, to_str)

_FLOAT_DTYPE = enum("float32", "float64", "float16")


def _gumbel(g, loc, scale, size):
    u = g.random(size)
    return loc - scale * np.log(-np.log(u)), u


def _logistic(g, loc, scale, size):
    u = g.random(size)
    return loc + scale * np.log(u / (1.0 - u)), u


def _with_noise(draw_unit: Callable, transform: Callable) -> Callable:
    """A sampler returning ``(transform(noise, *params), noise)``."""
    def sampler(g, *params_and_size):
        *params, size = params_and_size
        noise = draw_unit(g, size)
        return transform(noise, *params), noise
    return sampler


#: name -> (parameter names, sampler ``(g, *params, size) -> values or (values, noise)``,
#:          hidden noise output?, dtype attribute default or None)
NP_DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], Callable, bool, str | None]] = {
    "normal": (("loc", "scale"), _with_noise(lambda g, s: g.standard_normal(s),
                                             lambda z, loc, sc: loc + z * sc), True, "float32"),
    "normal_n": (("loc", "scale"), _with_noise(lambda g, s: g.standard_normal(s),
                                               lambda z, loc, sc: loc + z * sc), True, "float32"),
    "uniform": (("low", "high"), lambda g, lo, hi, s: g.uniform(lo, hi, s), False, "float32"),
    "uniform_n": (("low", "high"), lambda g, lo, hi, s: g.uniform(lo, hi, s), False, "float32"),
    "gamma": (("shape", "scale"), lambda g, k, th, s: g.gamma(k, th, s), False, "float32"),
    "exponential": (("scale",), _with_noise(lambda g, s: g.standard_exponential(s),
                                            lambda e, sc: e * sc), True, None),
    "gumbel": (("loc", "scale"), _gumbel, True, None),
    "logistic": (("loc", "scale"), _logistic, True, None),
    "laplace": (("loc", "scale"), lambda g, loc, sc, s: g.laplace(loc, sc, s), False, "float32"),
    "pareto": (("a",), _with_noise(lambda g, s: g.standard_exponential(s),
                                   lambda e, a: np.expm1(e / a)), True, None),
    "weibull": (("a",), _with_noise(lambda g, s: g.standard_exponential(s),
                                    lambda e, a: e ** (1.0 / a)), True, None),
    "powerd": (("a",), lambda g, a, s: g.power(a, s), False, None),
    "rayleigh": (("scale",), _with_noise(lambda g, s: g.random(s),
                                         lambda u, sc: sc * np.sqrt(-2.0 * np.log1p(-u))),
                 True, None),
}

class NpSampler(RandomOp):
    """``_npi_<dist>``: attribute or tensor parameters, ``size``, numpy broadcasting."""

    dist = ""
    params: tuple[str, ...] = ()
    noise_output = False
    prepend_size = False  # the *_n variants

    def input_names(self, p):
        n = sum(1 for name in self.params if p[name] is None)
        return ["input1", "input2"][:n]

    def num_outputs(self, p):
        return 2 if self.noise_output else 1

    def num_visible_outputs(self, p):
        return 1

    def out_shape(self, p, in_shapes):
        if any(s is None for s in in_shapes):
            return None
        shape: tuple = ()
        for s in in_shapes:
            shape = broadcast_shapes(p, shape, s)
        if p.size is None:
            return shape
        if self.prepend_size:
            return tuple(p.size) + tuple(shape)
        if is_known(shape) and broadcast_shapes(p, tuple(p.size), shape) != tuple(p.size):
            raise shape_error(p, f"parameter shape {shape} does not broadcast to size {p.size}")
        return tuple(p.size)

    def infer_shape(self, p, in_shapes, out_shapes):
        out = self.out_shape(p, list(in_shapes))
        outs = [merged_shape(p, s, out, "output") for s in out_shapes]
        return list(in_shapes), outs

    def out_dtype(self, p) -> str:
        return p.dtype if "dtype" in p else "float32"

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [self.out_dtype(p)] + ["float32"] * (len(out_types) - 1)

    def forward(self, p, inputs, ctx):
        feeds = iter(inputs)
        values = [np.asarray(p[n], dtype=np.float64) if p[n] is not None
                  else next(feeds).astype(np.float64) for n in self.params]
        shape = tuple(ctx.out_shapes[0]) if is_known(ctx.out_shapes[0] if ctx.out_shapes
                                                     else None) \
            else self.out_shape(p, [x.shape for x in inputs])
        nd = len(shape)
        values = [v.reshape((1,) * (nd - v.ndim) + v.shape) for v in values]
        result = NP_DISTRIBUTIONS[self.dist][1](self.generator(p), *values, shape)
        sample, noise = result if isinstance(result, tuple) else (result, None)
        outs = [np.asarray(sample).astype(self.out_dtype(p))]
        if self.noise_output:
            outs.append(np.broadcast_to(noise, shape).astype(np.float32))
        return outs


def _register(dist: str) -> None:
    names, _, noise, dtype = NP_DISTRIBUTIONS[dist]
    attrs = {n: Attr(optional(to_float), None) for n in names}
    attrs.update(size=Attr(optional(to_shape), None), ctx=Attr(to_str, "cpu"))
    if dtype is not None:
        attrs["dtype"] = Attr(_FLOAT_DTYPE, dtype)
    register_op(f"_npi_{dist}")(type(
        "Np" + "".join(w.title() for w in dist.split("_")), (NpSampler,),
        {"attrs": attrs, "dist": dist, "params": names, "noise_output": noise,
         "prepend_size": dist.endswith("_n"),
         "__doc__": f"``_npi_{dist}``: numpy-style {dist} samples."}))


for _dist in NP_DISTRIBUTIONS:
    _register(_dist)


@register_op("_npi_bernoulli")
class NpBernoulli(NpSampler):
    """0/1 draws with probability ``prob`` (or ``sigmoid(logit)``), in ``dtype``."""

    attrs = {
        "prob": Attr(optional(to_float), None),
        "logit": Attr(optional(to_float), None),
        "size": Attr(optional(to_shape), None),
        "ctx": Attr(to_str, "cpu"),
        "dtype": Attr(enum("float32", "float64", "float16", "uint8", "int8", "int32", "int64",
                           "bool"), "float32"),
        "is_logit": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.prob is not None and p.logit is not None:
            raise attr_error(p, "logit", "give prob or logit, not both", op=self)

    def input_names(self, p):
        return ["input1"] if p.prob is None and p.logit is None else []

    def forward(self, p, inputs, ctx):
        value = inputs[0].astype(np.float64) if inputs else \
            np.float64(p.logit if p.is_logit else p.prob)
        if p.is_logit:
            value = 1.0 / (1.0 + np.exp(-value))
        shape = self.out_shape(p, [x.shape for x in inputs])
        u = self.generator(p).random(shape)
        return [(u < value).astype(self.out_dtype(p))]


@register_op("_npi_choice")
class NpChoice(NpSampler):
    """Indices drawn from ``range(a)`` (``a`` an int, or a tensor input: its size),
    optionally weighted by a second input; int64."""

    attrs = {
        "a": Attr(optional(to_int), None),
        "size": Attr(optional(to_shape), None),
        "ctx": Attr(to_str, "cpu"),
        "replace": Attr(to_bool, True),
        "weighted": Attr(to_bool, False),
    }

    def input_names(self, p):
        count = (p.a is None) + p.weighted   # the population tensor first, then the weights
        return ["input1", "input2"][:count]

    def out_shape(self, p, in_shapes):
        return tuple(p.size) if p.size is not None else ()

    def out_dtype(self, p):
        return "int64"

    def forward(self, p, inputs, ctx):
        feeds = list(inputs)
        n = feeds.pop(0).size if p.a is None else p.a   # MXNet draws indices of a tensor ``a``
        weights = feeds.pop(0).astype(np.float64) if p.weighted else None
        if weights is not None:
            weights = weights / weights.sum()
        shape = self.out_shape(p, [])
        ids = self.generator(p).choice(n, size=shape, replace=p.replace, p=weights)
        return [np.asarray(ids, dtype=np.int64)]


@register_op("_npi_multinomial")
class NpMultinomial(NpSampler):
    """Counts of ``n`` trials over ``pvals`` (attribute or tensor): shape ``size + (k,)``."""

    attrs = {
        "n": Attr(to_int),
        "pvals": Attr(optional(to_float_tuple), None),
        "size": Attr(optional(to_shape), None),
    }

    def input_names(self, p):
        return ["a"] if p.pvals is None else []

    def out_shape(self, p, in_shapes):
        k = len(p.pvals) if p.pvals is not None else (in_shapes[0][-1] if in_shapes and
                                                      in_shapes[0] is not None else None)
        if k is None:
            return None
        return (tuple(p.size) if p.size is not None else ()) + (k,)

    def out_dtype(self, p):
        return "int64"

    def forward(self, p, inputs, ctx):
        pvals = np.asarray(p.pvals if p.pvals is not None else inputs[0], dtype=np.float64)
        size = tuple(p.size) if p.size is not None else None
        counts = self.generator(p).multinomial(p.n, pvals, size)
        return [np.asarray(counts, dtype=np.int64)]
