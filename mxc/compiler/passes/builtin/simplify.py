"""``simplify``: remove operators that return their input unchanged.

Always: ``_copy``/``identity``, ``BlockGrad``/``stop_gradient``.  Where
inference knows the shapes (parameter arrays, input shapes given to the
pipeline, ``__shape__`` attributes; a dtype nothing declares is float32, as
MXNet binds it): ``Reshape``/``Flatten`` to the
input's own shape, ``Cast`` to the input's dtype, ``transpose`` with the
identity permutation, ``SwapAxis`` of an axis with itself, and ``x + 0``,
``x - 0``, ``x * 1``, ``x / 1`` (scalar ops that keep the dtype).

A node is kept when removing it would make a graph output a variable
(MXNet names outputs after their node).
"""

from __future__ import annotations

from ....errors import MxcError
from ...ops.elemwise_scalar import scalar_op_dtype
from ..context import TypeInfo
from ..pattern import is_op
from ..registry import register_pass
from ..rewrite import RewritePattern, rewrite

ALWAYS_IDENTITY = ("_copy", "BlockGrad")
SAME_SHAPE = ("Reshape", "Flatten")
NEUTRAL_SCALAR = {"_plus_scalar": 0.0, "_minus_scalar": 0.0, "_mul_scalar": 1.0,
                  "_div_scalar": 1.0}


@register_pass("simplify", extra_options=False)
def simplify(graph, ctx):
    """Remove identity-like ops: copies, no-op reshapes/casts/transposes, x*1, x+0."""
    try:
        info = ctx.infer()
    except MxcError:  # shapes are a bonus here, not a requirement
        ctx.stat("shape inference failed")
        info = TypeInfo({}, {})

    def forward_input(m):
        node = m.root.node
        src = node.inputs[0]
        if src.node.op is None and any(e.key == m.root.key for e in graph.outputs):
            return None  # keep: the output would become a variable
        ctx.stat(f"removed {node.opdef.name}")
        return src

    def same_shape(node):
        s_in, s_out = info.full_shape(node.inputs[0]), info.full_shape(node.out)
        return s_in is not None and s_in == s_out

    def dtype_in(node):  # MXNet binds a variable of unknown dtype as float32
        return info.dtype(node.inputs[0]) or "float32"

    def same_dtype(node):
        return dtype_in(node) == node.params.dtype

    def identity_transpose(node):
        shape = info.shape(node.inputs[0])
        axes = node.params.axes
        if axes:
            return tuple(axes) == tuple(range(len(axes)))
        return shape is not None and len(shape) <= 1

    def neutral_scalar(node):
        p = node.params
        keeps_dtype = scalar_op_dtype(dtype_in(node), p.is_int) == dtype_in(node)
        return p.scalar == NEUTRAL_SCALAR[node.opdef.name] and keeps_dtype

    rules = [
        RewritePattern(is_op(*ALWAYS_IDENTITY), forward_input, name="identity"),
        RewritePattern(is_op(*SAME_SHAPE).where(same_shape), forward_input, name="reshape"),
        RewritePattern(is_op("Cast").where(same_dtype), forward_input, name="cast"),
        RewritePattern(is_op("transpose").where(identity_transpose), forward_input,
                       name="transpose"),
        RewritePattern(is_op("SwapAxis").has_attr(lambda p: p.dim1 == p.dim2), forward_input,
                       name="swapaxis"),
        RewritePattern(is_op(*NEUTRAL_SCALAR).where(neutral_scalar), forward_input,
                       name="scalar"),
    ]
    rewrite(ctx, rules)
