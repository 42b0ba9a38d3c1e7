"""DeepNumpy elementwise ops: unary math, broadcasting binaries and tensor-scalar ops.

Most are the NumPy names of legacy ops and subclass them (``_npi_exp`` is
``exp``, ``_npi_add`` is ``broadcast_add``, ``_npi_add_scalar`` is
``_plus_scalar``): same kernels, same rounding.  What NumPy mode changes is the
dtype rule (:mod:`._common`): binaries accept mixed operand dtypes and run in
the promoted type, ``true_divide`` of integers gives float32, comparisons and
the ``is*`` predicates give ``bool``.  Ops with no legacy twin
(``arctan2``, ``copysign``, ``ldexp``, ``lcm``, the bitwise family,
``isnan``...) define their kernel here, written in the same style.
"""

from __future__ import annotations

import numpy as np

from .. import broadcast as _bc
from .. import elemwise_scalar as _sc
from .. import elemwise_unary as _un
from ..common import BroadcastOp, UnaryOp, cast_to
from ..elemwise_binary import KERNELS, scalar_as, swapped, via_float
from ..elemwise_scalar import ScalarOp
from ..registry import Attr, definitions_in, optional, register_op, to_bool, to_float, to_int
from ....errors import DTypeError
from ._common import NumpyOpMixin, float_result, promote


def require_integers(op, p, dtypes) -> None:
    """Bitwise ops and ``lcm`` are defined on integer (and bool) tensors only."""
    for t in dtypes:
        if t is not None and np.dtype(t).kind not in "iub":
            raise DTypeError(f"operator {op.name} (node {p.node_ref}): needs integer or bool "
                             f"inputs, got {t}")

FAMILY = "numpy.elemwise"


def _class_name(op: str) -> str:
    return "".join(w.capitalize() for w in op.strip("_").split("_"))


#: other names MXNet 1.9.1 registers for these ops (``add_alias``)
_ALIASES = {"_npi_absolute": ("_npi_abs",)}


def _numpy_twin(op: str, base: type, twin: str | None, doc: str, **body) -> type:
    """Register *op* as a subclass of the legacy class *base*, naming its twin."""
    cls = type(_class_name(op), (NumpyOpMixin, base),
               {"twin": twin, "__doc__": doc, "__module__": __name__, **body})
    return register_op(op, family=FAMILY, aliases=_ALIASES.get(op, ()))(cls)


# ---------------------------------------------------------------------------
# unary math: the legacy kernels, NumPy input name ``x``
# ---------------------------------------------------------------------------
_UNARY = {
    "_npi_absolute": "abs", "_npi_negative": "negative", "_npi_reciprocal": "reciprocal",
    "_npi_sqrt": "sqrt", "_npi_cbrt": "cbrt", "_npi_square": "square", "_npi_exp": "exp",
    "_npi_expm1": "expm1", "_npi_log": "log", "_npi_log10": "log10", "_npi_log2": "log2",
    "_npi_log1p": "log1p", "_npi_sin": "sin", "_npi_cos": "cos", "_npi_tan": "tan",
    "_npi_arcsin": "arcsin", "_npi_arccos": "arccos", "_npi_arctan": "arctan",
    "_npi_sinh": "sinh", "_npi_cosh": "cosh", "_npi_tanh": "tanh", "_npi_arcsinh": "arcsinh",
    "_npi_arccosh": "arccosh", "_npi_arctanh": "arctanh", "_npi_sign": "sign",
    "_npi_rint": "rint", "_npi_ceil": "ceil", "_npi_floor": "floor", "_npi_trunc": "trunc",
    "_npi_fix": "fix", "_npi_degrees": "degrees", "_npi_radians": "radians",
    "_npx_relu": "relu", "_npx_sigmoid": "sigmoid",
}
_UNARY_CLASSES = definitions_in(_un)
for _op, _twin in _UNARY.items():
    _numpy_twin(_op, _UNARY_CLASSES[_twin], _twin, f"NumPy ``{_twin}`` (MXNet ``{_twin}``'s "
                f"kernel and dtype rule).", arguments=("x",) if _op.startswith("_npi") else
                ("data",))


class _Predicate(NumpyOpMixin, UnaryOp):
    """``bool`` result of a test on each element (``isnan``, ``logical_not``...)."""

    arguments = ("x",)
    attrs: dict = {}
    test = staticmethod(lambda x: x)

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["bool"]

    def twin_dtype(self, p, in_dtypes, out_dtypes):
        return in_dtypes[0]   # the twin answers 0/1 in the operand's type

    def forward(self, p, inputs, ctx):
        with np.errstate(all="ignore"):
            return [np.asarray(type(self).test(np.asarray(inputs[0]))).astype(np.bool_)]


def _predicate(op: str, test, doc: str, twin: str | None = None) -> type:
    cls = type(_class_name(op), (_Predicate,),
               {"test": staticmethod(test), "twin": twin, "__doc__": doc,
                "__module__": __name__})
    return register_op(op, family=FAMILY)(cls)


_predicate("_npi_logical_not", lambda x: x == 0, "``x == 0`` as bool (NaN is non-zero).",
           twin="logical_not")
_predicate("_npi_isnan", lambda x: np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool),
           "NaN test (never true for integers).")
_predicate("_npi_isinf", lambda x: np.isinf(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool),
           "Infinity test, either sign.")
_predicate("_npi_isfinite",
           lambda x: np.isfinite(x) if x.dtype.kind == "f" else np.ones(x.shape, bool),
           "Neither NaN nor infinite.")
_predicate("_npi_isposinf", lambda x: np.isposinf(x) if x.dtype.kind == "f"
           else np.zeros(x.shape, bool), "``x == +inf``.")
_predicate("_npi_isneginf", lambda x: np.isneginf(x) if x.dtype.kind == "f"
           else np.zeros(x.shape, bool), "``x == -inf``.")


@register_op("_npi_bitwise_not", family=FAMILY)
class BitwiseNot(NumpyOpMixin, UnaryOp):
    """``~x`` on integers; logical not on bool."""

    arguments = ("x",)

    def infer_type(self, p, in_types, out_types):
        require_integers(self, p, in_types)
        return super().infer_type(p, in_types, out_types)

    def forward(self, p, inputs, ctx):
        return [np.invert(np.asarray(inputs[0]))]


@register_op("_npi_around", family=FAMILY)
class Around(NumpyOpMixin, UnaryOp):
    """Round to ``decimals`` places, halves to even (NumPy's ``around``)."""

    arguments = ("x",)
    attrs = {"decimals": Attr(to_int, 0)}

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        return [np.around(x, p.decimals).astype(x.dtype)]


@register_op("_npi_nan_to_num", family=FAMILY)
class NanToNum(NumpyOpMixin, UnaryOp):
    """NaN -> ``nan``, +-inf -> ``posinf``/``neginf`` (default: the dtype's extremes)."""

    arguments = ("data",)
    attrs = {"copy": Attr(to_bool, True), "nan": Attr(to_float, 0.0),
             "posinf": Attr(optional(to_float), None), "neginf": Attr(optional(to_float), None)}

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        if x.dtype.kind != "f":
            return [x.copy()]
        return [np.nan_to_num(x, nan=p.nan, posinf=p.posinf, neginf=p.neginf).astype(x.dtype)]


# ---------------------------------------------------------------------------
# broadcasting binaries with NumPy-mode promotion
# ---------------------------------------------------------------------------
class NumpyBinaryMixin(NumpyOpMixin):
    """Mixed operand dtypes run in :func:`promote`'s type; see :meth:`result_dtype`."""

    arguments = ("lhs", "rhs")
    attrs: dict = {}
    result = "same"   # "same" | "bool" | "float"

    def twin_dtype(self, p, in_dtypes, out_dtypes):
        work = promote(*in_dtypes[:2])
        return float_result(work) if self.result == "float" else work

    def result_dtype(self, lhs: str | None, rhs: str | None) -> str | None:
        """The output dtype for operand dtypes *lhs*, *rhs* (None when unknown)."""
        work = promote(lhs, rhs)
        if work is None:
            return None
        return {"bool": "bool", "float": float_result(work)}.get(self.result, work)

    def infer_type(self, p, in_types, out_types):
        out = self.result_dtype(in_types[0], in_types[1])
        if out is None and out_types[0] is not None and self.result == "same":
            t = out_types[0]   # both unknown: the plain case, as MXNet's backward pass
            return [in_types[0] or t, in_types[1] or t], [t]
        return list(in_types), [out if out is not None else out_types[0]]

    def forward(self, p, inputs, ctx):
        work = self.twin_dtype(p, [np.asarray(x).dtype.name for x in inputs], [])
        a, b = (np.asarray(x).astype(work, copy=False) for x in inputs)
        return super().forward(p, [a, b], ctx)


_BINARY = {
    "_npi_add": ("broadcast_add", "same"), "_npi_subtract": ("broadcast_sub", "same"),
    "_npi_multiply": ("broadcast_mul", "same"), "_npi_true_divide": ("broadcast_div", "float"),
    "_npi_mod": ("broadcast_mod", "same"), "_npi_power": ("broadcast_power", "same"),
    "_npi_hypot": ("broadcast_hypot", "same"),
    "_npi_equal": ("broadcast_equal", "bool"), "_npi_not_equal": ("broadcast_not_equal", "bool"),
    "_npi_greater": ("broadcast_greater", "bool"),
    "_npi_greater_equal": ("broadcast_greater_equal", "bool"),
    "_npi_less": ("broadcast_lesser", "bool"),
    "_npi_less_equal": ("broadcast_lesser_equal", "bool"),
    "_npi_logical_and": ("broadcast_logical_and", "bool"),
    "_npi_logical_or": ("broadcast_logical_or", "bool"),
    "_npi_logical_xor": ("broadcast_logical_xor", "bool"),
    "_npi_maximum": ("broadcast_maximum", "same"), "_npi_minimum": ("broadcast_minimum", "same"),
}
_BROADCAST_CLASSES = definitions_in(_bc)
for _op, (_twin, _result) in _BINARY.items():
    _base = _BROADCAST_CLASSES[_twin]
    register_op(_op, family=FAMILY)(type(
        _class_name(_op), (NumpyBinaryMixin, _base),
        {"twin": _twin, "result": _result, "__module__": __name__,
         "__doc__": f"NumPy form of ``{_twin}``: mixed dtypes promoted, result {_result}."}))


def _copysign(a, b):
    return np.copysign(a, b)


def _ldexp(a, b):
    return a * np.power(a.dtype.type(2), b)


def _lcm(a, b):
    return np.lcm(a, b)


#: kernels defined on integer tensors only
INTEGER_KERNELS = frozenset({"lcm", "bitwise_and", "bitwise_or", "bitwise_xor"})

#: kernels of binary ops that have no legacy twin (same contract as ``KERNELS``)
NUMPY_KERNELS = {
    "arctan2": via_float(np.arctan2),
    "copysign": via_float(_copysign),
    "ldexp": via_float(_ldexp),
    "lcm": _lcm,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}


class _NumpyKernelBinary(NumpyBinaryMixin, BroadcastOp):
    """A broadcasting binary whose kernel lives in :data:`NUMPY_KERNELS`."""

    kernel = ""
    integer_only = False

    def infer_type(self, p, in_types, out_types):
        if self.integer_only:
            require_integers(self, p, in_types)
        return super().infer_type(p, in_types, out_types)

    def forward(self, p, inputs, ctx):
        work = self.twin_dtype(p, [np.asarray(x).dtype.name for x in inputs], [])
        a, b = (np.asarray(x).astype(work, copy=False) for x in inputs)
        with np.errstate(all="ignore"):
            out = NUMPY_KERNELS[self.kernel](a, b)
        return [cast_to(out, ctx.out_dtypes[0] or work)]


for _op, _kernel in (("_npi_arctan2", "arctan2"), ("_npi_copysign", "copysign"),
                     ("_npi_ldexp", "ldexp"), ("_npi_lcm", "lcm"),
                     ("_npi_bitwise_and", "bitwise_and"), ("_npi_bitwise_or", "bitwise_or"),
                     ("_npi_bitwise_xor", "bitwise_xor")):
    register_op(_op, family=FAMILY)(type(
        _class_name(_op), (_NumpyKernelBinary,),
        {"kernel": _kernel, "integer_only": _kernel in INTEGER_KERNELS,
         "__module__": __name__, "__doc__": f"NumPy ``{_kernel}``."}))


# ---------------------------------------------------------------------------
# tensor-scalar ops: the legacy ScalarOp (same ``scalar``/``is_int`` schema and dtype rule)
# ---------------------------------------------------------------------------
_SCALAR = {
    "_npi_add_scalar": "_plus_scalar", "_npi_subtract_scalar": "_minus_scalar",
    "_npi_rsubtract_scalar": "_rminus_scalar", "_npi_multiply_scalar": "_mul_scalar",
    "_npi_mod_scalar": "_mod_scalar", "_npi_rmod_scalar": "_rmod_scalar",
    "_npi_power_scalar": "_power_scalar", "_npi_rpower_scalar": "_rpower_scalar",
    "_npi_maximum_scalar": "_maximum_scalar", "_npi_minimum_scalar": "_minimum_scalar",
    "_npi_hypot_scalar": "_hypot_scalar",
}
_SCALAR_CLASSES = definitions_in(_sc)
for _op, _twin in _SCALAR.items():
    _numpy_twin(_op, _SCALAR_CLASSES[_twin], _twin, f"NumPy form of ``{_twin}``.")


class _NumpyScalarOp(NumpyOpMixin, ScalarOp):
    """A tensor-scalar op with a NumPy-mode result dtype (``result``: same/bool/float)."""

    result = "same"
    integer_only = False

    def twin_dtype(self, p, in_dtypes, out_dtypes):
        return None if in_dtypes[0] is None else self._dtypes(p, in_dtypes[0])[0]

    def _dtypes(self, p, t_in):
        if self.result == "float":   # MXNet's TrueDivideType: integers divide in float32
            work = float_result(t_in)
            return work, work
        work = _sc.scalar_op_dtype(t_in, p.is_int)
        return work, "bool" if self.result == "bool" else work

    def infer_type(self, p, in_types, out_types):
        if self.integer_only:
            require_integers(self, p, in_types)
        if in_types[0] is None:
            return super().infer_type(p, in_types, out_types) if self.result == "same" \
                else (list(in_types), list(out_types))
        return list(in_types), [self._dtypes(p, in_types[0])[1]]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        work, out = self._dtypes(p, x.dtype.name)
        s = scalar_as(p.scalar, work)
        with np.errstate(all="ignore"):
            y = type(self).kernel(x.astype(work, copy=False), s)
        return [cast_to(y, ctx.out_dtypes[0] or out)]


def _np_scalar(op: str, kernel, result: str = "same", twin: str | None = None,
               integer_only: bool = False) -> type:
    cls = type(_class_name(op), (_NumpyScalarOp,),
               {"kernel": staticmethod(kernel), "result": result, "twin": twin,
                "integer_only": integer_only,
                "__module__": __name__, "__doc__": f"NumPy tensor-scalar op ``{op}``."})
    return register_op(op, family=FAMILY)(cls)


_np_scalar("_npi_true_divide_scalar", KERNELS["div"], "float", "_div_scalar")
_np_scalar("_npi_rtrue_divide_scalar", via_float(lambda a, b: b / a), "float", "_rdiv_scalar")
for _op, _k in (("equal", "equal"), ("not_equal", "not_equal"), ("greater", "greater"),
                ("greater_equal", "greater_equal"), ("less", "lesser"),
                ("less_equal", "lesser_equal"), ("logical_and", "logical_and"),
                ("logical_or", "logical_or"), ("logical_xor", "logical_xor")):
    _np_scalar(f"_npi_{_op}_scalar", KERNELS[_k], "bool", f"_{_k}_scalar")
for _op, _k in (("arctan2", "arctan2"), ("copysign", "copysign"), ("ldexp", "ldexp")):
    _np_scalar(f"_npi_{_op}_scalar", NUMPY_KERNELS[_k])
    _np_scalar(f"_npi_r{_op}_scalar", swapped(NUMPY_KERNELS[_k]))
for _op in ("bitwise_and", "bitwise_or", "bitwise_xor", "lcm"):
    _np_scalar(f"_npi_{_op}_scalar", NUMPY_KERNELS[_op], integer_only=True)

__all__ = ["NUMPY_KERNELS", "NumpyBinaryMixin", "definitions_in"]
