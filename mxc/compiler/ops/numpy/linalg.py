"""DeepNumpy products and linear algebra: ``dot``, ``matmul``, ``tensordot``, ``einsum``,
``polyval`` and ``np.linalg`` (cholesky, solve, svd, eig/eigh/eigvals/eigvalsh,
pinv, tensorinv, tensorsolve, det, slogdet).

Products follow NumPy exactly (``matmul`` broadcasts batch dimensions, a 1-D
operand is promoted and the added axis removed).  Decompositions compute in
double with LAPACK (through numpy) and cast back; the conventions MXNet 1.9.1
shows are NumPy's: ``svd`` returns ``(U, s, V^T)`` of the reduced
decomposition, ``eigh`` eigenvectors are columns with LAPACK's signs, ``eig``
returns the real parts (MXNet rejects inputs with complex eigenvalues).
"""

from __future__ import annotations

import numpy as np

from ..registry import Attr, enum, register_op, shape_error, to_bool, to_float, to_int, to_shape, \
    to_str
from ....errors import ExecutionError
from ..common import contiguous
from ._common import NumpyFunctionOp, to_opt_axes

FAMILY = "numpy.linalg"


def _register(op: str):
    return register_op(op, family=FAMILY)


def _f64(x):
    return np.asarray(x, dtype=np.float64)


class _Linalg(NumpyFunctionOp):
    """Every input and output shares the input dtype; values computed in double."""

    def infer_type(self, p, in_types, out_types):
        known = next((t for t in in_types if t is not None), None)
        if known is None:
            return list(in_types), list(out_types)
        return [known] * len(in_types), [known] * len(out_types)

    def stand_in(self, shape):
        """Identity matrices (batched): every decomposition of them exists."""
        if len(shape) < 2:
            return np.ones(shape)
        return np.broadcast_to(np.eye(shape[-2], shape[-1]), shape)

    def forward(self, p, inputs, ctx):
        dt = np.asarray(inputs[0]).dtype
        outs = self.compute(p, [_f64(x) if np.asarray(x).dtype.kind == "f" else np.asarray(x)
                                for x in inputs])
        return [contiguous(np.asarray(o).astype(ctx.out_dtypes[i] or dt))
                for i, o in enumerate(outs)]


# ---------------------------------------------------------------------------
# products
# ---------------------------------------------------------------------------
class _Product(_Linalg):
    """Products: the output shape follows from the operand shapes without running the
    product on stand-ins (which would cost a full matmul at inference time)."""

    arguments = ("a", "b")

    def product_shape(self, p, a: tuple, b: tuple) -> tuple:
        raise NotImplementedError

    def infer_shape(self, p, in_shapes, out_shapes):
        a, b = in_shapes
        if a is None or b is None or None in a or None in b:
            return list(in_shapes), list(out_shapes)
        return list(in_shapes), [self.product_shape(p, tuple(a), tuple(b))]


def _matmul_shape(p, a: tuple, b: tuple) -> tuple:
    if not a or not b:
        raise shape_error(p, "matmul does not take 0-d operands")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise shape_error(p, f"matmul: inner extents differ ({a} @ {b})")
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@_register("_np_dot")
class NpDot(_Product):
    twin = "dot"

    def product_shape(self, p, a, b):
        if not a or not b:
            return a or b
        if a[-1] != (b[-2] if len(b) > 1 else b[0]):
            raise shape_error(p, f"dot: inner extents differ ({a} . {b})")
        return a[:-1] + (b[:-2] + b[-1:] if len(b) > 1 else ())

    def compute(self, p, arrays):
        return [np.dot(arrays[0], arrays[1])]


@_register("_npi_matmul")
class NpMatmul(_Product):
    def output_names(self, p):
        return ["out"]

    def product_shape(self, p, a, b):
        return _matmul_shape(p, a, b)

    def compute(self, p, arrays):
        return [np.matmul(arrays[0], arrays[1])]


def _tensordot_shape(p, a: tuple, b: tuple, a_axes, b_axes) -> tuple:
    a_axes = [x % len(a) for x in a_axes] if a else []
    b_axes = [x % len(b) for x in b_axes] if b else []
    if [a[i] for i in a_axes] != [b[j] for j in b_axes]:
        raise shape_error(p, f"tensordot: summed extents differ ({a} over {a_axes}, "
                             f"{b} over {b_axes})")
    return tuple(d for i, d in enumerate(a) if i not in a_axes) + \
        tuple(d for j, d in enumerate(b) if j not in b_axes)


@_register("_npi_tensordot")
class NpTensordot(_Product):
    attrs = {"a_axes_summed": Attr(to_shape), "b_axes_summed": Attr(to_shape)}

    def product_shape(self, p, a, b):
        return _tensordot_shape(p, a, b, p.a_axes_summed, p.b_axes_summed)

    def compute(self, p, arrays):
        return [np.tensordot(arrays[0], arrays[1], axes=(p.a_axes_summed, p.b_axes_summed))]


@_register("_npi_tensordot_int_axes")
class NpTensordotIntAxes(_Product):
    attrs = {"axes": Attr(to_int)}

    def product_shape(self, p, a, b):
        k = p.axes
        return _tensordot_shape(p, a, b, list(range(len(a) - k, len(a))), list(range(k)))

    def compute(self, p, arrays):
        return [np.tensordot(arrays[0], arrays[1], axes=p.axes)]


@_register("_npi_einsum")
class NpEinsum(_Linalg):
    """``einsum(subscripts, *operands)`` (``optimize`` only changes MXNet's path search)."""

    attrs = {"num_args": Attr(to_int), "subscripts": Attr(to_str),
             "optimize": Attr(to_int, 0)}

    def input_names(self, p):
        return [f"data{i}" for i in range(p.num_args)]

    def infer_shape(self, p, in_shapes, out_shapes):
        spec = p.subscripts.strip("'\"").replace(" ", "")
        if "..." in spec or "->" not in spec or \
                any(s is None or None in s for s in in_shapes):
            return super().infer_shape(p, in_shapes, out_shapes)
        ins, out = spec.split("->")
        extent: dict = {}
        for letters, shape in zip(ins.split(","), in_shapes):
            if len(letters) != len(shape):
                raise shape_error(p, f"einsum: {letters!r} does not match shape {shape}")
            for c, d in zip(letters, shape):
                if extent.setdefault(c, d) != d and 1 not in (d, extent[c]):
                    raise shape_error(p, f"einsum: index {c!r} has extents {extent[c]} and {d}")
                extent[c] = max(extent[c], d)
        return list(in_shapes), [tuple(extent[c] for c in out)]

    def compute(self, p, arrays):
        return [np.einsum(p.subscripts.strip("'\""), *arrays)]


@_register("_npi_polyval")
class NpPolyval(_Linalg):
    """``polyval(p, x)``: Horner's rule, highest power first."""

    arguments = ("p", "x")

    def compute(self, p, arrays):
        return [np.polyval(arrays[0], arrays[1])]


# ---------------------------------------------------------------------------
# np.linalg
# ---------------------------------------------------------------------------
def _largest_positive(vectors: np.ndarray, axis: int) -> np.ndarray:
    """+-1 per vector along *axis* making its largest-magnitude entry positive.

    Singular/eigen vectors are defined up to sign; MXNet 1.9.1's ``_npi_svd``
    (rows of V) and ``_npi_eigh`` (columns) come out with this orientation,
    which also makes the result independent of the LAPACK build.
    """
    idx = np.expand_dims(np.argmax(np.abs(vectors), axis=axis), axis)
    pick = np.take_along_axis(vectors, idx, axis=axis)
    return np.where(np.squeeze(pick, axis) < 0, -1.0, 1.0)



# ---------------------------------------------------------------------------
@_register("_npi_cholesky")
class NpCholesky(_Linalg):
    arguments = ("A",)
    attrs = {"lower": Attr(to_bool, True)}

    def compute(self, p, arrays):
        low = np.linalg.cholesky(arrays[0])
        return [low if p.lower else np.swapaxes(low, -1, -2)]


@_register("_npi_solve")
class NpSolve(_Linalg):
    arguments = ("a", "b")

    def compute(self, p, arrays):
        a, b = arrays
        if b.ndim == a.ndim - 1:   # a vector (batch) right-hand side
            return [np.linalg.solve(a, b[..., None])[..., 0]]
        return [np.linalg.solve(a, b)]


@_register("_npi_svd")
class NpSvd(_Linalg):
    """``(UT, L, V)`` with ``A = UT @ diag(L) @ V`` (reduced; descending ``L``)."""

    arguments = ("A",)

    def num_outputs(self, p):
        return 3

    def compute(self, p, arrays):
        u, s, vt = np.linalg.svd(arrays[0], full_matrices=False)
        sign = _largest_positive(vt, axis=-1)          # one sign per row of V
        return [u * sign[..., None, :], s, vt * sign[..., :, None]]


@_register("_npi_eigh")
class NpEigh(_Linalg):
    arguments = ("A",)
    attrs = {"UPLO": Attr(enum("L", "U"), "L")}

    def num_outputs(self, p):
        return 2

    def compute(self, p, arrays):
        w, v = np.linalg.eigh(arrays[0], UPLO=p.UPLO)
        return [w, v * _largest_positive(v, axis=-2)[..., None, :]]


@_register("_npi_eigvalsh")
class NpEigvalsh(_Linalg):
    arguments = ("A",)
    attrs = {"UPLO": Attr(enum("L", "U"), "L")}

    def compute(self, p, arrays):
        return [np.linalg.eigvalsh(arrays[0], UPLO=p.UPLO)]


def _require_real(p, eigenvalues: np.ndarray) -> None:
    """MXNet's ``eig``/``eigvals`` return real arrays and reject complex spectra."""
    if np.iscomplexobj(eigenvalues) and np.any(np.imag(eigenvalues) != 0):
        raise ExecutionError(f"operator {p.node.op if p.node else 'eig'} (node "
                             f"{p.node_ref}): the input has complex eigenvalues, which "
                             f"MXNet's real-valued eig/eigvals do not represent")


@_register("_npi_eig")
class NpEig(_Linalg):
    arguments = ("A",)

    def num_outputs(self, p):
        return 2

    def compute(self, p, arrays):
        w, v = np.linalg.eig(arrays[0])
        _require_real(p, w)
        return [np.real(w), np.real(v)]


@_register("_npi_eigvals")
class NpEigvals(_Linalg):
    arguments = ("A",)

    def compute(self, p, arrays):
        w = np.linalg.eigvals(arrays[0])
        _require_real(p, w)
        return [np.real(w)]


@_register("_npi_pinv")
class NpPinv(_Linalg):
    """Pseudo-inverse with a tensor ``rcond`` (broadcast over the batch)."""

    arguments = ("A", "rcond")
    attrs = {"hermitian": Attr(to_bool, False)}

    def compute(self, p, arrays):
        return [np.linalg.pinv(arrays[0], rcond=arrays[1], hermitian=p.hermitian)]


@_register("_npi_pinv_scalar_rcond")
class NpPinvScalarRcond(_Linalg):
    arguments = ("A",)
    attrs = {"rcond": Attr(to_float, 1e-15), "hermitian": Attr(to_bool, False)}

    def compute(self, p, arrays):
        return [np.linalg.pinv(arrays[0], rcond=p.rcond, hermitian=p.hermitian)]


@_register("_npi_tensorinv")
class NpTensorinv(_Linalg):
    arguments = ("a",)
    attrs = {"ind": Attr(to_int, 2)}

    def infer_shape(self, p, in_shapes, out_shapes):
        a = in_shapes[0]
        if a is None or None in a:
            return list(in_shapes), list(out_shapes)
        return list(in_shapes), [tuple(a[p.ind:]) + tuple(a[:p.ind])]

    def compute(self, p, arrays):
        return [np.linalg.tensorinv(arrays[0], ind=p.ind)]


@_register("_npi_tensorsolve")
class NpTensorsolve(_Linalg):
    arguments = ("a", "b")
    attrs = {"a_axes": Attr(lambda t: to_opt_axes(t) or (), ())}

    def infer_shape(self, p, in_shapes, out_shapes):
        a, b = in_shapes
        if a is None or b is None or None in a:
            return list(in_shapes), list(out_shapes)
        return list(in_shapes), [tuple(a[len(b):])]

    def compute(self, p, arrays):
        return [np.linalg.tensorsolve(arrays[0], arrays[1], axes=p.a_axes or None)]


@_register("_npi_det")
class NpDet(_Linalg):
    arguments = ("A",)

    def compute(self, p, arrays):
        return [np.linalg.det(arrays[0])]


@_register("_npi_slogdet")
class NpSlogdet(_Linalg):
    arguments = ("A",)

    def num_outputs(self, p):
        return 2

    def compute(self, p, arrays):
        sign, logdet = np.linalg.slogdet(arrays[0])
        return [sign, logdet]
