"""DeepNumpy shape manipulation (``mxc/compiler/ops/numpy/shape.py``).

Every output shape is static at lowering time, so reshapes are ``reshape`` to
the inferred shape; joins are ``concat`` of inputs first reshaped the way the
NumPy function reshapes them (the inferred output tells the join axis).
"""

from __future__ import annotations

from ...converter import Lowering, register_converter, register_host_only
from .._common import R, pos_axis
from ..join_split import split_pieces
from ._twins import register_twins


@register_converter("_npi_concatenate")
def concatenate(ctx: Lowering):
    xs = [ctx.astype(x, ctx.out_dtype) for x in ctx.inputs]
    if ctx.p.axis is None:
        xs = [ctx.reshape(x, (-1,) if False else (_size(s),)) for x, s in zip(xs, ctx.in_shapes)]
        axis = 0
    else:
        axis = pos_axis(ctx.p.axis, len(ctx.out_shape))
    return xs[0] if len(xs) == 1 else R.concat(xs, axis=axis)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _joined(axis_of):
    """A join whose inputs are first reshaped to the rank of the output."""
    def convert(ctx: Lowering):
        out = ctx.out_shape
        axis = axis_of(ctx)
        xs = []
        for x, s in zip(ctx.inputs, ctx.in_shapes):
            target = list(out)
            if len(s) == len(out):
                target[axis] = s[axis]
            else:
                target[axis] = _size(s) // max(_size(out) // out[axis], 1)
            xs.append(ctx.reshape(x, _promoted(s, len(out), ctx.op, target)))
        return xs[0] if len(xs) == 1 else R.concat(xs, axis=axis)
    return convert


def _promoted(shape, ndim: int, op: str, target) -> tuple:
    """The shape NumPy gives one input of vstack/hstack/dstack/column_stack."""
    shape = tuple(shape)
    if len(shape) >= ndim:
        return shape
    if op == "_npi_vstack":          # atleast_2d: (n,) -> (1, n)
        return (1,) * (ndim - len(shape)) + shape
    if op == "_npi_dstack":          # atleast_3d: (n,) -> (1, n, 1); (m, n) -> (m, n, 1)
        return (1,) + shape + (1,) if len(shape) == 1 else shape + (1,)
    if op == "_npi_column_stack":    # a 1-D input becomes a column
        return shape + (1,)
    return tuple(target)


register_converter("_npi_vstack")(_joined(lambda ctx: 0))
register_converter("_npi_hstack")(_joined(lambda ctx: 0 if len(ctx.out_shape) == 1 else 1))
register_converter("_npi_dstack")(_joined(lambda ctx: 2))
register_converter("_npi_column_stack")(_joined(lambda ctx: 1))


@register_converter("_np_atleast_1d", "_np_atleast_2d", "_np_atleast_3d")
def atleast(ctx: Lowering):
    return [ctx.reshape(x, s) for x, s in zip(ctx.inputs, ctx.out_shapes)]


@register_converter("_np_moveaxis")
def moveaxis(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    source = [pos_axis(a, ndim) for a in ctx.p.source]
    dest = [pos_axis(a, ndim) for a in ctx.p.destination]
    perm = [a for a in range(ndim) if a not in source]
    for d, s in sorted(zip(dest, source)):
        perm.insert(d, s)
    return R.permute_dims(ctx.inputs[0], perm)


@register_converter("_npi_flip")
def flip(ctx: Lowering):
    x = ctx.inputs[0]
    ndim = len(ctx.in_shapes[0])
    axes = range(ndim) if ctx.p.axis is None else sorted({pos_axis(a, ndim) for a in ctx.p.axis})
    for a in axes:
        x = ctx.emit(R.flip(x, a))
    return x


@register_converter("_npi_tril", "_npi_triu")
def triangle(ctx: Lowering):
    fn = R.tril if ctx.op == "_npi_tril" else R.triu
    return fn(ctx.inputs[0], ctx.p.k)


@register_converter("_npi_hsplit", "_npi_vsplit", "_npi_dsplit")
def split(ctx: Lowering):
    """Pieces along the split axis, each reshaped to its inferred output shape."""
    shape = ctx.in_shapes[0]
    axis = {"_npi_vsplit": 0, "_npi_dsplit": 2}.get(ctx.op, 1 if len(shape) > 1 else 0)
    p = ctx.p
    if p.sections > 0:
        step = shape[axis] // p.sections
        bounds = [i * step for i in range(p.sections)] + [shape[axis]]
    else:
        bounds = [min(i, shape[axis]) for i in p.indices] + [shape[axis]]
    return split_pieces(ctx, axis, bounds)


register_host_only(
    "_np_roll", "_npi_rot90", "_np_diag", "_np_diagflat", "_np_diagonal", "_npi_pad",
    reason="index-reordering NumPy functions seen in pre/post-processing, not in model "
           "bodies; the host kernel is NumPy's own")


register_twins(__name__)
