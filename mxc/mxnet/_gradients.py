"""The gradient of one graph node: the operator's rule, a custom op's ``backward``.

Shared by :mod:`~mxc.mxnet.autograd` (imperative calls) and the executor
(``Executor.backward``).  A built-in operator differentiates through
:meth:`OpDef.backward`; a custom or library operator through its ``backward``
hook, or, when stateful, through the ``backward`` of the state created for
this node; anything else is MXNet's "non-differentiable" error.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..compiler.ir import Node
from ..errors import MxcError
from .base import MXNetError, mxnet_error

__all__ = ["node_gradients"]


def _non_differentiable(node: Node) -> MXNetError:
    return MXNetError(f"Operator {node.op} is non-differentiable because it didn't register "
                      f"FGradient attribute.")


def _custom_backward(opdef, node: Node, params, out_grads, inputs, outputs):
    from ..compiler.custom_op import _overrides
    p = opdef._own(params)
    if opdef.is_stateful:
        state = opdef.state_of(node)
        fn = getattr(state, "backward", None)
        if state is None or not callable(fn):
            raise _non_differentiable(node)
        return opdef._call("backward", node, fn, list(out_grads), list(inputs), list(outputs))
    if not _overrides(opdef.impl, "backward"):
        raise _non_differentiable(node)
    return opdef._call("backward", node, opdef.impl.backward, dict(p.info.attrs),
                       list(out_grads), list(inputs), list(outputs), *opdef._hook_args(p))


def node_gradients(node: Node, out_grads: Sequence[np.ndarray], inputs: Sequence,
                   outputs: Sequence) -> list:
    """One gradient (numpy array or None) per input of *node*."""
    opdef, params = node.opdef, node.params
    if hasattr(opdef, "custom_target"):  # graph op Custom: the op_type operator's gradient
        opdef, params = opdef.custom_target(params)
    try:
        if opdef.has_backward():
            result = opdef.backward(params, list(out_grads), list(inputs), list(outputs))
        elif getattr(opdef, "impl", None) is not None:
            result = _custom_backward(opdef, node, params, out_grads, inputs, outputs)
        else:
            raise _non_differentiable(node)
    except MXNetError:
        raise
    except NotImplementedError:
        raise _non_differentiable(node) from None
    except MxcError as exc:
        raise mxnet_error(exc) from exc
    if isinstance(result, np.ndarray) and len(inputs) == 1:
        result = [result]
    if not isinstance(result, (list, tuple)) or len(result) != len(inputs):
        raise MXNetError(f"operator {node.op} (node {node.ref}): backward returned "
                         f"{type(result).__name__}, expected {len(inputs)} input gradients")
    grads = []
    for g, x in zip(result, inputs):
        if g is None:
            grads.append(None)
            continue
        g = np.asarray(g)
        if tuple(g.shape) != tuple(np.shape(x)):
            raise MXNetError(f"operator {node.op} (node {node.ref}): a gradient has shape "
                             f"{tuple(g.shape)} for an input of shape {tuple(np.shape(x))}")
        grads.append(g)
    return grads
