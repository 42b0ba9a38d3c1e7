"""MXNet's legacy random samplers: ``_random_*`` (and ``*_like``), ``_sample_*``,
``_random_randint``, ``_sample_multinomial``, ``_sample_unique_zipfian`` and
``_shuffle``.

Every op here is a *random* op (``is_random = True``): passes never fold or
merge it, and its reference kernel draws from :mod:`mxc.compiler.rng` (seeded
by ``rng.seed``, MXNet's ``mx.random.seed``).  The samples follow MXNet's
distributions and parameterisations, not its bits:

* ``gamma``: ``alpha`` is the shape and ``beta`` the SCALE (mean alpha*beta);
* ``exponential``: ``lam`` is the RATE (mean 1/lam);
* ``negative_binomial(k, p)``: failures before the k-th success;
* ``generalized_negative_binomial(mu, alpha)``: mean mu, variance
  mu + alpha mu^2 (a gamma-Poisson mixture; alpha = 0 is Poisson(mu));
* count distributions return integer values in the float output dtype.

No sampler lowers to TVM: they run on the host (see
``mxc/backends/tvm/ops/random.py``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import rng
from .common import attr_error, fmt_shape, from_mxnet_shape, is_known, merged_shape
from .init import _out_shape
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_dtype,
                       to_float, to_int, to_shape, to_str)


def _gamma_poisson(g: np.random.Generator, mu, alpha, size):
    """Generalized negative binomial: Poisson(Gamma(1/alpha, alpha*mu)); Poisson(mu) at alpha 0."""
    mu, alpha = np.broadcast_arrays(np.asarray(mu, np.float64), np.asarray(alpha, np.float64))
    mu = np.broadcast_to(mu, size)
    alpha = np.broadcast_to(alpha, size)
    lam = mu.copy()
    mixed = alpha > 0
    if mixed.any():
        a = alpha[mixed]
        lam[mixed] = g.gamma(1.0 / a, a * mu[mixed])
    return g.poisson(lam)


#: distribution -> (parameter names, sampler ``(generator, *params, size) -> array``, counts?)
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], Callable, bool]] = {
    "uniform": (("low", "high"), lambda g, lo, hi, size: g.uniform(lo, hi, size), False),
    "normal": (("loc", "scale"), lambda g, mu, sd, size: g.normal(mu, sd, size), False),
    "gamma": (("alpha", "beta"), lambda g, a, b, size: g.gamma(a, b, size), False),
    "exponential": (("lam",), lambda g, lam, size: g.exponential(1.0 / np.asarray(lam), size),
                    False),
    "poisson": (("lam",), lambda g, lam, size: g.poisson(lam, size), True),
    "negative_binomial": (("k", "p"), lambda g, k, p, size: g.negative_binomial(k, p, size), True),
    "generalized_negative_binomial": (("mu", "alpha"), _gamma_poisson, True),
}

#: the parameter names ``_sample_<dist>`` gives its inputs (they differ from the attributes)
SAMPLE_INPUTS = {"normal": ("mu", "sigma"), "uniform": ("low", "high"),
                 "gamma": ("alpha", "beta"), "exponential": ("lam",), "poisson": ("lam",),
                 "negative_binomial": ("k", "p"),
                 "generalized_negative_binomial": ("mu", "alpha")}

#: MXNet's aliases of ``_random_<dist>`` (``uniform``/``normal`` keep their pre-1.0 names)
RANDOM_ALIASES = {
    "uniform": ("uniform", "random_uniform", "_npi_random_uniform"),
    "normal": ("normal", "random_normal", "_npi_random_normal"),
}

_DEFAULTS = {"low": 0.0, "high": 1.0, "loc": 0.0, "scale": 1.0, "alpha": 1.0, "beta": 1.0,
             "lam": 1.0, "k": 1, "p": 1.0, "mu": 1.0}
_FLOAT_OUT = optional(enum("None", "float16", "float32", "float64"))


def draw(dist: str, g: np.random.Generator, params, size) -> np.ndarray:
    """Samples of *dist* (float64 or int64 values) for broadcastable *params*."""
    _, sampler, _ = DISTRIBUTIONS[dist]
    return np.asarray(sampler(g, *params, tuple(size)))


class RandomOp(OpDef):
    """Base of every sampler: marked random, draws from the node's stream."""

    is_random = True

    def generator(self, p) -> np.random.Generator:
        return rng.generator(p.node_name)


def _float_dtype(p, default: str = "float32") -> str:
    return default if p.dtype in (None, "None") else p.dtype


class _RandomOp(RandomOp):
    """``_random_<dist>(shape, dtype, params...)``: no inputs."""

    arguments = ()
    dist = ""

    def infer_shape(self, p, in_shapes, out_shapes):
        oshape = out_shapes[0]
        if p.shape:
            oshape = merged_shape(p, oshape, from_mxnet_shape(p.shape), "output shape")
        return list(in_shapes), [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [_float_dtype(p)]

    def forward(self, p, inputs, ctx):
        names = DISTRIBUTIONS[self.dist][0]
        values = draw(self.dist, self.generator(p), [p[n] for n in names], _out_shape(p, ctx))
        return [values.astype(ctx.out_dtypes[0] or _float_dtype(p))]


class _RandomLikeOp(RandomOp):
    """``_random_<dist>_like(data)``: shape and dtype of ``data``, values unused."""

    dist = ""

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merged_shape(p, in_shapes[0], out_shapes[0], "data and output")
        return [s], [s]

    def forward(self, p, inputs, ctx):
        names = DISTRIBUTIONS[self.dist][0]
        values = draw(self.dist, self.generator(p), [p[n] for n in names], inputs[0].shape)
        return [values.astype(inputs[0].dtype)]


class _SampleOp(RandomOp):
    """``_sample_<dist>(params...)``: one ``shape``-sized draw per parameter element."""

    attrs = {"shape": Attr(to_shape, ()), "dtype": Attr(_FLOAT_OUT, None)}
    dist = ""

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        base = None
        for i, s in enumerate(ins):
            if s is not None:
                base = merged_shape(p, base, s, f"parameter {self.arguments[i]}")
        if base is None and is_known(out_shapes[0]) and len(out_shapes[0]) >= len(p.shape):
            base = tuple(out_shapes[0][:len(out_shapes[0]) - len(p.shape)])
        if base is None:
            return ins, list(out_shapes)
        out = merged_shape(p, out_shapes[0], tuple(base) + tuple(p.shape), "output shape")
        return [base] * len(ins), [out]

    def infer_type(self, p, in_types, out_types):
        """Parameters share one dtype; the output's is its own (``dtype``, else float32)."""
        known = next((t for t in in_types if t is not None), None)
        return [known] * len(in_types), [out_types[0] or _float_dtype(p)]

    def forward(self, p, inputs, ctx):
        base = inputs[0].shape
        tail = (1,) * len(p.shape)
        params = [x.astype(np.float64).reshape(base + tail) for x in inputs]
        values = draw(self.dist, self.generator(p), params, base + tuple(p.shape))
        return [values.astype(ctx.out_dtypes[0] or _float_dtype(p))]


def _register_family(dist: str) -> None:
    names = DISTRIBUTIONS[dist][0]
    params = {n: Attr(to_int if n == "k" else to_float, _DEFAULTS[n]) for n in names}
    common = {"shape": Attr(to_shape, ()), "ctx": Attr(to_str, ""),
              "dtype": Attr(_FLOAT_OUT, None)}
    title = "".join(w.title() for w in dist.split("_"))
    register_op(f"_random_{dist}", aliases=RANDOM_ALIASES.get(dist, (f"random_{dist}",)))(type(
        f"Random{title}", (_RandomOp,),
        {"attrs": {**params, **common}, "dist": dist,
         "__doc__": f"``_random_{dist}``: {dist} samples of ``shape``."}))
    register_op(f"_random_{dist}_like")(type(
        f"Random{title}Like", (_RandomLikeOp,),
        {"attrs": dict(params), "dist": dist,
         "__doc__": f"``_random_{dist}_like``: {dist} samples shaped like ``data``."}))
    register_op(f"_sample_{dist}", aliases=(f"sample_{dist}",))(type(
        f"Sample{title}", (_SampleOp,),
        {"arguments": SAMPLE_INPUTS[dist], "dist": dist,
         "__doc__": f"``_sample_{dist}``: {dist} samples per parameter element."}))


for _dist in DISTRIBUTIONS:
    _register_family(_dist)


@register_op("_random_randint", aliases=("random_randint", "_npi_random_randint"))
class RandomRandint(RandomOp):
    """Integers uniform in ``[low, high)``; int32 unless ``dtype='int64'``."""

    arguments = ()
    attrs = {
        "low": Attr(to_int),
        "high": Attr(to_int),
        "shape": Attr(to_shape, ()),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(optional(enum("None", "int32", "int64")), None),
    }

    def validate(self, p):
        if p.high <= p.low:
            raise attr_error(p, "high", f"must exceed low={p.low}", op=self)

    infer_shape = _RandomOp.infer_shape

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [_float_dtype(p, "int32")]

    def forward(self, p, inputs, ctx):
        dt = ctx.out_dtypes[0] or _float_dtype(p, "int32")
        return [self.generator(p).integers(p.low, p.high, _out_shape(p, ctx)).astype(dt)]


@register_op("_sample_multinomial", aliases=("sample_multinomial",))
class SampleMultinomial(RandomOp):
    """Class ids drawn from each probability row (last axis of ``data``).

    Output ``data.shape[:-1] + shape``; with ``get_prob`` a second output holds
    the log-probability of each drawn class.
    """

    attrs = {
        "shape": Attr(to_shape, ()),
        "get_prob": Attr(to_bool, False),
        "dtype": Attr(to_dtype, "int32"),
    }

    def num_outputs(self, p):
        return 2 if p.get_prob else 1

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        if d is None:
            return list(in_shapes), list(out_shapes)
        if len(d) < 1:
            raise shape_error(p, f"data must have rank >= 1, got {fmt_shape(d)}")
        out = tuple(d[:-1]) + tuple(p.shape)
        return list(in_shapes), [merged_shape(p, s, out, "output") for s in out_shapes]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype] + [in_types[0]] * (self.num_outputs(p) - 1)

    def forward(self, p, inputs, ctx):
        probs = inputs[0].astype(np.float64)
        k = probs.shape[-1]
        rows = probs.reshape(-1, k)
        n = int(np.prod(p.shape)) if p.shape else 1
        g = self.generator(p)
        cdf = np.cumsum(rows, axis=1)
        u = g.random((rows.shape[0], n)) * cdf[:, -1:]
        ids = np.minimum((u[:, :, None] >= cdf[:, None, :]).sum(axis=2), k - 1)
        shape = probs.shape[:-1] + tuple(p.shape)
        outs = [ids.reshape(shape).astype(p.dtype)]
        if p.get_prob:
            with np.errstate(divide="ignore"):
                logp = np.log(np.take_along_axis(rows, ids, axis=1))
            outs.append(logp.reshape(shape).astype(inputs[0].dtype))
        return outs


@register_op("_sample_unique_zipfian", aliases=("sample_unique_zipfian",))
class SampleUniqueZipfian(RandomOp):
    """Per row of ``shape=(batch, n)``: n distinct log-uniform values in ``[0, range_max)``.

    Outputs ``[samples (int64), num_tries (int64, one per row)]``: how many
    draws each row needed to collect n distinct values.
    """

    arguments = ()
    attrs = {"range_max": Attr(to_int), "shape": Attr(to_shape, ())}

    def validate(self, p):
        if len(p.shape) != 2:
            raise attr_error(p, "shape", "must be (batch, num_sampled)", op=self)
        if p.shape[1] > p.range_max:
            raise attr_error(p, "range_max", f"must be at least num_sampled={p.shape[1]}", op=self)

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        return [], [merged_shape(p, out_shapes[0], tuple(p.shape), "samples"),
                    merged_shape(p, out_shapes[1], (p.shape[0],), "num_tries")]

    def infer_type(self, p, in_types, out_types):
        return [], ["int64", "int64"]

    def forward(self, p, inputs, ctx):
        batch, n = p.shape
        g = self.generator(p)
        log_range = np.log(p.range_max + 1.0)
        out = np.zeros((batch, n), dtype=np.int64)
        tries = np.zeros(batch, dtype=np.int64)
        for b in range(batch):
            seen: dict[int, None] = {}
            while len(seen) < n:
                v = int(np.exp(g.random() * log_range)) - 1
                tries[b] += 1
                seen.setdefault(v % p.range_max, None)
            out[b] = list(seen)
        return [out, tries]


@register_op("_shuffle", aliases=("shuffle", "_npi_shuffle"))
class Shuffle(RandomOp):
    """A random permutation of the first axis."""

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merged_shape(p, in_shapes[0], out_shapes[0], "data and output")
        return [s], [s]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        if x.ndim == 0:
            return [x.copy()]
        return [x[self.generator(p).permutation(x.shape[0])]]
