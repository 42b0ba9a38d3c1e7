"""MXNet's ``linalg`` operators (``_linalg_*``) and ``khatri_rao``, MXNet 1.9.1 semantics.

Every op works on batches of matrices held in the last two axes (``gemm`` /
``gemm2`` also take a row ``axis``); leading axes are batch axes.  Only
float32/float64 are accepted, as in MXNet (``MSHADOW_SGL_DBL_TYPE_SWITCH``).

Conventions that differ from NumPy and are visible in the outputs:

* ``potrf`` returns the lower Cholesky factor (``lower=False``: the upper);
  ``potri`` takes that factor and returns the inverse of ``L L^T``;
* ``trmm``/``trsm`` read only the ``lower`` (or upper) triangle of ``A``;
* ``syevd`` returns eigenvectors as ROWS of ``U`` (``A = U^T diag(l) U``),
  eigenvalues ascending, each row scaled so its largest-magnitude entry is
  positive;
* ``gelqf`` (``A = L Q``) keeps LAPACK's signs: the diagonal of ``L`` may be
  negative (the Householder LQ of ``A`` is the Householder QR of ``A^T``);
* ``det``/``slogdet`` have two hidden outputs (the LU factors and the int32
  pivots) after the visible ones; ``extracttrian``/``maketrian`` pack a lower
  triangle row by row and an upper one column by column.
"""

from __future__ import annotations

import numpy as np

from ...errors import ExecutionError
from .common import attr_error, fmt_shape, merge_into
from .nn_dense import LinalgGemm2
from .registry import Attr, OpDef, register_op, shape_error, to_bool, to_float, to_int

_FLOATS = ("float32", "float64")


def _square(p, shape, what: str = "A") -> int | None:
    """Check *shape* holds square matrices; return their order."""
    if len(shape) < 2:
        raise shape_error(p, f"{what} must be a tensor of matrices (rank >= 2), got "
                             f"{fmt_shape(shape)}")
    n, m = shape[-2], shape[-1]
    if n is not None and m is not None and n != m:
        raise shape_error(p, f"{what} must hold square matrices, got {fmt_shape(shape)}")
    return n if n is not None else m


def _tril(a: np.ndarray, lower: bool, k: int = 0) -> np.ndarray:
    return np.tril(a, k) if lower else np.triu(a, -k)


def _mirror_lower(a: np.ndarray) -> np.ndarray:
    """The symmetric matrix LAPACK sees when it reads only the lower triangle of *a*."""
    return np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)


class _LinalgOp(OpDef):
    """float32/float64 only; every input and visible output shares the dtype."""

    arguments = ("A",)

    def infer_type(self, p, in_types, out_types):
        known = next((t for t in list(in_types) + list(out_types)[:self.num_visible_outputs(p)]
                      if t is not None), None)
        if known is None:
            return in_types, out_types
        if known not in _FLOATS:
            raise shape_error(p, f"linalg operators only support float32 and float64, "
                                 f"got {known}")
        return [known] * len(in_types), [known] * len(out_types)

    @staticmethod
    def work(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)


class _SameShapeOp(_LinalgOp):
    """Square matrices in, the same shape out (potrf, potri, inverse)."""

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        merge_into(p, ins, 0, outs[0], "A and output")
        if ins[0] is not None:
            _square(p, ins[0])
        outs[0] = ins[0]
        return ins, outs


@register_op("_linalg_gemm", aliases=("linalg_gemm",))
class LinalgGemm(LinalgGemm2):
    """``alpha * op(A) op(B) + beta * C``; C has the shape of the product."""

    attrs = dict(LinalgGemm2.attrs, beta=Attr(to_float, 1.0))
    arguments = ("A", "B", "C")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = super().infer_shape(p, list(in_shapes[:2]), list(out_shapes))
        ins = list(ins) + [in_shapes[2]]
        merge_into(p, outs, 0, ins[2], "C and output")
        ins[2] = outs[0]
        return ins, outs

    def forward(self, p, inputs, ctx):
        product = super().forward(p, inputs[:2], ctx)[0]
        c = inputs[2].astype(product.dtype, copy=False)
        return [(product + c * product.dtype.type(p.beta)).astype(product.dtype)]


@register_op("_linalg_potrf", aliases=("linalg_potrf",))
class LinalgPotrf(_SameShapeOp):
    """Cholesky factor of symmetric positive-definite matrices."""

    attrs = {"lower": Attr(to_bool, True)}

    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        try:
            low = np.linalg.cholesky(_mirror_lower(a))
        except np.linalg.LinAlgError:
            raise ExecutionError(f"operator {self.name} (node {p.node_ref}): A is not "
                                 f"symmetric positive definite (Cholesky failed)") from None
        return [low if p.lower else np.swapaxes(low, -1, -2).copy()]


@register_op("_linalg_potri", aliases=("linalg_potri",))
class LinalgPotri(_SameShapeOp):
    """``(L L^T)^-1`` from a Cholesky factor ``L`` (``(U^T U)^-1`` when upper)."""

    attrs = {"lower": Attr(to_bool, True)}

    def forward(self, p, inputs, ctx):
        t = _tril(self.work(inputs[0]), p.lower)
        inv_t = np.linalg.inv(t)
        if p.lower:  # (L L^T)^-1 = L^-T L^-1
            out = np.swapaxes(inv_t, -1, -2) @ inv_t
        else:        # (U^T U)^-1 = U^-1 U^-T
            out = inv_t @ np.swapaxes(inv_t, -1, -2)
        return [out.astype(inputs[0].dtype)]


@register_op("_linalg_inverse", aliases=("linalg_inverse",))
class LinalgInverse(_SameShapeOp):
    def forward(self, p, inputs, ctx):
        return [np.linalg.inv(self.work(inputs[0])).astype(inputs[0].dtype)]


class _TriangularOp(_LinalgOp):
    """trmm/trsm: triangular ``A`` (square) times or solved against ``B``."""

    attrs = {
        "transpose": Attr(to_bool, False),
        "rightside": Attr(to_bool, False),
        "lower": Attr(to_bool, True),
        "alpha": Attr(to_float, 1.0),
    }
    arguments = ("A", "B")

    def out_shape(self, p, a, b):
        """The output shape MXNet derives from A and B."""
        nd = len(a)
        batch = []
        for i in range(nd - 2):
            if a[i] is not None and b[i] is not None and a[i] != b[i]:
                raise shape_error(p, f"A {fmt_shape(a)} and B {fmt_shape(b)} differ outside "
                                     f"the last two axes")
            batch.append(a[i] if a[i] is not None else b[i])
        n = _square(p, a)
        k = b[-1] if p.rightside else b[-2]
        if n is not None and k is not None and n != k:
            raise shape_error(p, f"incompatible matrix dimensions: A {fmt_shape(a)}, "
                                 f"B {fmt_shape(b)}, rightside={p.rightside}")
        return tuple(batch) + ((b[-2], n) if p.rightside else (n, b[-1]))

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        a, b = ins
        if a is not None and b is not None and len(a) >= 2 and len(a) == len(b):
            merge_into(p, outs, 0, self.out_shape(p, a, b), "output")
        elif outs[0] is not None and len(outs[0]) >= 2:
            o = outs[0]
            n = o[-1] if p.rightside else o[-2]
            merge_into(p, ins, 0, tuple(o[:-2]) + (n, n), "A")
            merge_into(p, ins, 1, o, "B")
        return ins, outs

    def operands(self, p, inputs):
        t = _tril(self.work(inputs[0]), p.lower)
        if p.transpose:
            t = np.swapaxes(t, -1, -2)
        return t, self.work(inputs[1])


@register_op("_linalg_trmm", aliases=("linalg_trmm",))
class LinalgTrmm(_TriangularOp):
    """``alpha * op(A) B`` (``alpha * B op(A)`` with ``rightside``)."""

    def forward(self, p, inputs, ctx):
        t, b = self.operands(p, inputs)
        out = (b @ t if p.rightside else t @ b) * b.dtype.type(p.alpha)
        return [out.astype(inputs[1].dtype)]


@register_op("_linalg_trsm", aliases=("linalg_trsm",))
class LinalgTrsm(_TriangularOp):
    """Solve ``op(A) X = alpha B`` (``X op(A) = alpha B`` with ``rightside``)."""

    def forward(self, p, inputs, ctx):
        t, b = self.operands(p, inputs)
        rhs = b * b.dtype.type(p.alpha)
        if p.rightside:  # X T = R  <=>  T^T X^T = R^T
            x = np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(rhs, -1, -2)),
                            -1, -2)
        else:
            x = np.linalg.solve(t, rhs)
        return [x.astype(inputs[1].dtype)]


@register_op("_linalg_syrk", aliases=("linalg_syrk",))
class LinalgSyrk(_LinalgOp):
    """``alpha * A A^T`` (``alpha * A^T A`` with ``transpose``)."""

    attrs = {"transpose": Attr(to_bool, False), "alpha": Attr(to_float, 1.0)}

    def infer_shape(self, p, in_shapes, out_shapes):
        a, outs = in_shapes[0], list(out_shapes)
        if a is not None:
            if len(a) < 2:
                raise shape_error(p, f"A must have rank >= 2, got {fmt_shape(a)}")
            n = a[-1] if p.transpose else a[-2]
            merge_into(p, outs, 0, tuple(a[:-2]) + (n, n), "output")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        at = np.swapaxes(a, -1, -2)
        out = (at @ a if p.transpose else a @ at) * a.dtype.type(p.alpha)
        return [out.astype(inputs[0].dtype)]


class _ReduceOp(_LinalgOp):
    """Square matrices -> one value each: the batch shape, ``(1,)`` for one matrix."""

    def num_outputs(self, p):
        return 1

    def batch_shape(self, p, a):
        _square(p, a)
        return tuple(a[:-2]) if len(a) > 2 else (1,)

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        if ins[0] is not None:
            batch = self.batch_shape(p, ins[0])
            for i in range(self.num_visible_outputs(p)):
                merge_into(p, outs, i, batch, f"output {i}")
            self.hidden_shapes(p, ins[0], outs)
        return ins, outs

    def hidden_shapes(self, p, a, outs) -> None:
        """Shapes of outputs after the visible ones (none by default)."""

    def batch_view(self, p, value: np.ndarray, a: np.ndarray) -> np.ndarray:
        return value.reshape(self.batch_shape(p, a.shape))


@register_op("_linalg_sumlogdiag", aliases=("linalg_sumlogdiag",))
class LinalgSumlogdiag(_ReduceOp):
    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.log(np.diagonal(a, axis1=-2, axis2=-1)).sum(axis=-1)
        return [self.batch_view(p, s, a).astype(inputs[0].dtype)]


class _DetOp(_ReduceOp):
    """det/slogdet: visible outputs, then the hidden LU factors and pivots."""

    visible = 1

    def num_outputs(self, p):
        return self.visible + 2

    def num_visible_outputs(self, p):
        return self.visible

    def hidden_shapes(self, p, a, outs):
        merge_into(p, outs, self.visible, tuple(a), "LU output")
        merge_into(p, outs, self.visible + 1, tuple(a[:-1]), "pivot output")

    def infer_type(self, p, in_types, out_types):
        ins, outs = super().infer_type(p, in_types, out_types)
        if outs[0] is not None:
            outs = list(outs)
            outs[-1] = "int32"
        return ins, outs

    @staticmethod
    def lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Partial-pivoting LU of each matrix (LAPACK getrf layout, 1-based pivots).

        Returns ``(lu, pivots, sign)`` where sign is the permutation's parity.
        """
        n = a.shape[-1]
        lu = a.reshape(-1, n, n).copy()
        piv = np.zeros(lu.shape[:2], dtype=np.int32)
        sign = np.ones(lu.shape[0], dtype=a.dtype)
        for b in range(lu.shape[0]):
            m = lu[b]
            for k in range(n):
                r = k + int(np.argmax(np.abs(m[k:, k])))
                piv[b, k] = r + 1
                if r != k:
                    m[[k, r]] = m[[r, k]]
                    sign[b] = -sign[b]
                if m[k, k] != 0:
                    m[k + 1:, k] /= m[k, k]
                    m[k + 1:, k + 1:] -= np.outer(m[k + 1:, k], m[k, k + 1:])
        return lu.reshape(a.shape), piv.reshape(a.shape[:-1]), sign

    def hidden(self, a: np.ndarray, lu: np.ndarray, piv: np.ndarray) -> list:
        return [lu.astype(a.dtype), piv]


@register_op("_linalg_det", aliases=("linalg_det",))
class LinalgDet(_DetOp):
    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        lu, piv, sign = self.lu(a)
        diag = np.diagonal(lu, axis1=-2, axis2=-1).reshape(-1, a.shape[-1])
        det = sign * np.prod(diag, axis=-1)
        return [self.batch_view(p, det, a).astype(inputs[0].dtype),
                *self.hidden(inputs[0], lu, piv)]


@register_op("_linalg_slogdet", aliases=("linalg_slogdet",))
class LinalgSlogdet(_DetOp):
    """Outputs ``[sign, log|det|]`` (then the hidden LU and pivots)."""

    visible = 2

    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        lu, piv, sign = self.lu(a)
        diag = np.diagonal(lu, axis1=-2, axis2=-1).reshape(-1, a.shape[-1])
        sgn = sign * np.prod(np.sign(diag), axis=-1)
        with np.errstate(divide="ignore"):
            logdet = np.log(np.abs(diag)).sum(axis=-1)
        dt = inputs[0].dtype
        return [self.batch_view(p, sgn, a).astype(dt), self.batch_view(p, logdet, a).astype(dt),
                *self.hidden(inputs[0], lu, piv)]


class _FactorOp(_LinalgOp):
    """One matrix in, two factors out; ``A`` takes the first factor's shape backward."""

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        if ins[0] is None and outs[0] is not None:
            ins[0] = outs[0]
        if ins[0] is not None:
            if len(ins[0]) < 2:
                raise shape_error(p, f"A must have rank >= 2, got {fmt_shape(ins[0])}")
            first, second = self.factor_shapes(p, ins[0])
            merge_into(p, outs, 0, first, "first output")
            merge_into(p, outs, 1, second, "second output")
        return ins, outs

    def factor_shapes(self, p, a) -> tuple:
        raise NotImplementedError


@register_op("_linalg_syevd", aliases=("linalg_syevd",))
class LinalgSyevd(_FactorOp):
    """Symmetric eigendecomposition: ``[U (eigenvectors as rows), l (ascending)]``."""

    def factor_shapes(self, p, a):
        _square(p, a)
        return tuple(a), tuple(a[:-1])

    def forward(self, p, inputs, ctx):
        w, v = np.linalg.eigh(_mirror_lower(self.work(inputs[0])))
        u = np.swapaxes(v, -1, -2)
        idx = np.argmax(np.abs(u), axis=-1)[..., None]
        sign = np.where(np.take_along_axis(u, idx, axis=-1) < 0, -1.0, 1.0)
        dt = inputs[0].dtype
        return [(u * sign).astype(dt), w.astype(dt)]


@register_op("_linalg_gelqf", aliases=("linalg_gelqf",))
class LinalgGelqf(_FactorOp):
    """LQ factorisation ``A = L Q`` of wide matrices (rows <= columns): ``[Q, L]``."""

    def factor_shapes(self, p, a):
        if a[-2] is not None and a[-1] is not None and a[-2] > a[-1]:
            raise shape_error(p, f"A {fmt_shape(a)} must have no more rows than columns")
        return tuple(a), tuple(a[:-1]) + (a[-2],)

    def forward(self, p, inputs, ctx):
        a = self.work(inputs[0])
        q, r = np.linalg.qr(np.swapaxes(a, -1, -2))  # Householder QR of A^T == LQ of A
        dt = inputs[0].dtype
        return [np.swapaxes(q, -1, -2).astype(dt), np.swapaxes(r, -1, -2).astype(dt)]


# ---------------------------------------------------------------------------
# diagonal and triangle packing
# ---------------------------------------------------------------------------
def _trian_index(n: int, offset: int, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) positions, in packing order, of the triangle ``offset``/``lower`` select.

    A lower triangle is packed row by row; an upper one (``offset > 0``, or
    ``offset == 0`` with ``lower=False``) is MXNet's lower packing of the
    transposed matrix, i.e. column by column.
    """
    if offset < 0 or (offset == 0 and lower):
        rows, cols = np.tril_indices(n, offset)
        order = np.lexsort((cols, rows))
    else:
        rows, cols = np.triu_indices(n, offset)
        order = np.lexsort((rows, cols))
    return rows[order], cols[order]


def _diag_index(n: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) positions of diagonal ``offset`` of an ``n x n`` matrix."""
    i = np.arange(n - abs(offset))
    return (i, i + offset) if offset >= 0 else (i - offset, i)


class _DiagTrianOp(_LinalgOp):
    """Packing between matrices and diagonals/triangles.

    ``positions(p, n)`` gives the ``(row, col)`` of each packed element in an
    ``n x n`` matrix, in packing order (what the TVM lowering gathers).
    """

    attrs = {"offset": Attr(to_int, 0)}

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        a = ins[0]
        if a is not None and all(d is not None for d in a[-2:]):
            merge_into(p, outs, 0, self.out_shape(p, a), "output")
        return ins, outs


class _ExtractOp(_DiagTrianOp):
    def out_shape(self, p, a):
        n = _square(p, a)
        k = n - abs(p.offset)
        if k <= 0:
            raise shape_error(p, f"offset {p.offset} is out of range for {n}x{n} matrices")
        return tuple(a[:-2]) + (self.packed(k),)

    def forward(self, p, inputs, ctx):
        rows, cols = self.positions(p, inputs[0].shape[-1])
        return [inputs[0][..., rows, cols].copy()]


class _MakeOp(_DiagTrianOp):
    """Packed values -> matrices, zero outside the diagonal/triangle."""

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        n = self.out_shape(p, x.shape)[-1]
        out = np.zeros(x.shape[:-1] + (n, n), dtype=x.dtype)
        rows, cols = self.positions(p, n)
        out[..., rows, cols] = x
        return [out]


@register_op("_linalg_extractdiag", aliases=("linalg_extractdiag",))
class LinalgExtractdiag(_ExtractOp):
    packed = staticmethod(lambda k: k)

    def positions(self, p, n: int) -> tuple[np.ndarray, np.ndarray]:
        return _diag_index(n, p.offset)


@register_op("_linalg_extracttrian", aliases=("linalg_extracttrian",))
class LinalgExtracttrian(_ExtractOp):
    attrs = {"offset": Attr(to_int, 0), "lower": Attr(to_bool, True)}
    packed = staticmethod(lambda k: k * (k + 1) // 2)

    def positions(self, p, n: int) -> tuple[np.ndarray, np.ndarray]:
        return _trian_index(n, p.offset, p.lower)


@register_op("_linalg_makediag", aliases=("linalg_makediag",))
class LinalgMakediag(_MakeOp):
    def out_shape(self, p, a):
        n = a[-1] + abs(p.offset)
        return tuple(a[:-1]) + (n, n)

    def positions(self, p, n: int) -> tuple[np.ndarray, np.ndarray]:
        return _diag_index(n, p.offset)


@register_op("_linalg_maketrian", aliases=("linalg_maketrian",))
class LinalgMaketrian(_MakeOp):
    attrs = {"offset": Attr(to_int, 0), "lower": Attr(to_bool, True)}

    def out_shape(self, p, a):
        m = int(np.floor(0.5 + (np.sqrt(8 * a[-1] + 1) - 1.0) * 0.5))
        if m * (m + 1) // 2 != a[-1]:
            raise shape_error(p, f"the last axis ({a[-1]}) is not a triangular number")
        n = m + abs(p.offset)
        return tuple(a[:-1]) + (n, n)

    def positions(self, p, n: int) -> tuple[np.ndarray, np.ndarray]:
        return _trian_index(n, p.offset, p.lower)


@register_op("khatri_rao")
class KhatriRao(OpDef):
    """Column-wise Kronecker product of ``num_args`` matrices with equal column counts.

    Rows multiply: ``(r1, c), (r2, c) -> (r1 * r2, c)``, row ``i * r2 + j`` holding
    ``a[i] * b[j]``.
    """

    attrs = {"num_args": Attr(to_int)}

    def validate(self, p):
        if p.num_args < 1:
            raise attr_error(p, "num_args", "must be >= 1", op=self)

    def input_names(self, p):
        return [f"arg{i}" for i in range(p.num_args)]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        if any(s is None for s in ins):
            return ins, outs
        for s in ins:
            if len(s) != 2:
                raise shape_error(p, f"every input must be a matrix, got {fmt_shape(s)}")
        cols = {s[1] for s in ins if s[1] is not None}
        if len(cols) > 1:
            raise shape_error(p, f"inputs must have the same number of columns, got "
                                 f"{', '.join(fmt_shape(s) for s in ins)}")
        rows = 1
        for s in ins:
            rows = None if rows is None or s[0] is None else rows * s[0]
        merge_into(p, outs, 0, (rows, next(iter(cols), None)), "output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        out = inputs[0]
        for m in inputs[1:]:
            out = (out[:, None, :] * m[None, :, :]).reshape(-1, m.shape[1])
        return [out.astype(inputs[0].dtype, copy=False)]
