"""``mx.operator``: MXNet's Python custom operators, run as mxc custom operators.

A script's ``CustomOpProp`` subclass registered with ``@mx.operator.register
("name")`` becomes an mxc custom operator named *name* (what MXNet's
``Custom`` operator dispatches to through ``op_type``): the prop's
``list_arguments``/``list_outputs``/``list_auxiliary_states`` give the arity
(auxiliary states are mutable inputs), ``infer_shape``/``infer_type`` the
inference, and ``create_operator`` the :class:`CustomOp` whose ``forward`` and
``backward`` run on NDArrays, as in MXNet.  One operator instance is created
per graph node (per imperative call), on its first run, with the input shapes
and dtypes.

``mx.nd.Custom(x, op_type="name")`` and ``mx.sym.Custom(...)`` use the graph
operator ``Custom`` when it is registered and call the operator *name*
directly otherwise.

A prop's ``forward`` may run when only this module was imported (a compiled
model with a custom operator registered here), and ``x * 2`` inside it runs an
operator, so this module imports :mod:`.sparse`, which loads the operator
machinery and hands it to the NDArray class (:mod:`._ndarray_core`).  It
imports neither ``mx.nd`` nor ``mx.sym``: they sit above it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compiler.custom_op import CustomOp as _MxcCustomOp
from ..compiler.custom_op import register_custom_op
from ..registry import Registry
from . import sparse as _sparse  # noqa: F401 -- loads what NDArray's operators run (below)
from ._ndarray_core import NDArray
from .base import MXNetError
from .context import cpu

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators"]

#: the ``CustomOpProp`` classes registered with :func:`register`, by operator name (a
#: script's registrations only; re-registering a name replaces it, as in MXNet)
CUSTOM_OP_PROPS: Registry[type] = Registry(
    "MXNet custom operators", noun="MXNet custom operator",
    error=MXNetError)


class CustomOp:
    """Base class of an operator's computation (``forward``/``backward`` on NDArrays)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        raise NotImplementedError

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise NotImplementedError

    def assign(self, dst, req, src) -> None:
        """Write *src* into *dst* as *req* says (``'write'``/``'inplace'``, ``'add'``, ``'null'``)."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] = dst + src
        else:
            raise ValueError(f"unknown req {req!r}")


class CustomOpProp:
    """Base class of an operator's properties: arity, inference, operator factory."""

    def __init__(self, need_top_grad: bool = True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        n_out, n_aux = len(self.list_outputs()), len(self.list_auxiliary_states())
        return in_shape, [in_shape[0]] * n_out, [in_shape[0]] * n_aux

    def infer_type(self, in_type):
        n_out, n_aux = len(self.list_outputs()), len(self.list_auxiliary_states())
        return in_type, [in_type[0]] * n_out, [in_type[0]] * n_aux

    def infer_storage_type(self, in_stype):
        return in_stype, ["default"] * len(self.list_outputs()), \
            ["default"] * len(self.list_auxiliary_states())

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        return deps + list(in_data) + list(out_data)

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return CustomOp()


def _nd(x, writable: bool = False):
    return NDArray(np.array(x) if writable and not x.flags.writeable else x)


class _State:
    """The operator instance of one node, created on its first run."""

    def __init__(self, prop: CustomOpProp):
        self.prop = prop
        self.op: CustomOp | None = None
        self.n_args = len(prop.list_arguments())
        self._aux: list = []

    def forward(self, inputs, outputs):
        from . import autograd
        if self.op is None:
            self.op = self.prop.create_operator(cpu(), [list(x.shape) for x in inputs],
                                                [x.dtype.type for x in inputs])
        args, aux = inputs[:self.n_args], inputs[self.n_args:]
        self._aux = [NDArray(a) for a in aux]
        outs = [NDArray(o) for o in outputs]
        self.op.forward(autograd.is_training(), ["write"] * len(outs),
                        [_nd(a) for a in args], outs, self._aux)
        return [o._data for o in outs]

    def backward(self, out_grads, inputs, outputs):
        args = inputs[:self.n_args]
        in_grad = [NDArray(np.zeros(a.shape, dtype=a.dtype)) for a in args]
        self.op.backward(["write"] * len(in_grad), [_nd(g) for g in out_grads],
                         [_nd(a) for a in args], [_nd(o) for o in outputs], in_grad,
                         self._aux)
        return [g._data for g in in_grad] + [None] * (len(inputs) - self.n_args)


def _adapter(reg_name: str, prop_cls: type) -> type:
    """The mxc CustomOp running MXNet prop class *prop_cls*."""

    def prop_of(attrs: dict[str, str]) -> CustomOpProp:
        return prop_cls(**{k: v for k, v in attrs.items() if k != "op_type"})

    class Adapter(_MxcCustomOp):
        __doc__ = prop_cls.__doc__ or f"MXNet Python custom operator {reg_name!r}."

        def parse_attrs(self, attrs):
            prop = prop_of(attrs)
            return (len(prop.list_arguments()) + len(prop.list_auxiliary_states()),
                    len(prop.list_outputs()))

        def input_names(self, attrs, num_inputs):
            prop = prop_of(attrs)
            return list(prop.list_arguments()) + list(prop.list_auxiliary_states())

        def mutate_inputs(self, attrs):
            prop = prop_of(attrs)
            n = len(prop.list_arguments())
            return list(range(n, n + len(prop.list_auxiliary_states())))

        def infer_shape(self, attrs, in_shapes):
            prop = prop_of(attrs)
            n = len(prop.list_arguments())
            result = prop.infer_shape([list(s) for s in in_shapes[:n]])
            ins, outs = result[0], result[1]
            aux = result[2] if len(result) > 2 else in_shapes[n:]
            return [tuple(s) for s in list(ins) + list(aux)], [tuple(s) for s in outs]

        def infer_type(self, attrs, in_types):
            prop = prop_of(attrs)
            n = len(prop.list_arguments())
            result = prop.infer_type([np.dtype(t).type for t in in_types[:n]])
            ins, outs = result[0], result[1]
            aux = result[2] if len(result) > 2 else in_types[n:]
            return ([np.dtype(t).name for t in list(ins) + list(aux)],
                    [np.dtype(t).name for t in outs])

        def create_op_state(self, attrs):
            return _State(prop_of(attrs))

    Adapter.__name__ = Adapter.__qualname__ = f"MXNetCustomOp_{reg_name}"
    Adapter.__module__ = prop_cls.__module__
    return Adapter


def register(reg_name: str):
    """Class decorator: register a :class:`CustomOpProp` subclass as operator *reg_name*."""
    def deco(prop_cls: type) -> type:
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError(f"mx.operator.register({reg_name!r}) decorates a CustomOpProp "
                            f"subclass, got {prop_cls!r}")
        register_custom_op(reg_name, _adapter(reg_name, prop_cls), override=True)
        CUSTOM_OP_PROPS.register(reg_name, prop_cls, override=True)
        return prop_cls
    return deco


def get_all_registered_operators() -> list[str]:
    return sorted(CUSTOM_OP_PROPS.names())


def custom_op_type(kwargs: dict[str, Any]) -> str:
    """``mx.nd.Custom`` / ``mx.sym.Custom`` (when no graph operator ``Custom`` is registered):
    pop and check the ``op_type`` argument.  The caller runs it (``mx.nd``) or builds a node
    of it (``mx.sym``), so this module imports neither of those above it."""
    from ..compiler.ops.registry import has_op
    op_type = kwargs.pop("op_type", None)
    if op_type is None:
        raise MXNetError("Custom: the op_type argument is required")
    if op_type not in CUSTOM_OP_PROPS and not has_op(op_type):
        raise MXNetError(f"Cannot find custom operator {op_type}")
    return op_type
