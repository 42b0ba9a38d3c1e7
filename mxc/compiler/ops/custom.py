"""MXNet's ``Custom`` operator: a Python ``CustomOp`` called from a graph by ``op_type``.

In MXNet, ``mx.sym.Custom(x, op_type="mysoftsign", scale=2)`` runs the
``CustomOpProp`` registered in the Python process under ``"mysoftsign"``.
mxc routes ``op_type`` to the custom operator registered under that name
with mxc's own API (:func:`mxc.register_custom_op`), which is also what the
``mx.operator.register`` shim of :mod:`mxc.mxnet` registers.  Every hook --
arity, input names, auxiliary states, shape/dtype inference, forward --
is the target's, called with the node's attributes minus ``op_type`` (all
strings, as MXNet hands them to the ``CustomOpProp`` constructor).

The compiled backend runs ``Custom`` nodes on the host (a Python callback
cannot be lowered); the artifact stores the node, and the process that loads
it must have registered the same ``op_type``.
"""

from __future__ import annotations

from typing import Mapping

from ...errors import AttributeRequiredError, UnsupportedOpError
from .registry import OpDef, Params, get_op, has_op, node_ref, register_op

_TARGET = "__custom_target__"


@register_op("Custom")
class Custom(OpDef):
    """Dispatch to the custom operator named by the ``op_type`` attribute.

    Arity, names, inference and forward are the target's (:func:`_delegated`).
    """

    arguments = ()

    def parse_attrs(self, raw: Mapping[str, str], node=None) -> Params:
        op_type = raw.get("op_type")
        if not op_type:
            raise AttributeRequiredError(f"operator Custom (node {node_ref(node)}): required "
                                         f"attribute 'op_type' is missing")
        target = self.target_op(op_type, node)
        rest = {k: v for k, v in raw.items() if k != "op_type"}
        inner = target.parse_attrs(rest, node)
        return Params({"op_type": op_type, **rest, _TARGET: (target, inner)}, node)

    @staticmethod
    def custom_target(p: Params) -> tuple[OpDef, Params]:
        """The custom operator a node dispatches to, with that operator's own parameters
        (what a caller of its hooks beyond forward -- gradients -- needs)."""
        return p[_TARGET]

    @staticmethod
    def target_op(op_type: str, node=None) -> OpDef:
        """The custom operator registered as *op_type*; a clear error when there is none."""
        from ..custom_op import is_custom_op, list_custom_ops
        if not has_op(op_type) or not is_custom_op(op_type):
            where = f"node {node.ref}" if node is not None else "graph"
            err = UnsupportedOpError({f"Custom[op_type={op_type}]": 1}, where=where)
            hint = (f"; Custom op_type {op_type!r} is not registered in this process "
                    f"(registered custom operators: {', '.join(list_custom_ops()) or 'none'}): "
                    f"register it with mxc.register_custom_op({op_type!r}, ...) or "
                    f"@mx.operator.register({op_type!r}) through mxc.mxnet before loading")
            err.args = (err.args[0] + hint,)
            raise err
        return get_op(op_type)


def _delegated(hook: str):
    """An OpDef method that calls the target custom op's *hook* with its own parameters."""
    def method(self, p, *args):
        target, inner = p[_TARGET]
        return getattr(target, hook)(inner, *args)
    method.__name__ = method.__qualname__ = hook
    method.__doc__ = f"The target custom operator's ``{hook}``."
    return method


for _hook in ("input_names", "num_inputs", "mutable_inputs", "num_outputs",
              "num_visible_outputs", "output_names", "infer_shape", "infer_type", "forward"):
    setattr(Custom, _hook, _delegated(_hook))
