"""Custom operators written in Python: MXNet's ``lib_custom_op``, the mxc way.

MXNet lets a compiled extension library add operators (``REGISTER_OP(name)
.setParseAttrs(...).setInferShape(...).setForward(...)``).  In mxc a custom
operator is a Python class whose methods are those same hooks, working on
plain Python values and numpy arrays::

    import mxc

    @mxc.register_custom_op("my_gemm")
    class MyGemm(mxc.CustomOp):
        "C = A @ B for two 2-D matrices."

        def parse_attrs(self, attrs):
            return 2, 1                                  # inputs, outputs

        def infer_shape(self, attrs, in_shapes):
            (n, k), (k2, m) = in_shapes
            if k != k2:
                raise ValueError(f"inner dimensions differ: {k} vs {k2}")
            return in_shapes, [(n, m)]

        def forward(self, attrs, inputs, outputs):
            a, b = inputs
            return [a @ b]

        def backward(self, attrs, out_grads, inputs, outputs):
            (dc,), (a, b) = out_grads, inputs
            return [dc @ b.T, a.T @ dc]

    c = mxc.sym.my_gemm(mxc.sym.var("a"), mxc.sym.var("b"))

Registration produces an ordinary :class:`~mxc.compiler.ops.registry.OpDef`
(an adapter around the class), so the operator is in ``mxc.sym`` like a
built-in, takes part in shape/dtype inference, appears in symbol JSON, and
runs in the reference backend.  Custom operators have no attribute schema:
every attribute is accepted and handed to the hooks as a string, as MXNet
passes them to ``parseAttrs``.

Hooks (see :class:`CustomOp` for their exact contracts):

========================  ========  ======================================
hook                      required  MXNet
========================  ========  ======================================
``parse_attrs``           yes       ``parseAttrs``
``infer_shape``           yes       ``inferShape``
``forward``               yes [1]_  ``forward``
``infer_type``            no        ``inferType`` (default: all dtypes equal)
``infer_storage_type``    no        ``inferSType`` (dense only in mxc)
``mutate_inputs``         no        ``mutateInputs`` (inputs become aux states)
``backward``              no        ``backward`` (see :func:`run_backward`)
``create_op_state``       no        ``createOpState`` (stateful operators)
``input_names``           no        (mxc: names of the inputs)
========================  ========  ======================================

.. [1] or ``create_op_state``; subgraph operators need neither (they run
   their nested graph by default).

A hook signals failure by raising; the exception reaches the user as an
:class:`~mxc.errors.ExtensionError` naming the extension, the hook and the
node, with the hook's own message (``mxc.library.guard``).

The code is in three modules: :mod:`.custom_hooks` (the :class:`CustomOp`
base class), :mod:`.custom_opdef` (the OpDef adapter and the hook contracts)
and this one (registration and direct calls), which re-exports the others.

mxc compiles and runs inference only, so ``backward`` is never called by an
executor; :func:`run_backward` calls it for a test or a training loop of
your own, on numpy arrays.
"""

from __future__ import annotations

import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ExtensionError, UnsupportedOpError
from .custom_hooks import HOOKS, CustomOp, _overrides  # noqa: F401 - re-exported
from .custom_opdef import CustomOpDef, CustomSubgraphOpDef, _CustomOpDefMixin  # noqa: F401
from .extension_guard import current_library, guard
from .ops.common import fmt_shape
from .ops.registry import (ForwardContext, get_op, has_op, register_op, registered_ops,
                           unregister_op)

__all__ = ["CustomOp", "register_custom_op", "unregister_custom_op", "get_custom_op",
           "list_custom_ops", "is_custom_op", "run_forward", "run_backward", "create_state",
           "HOOKS"]


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------
def _validate(name: str, impl: CustomOp) -> None:
    if impl.is_subgraph_op:
        return
    for hook, why in (("parse_attrs", "the number of inputs and outputs"),
                      ("infer_shape", "the output shapes")):
        if not _overrides(impl, hook):
            raise ExtensionError(f"cannot register custom operator {name!r} "
                                 f"({impl.extension}): {hook} is not implemented; every custom "
                                 f"operator must say {why}")
    if not (_overrides(impl, "forward") or _overrides(impl, "create_op_state")):
        raise ExtensionError(f"cannot register custom operator {name!r} ({impl.extension}): "
                             f"neither forward nor create_op_state is implemented")


def _class_from_hooks(name: str, hooks: dict[str, Any]) -> type:
    extra = {"is_subgraph_op", "doc"}
    unknown = sorted(set(hooks) - set(HOOKS) - extra)
    if unknown:
        raise TypeError(f"register_custom_op({name!r}): unknown hook(s) {', '.join(unknown)}; "
                        f"hooks are {', '.join(HOOKS)}")
    body: dict[str, Any] = {"__doc__": hooks.pop("doc", None) or f"Custom operator {name!r}."}
    if "is_subgraph_op" in hooks:
        body["is_subgraph_op"] = bool(hooks.pop("is_subgraph_op"))
    module = None
    for hook, fn in hooks.items():
        if not callable(fn):
            raise TypeError(f"register_custom_op({name!r}): {hook} must be callable, got "
                            f"{type(fn).__name__}")
        body[hook] = staticmethod(fn)
        module = module or getattr(fn, "__module__", None)
    body["__module__"] = module or __name__
    return type(f"CustomOp_{name}", (CustomOp,), body)


def _register(name: str, op: Any, override: bool) -> CustomOpDef:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ExtensionError(f"a custom operator name must be a non-empty string without "
                             f"surrounding spaces, got {name!r}")
    if isinstance(op, type):
        if not issubclass(op, CustomOp):
            raise TypeError(f"register_custom_op({name!r}): {op.__name__} is not a subclass "
                            f"of mxc.CustomOp")
        lib = current_library()
        with guard(lib.name if lib else op.__module__, f"operator {name!r} constructor", None):
            impl = op()
    elif isinstance(op, CustomOp):
        impl = op
    else:
        raise TypeError(f"register_custom_op({name!r}): expected a CustomOp subclass or "
                        f"instance, got {type(op).__name__}")
    lib = current_library()
    impl.name = name
    impl.extension = lib.name if lib is not None else (type(impl).__module__ or "__main__")
    _validate(name, impl)
    if has_op(name) and not override:
        existing = get_op(name)
        what = (f"custom operator of extension {existing.extension!r}"
                if isinstance(existing, _CustomOpDefMixin)
                else f"built-in operator (family {existing.family})")
        raise ExtensionError(f"cannot register custom operator {name!r}: the name is already "
                             f"registered as a {what}; pass override=True to replace it")
    base = CustomSubgraphOpDef if impl.is_subgraph_op else CustomOpDef
    doc = type(impl).__doc__ if type(impl).__doc__ not in (None, CustomOp.__doc__) else None
    cls = type(f"CustomOpDef_{name}", (base,),
               {"__doc__": doc or f"Custom operator {name!r} ({impl.extension}).",
                "__module__": __name__})
    register_op(name, family="custom", override=True)(cls)
    opdef = cls.opdef
    opdef.impl = impl
    opdef.extension = impl.extension
    opdef._states = weakref.WeakKeyDictionary()
    return opdef


def register_custom_op(name: str, op: Any = None, *, override: bool = False, **hooks: Any):
    """Register a custom operator under *name*.

    Three spellings::

        @mxc.register_custom_op("my_relu")        # 1. decorate a CustomOp subclass
        class MyRelu(mxc.CustomOp): ...

        mxc.register_custom_op("my_relu", MyRelu) # 2. a subclass or an instance

        mxc.register_custom_op(                   # 3. hook functions (no self)
            "my_relu",
            parse_attrs=lambda attrs: (1, 1),
            infer_shape=lambda attrs, shapes: (shapes, shapes),
            forward=lambda attrs, inputs, outputs: [np.maximum(inputs[0], 0)])

    Parameters
    ----------
    name:
        The MXNet operator name, as it appears in symbol JSON (``"op"``) and
        in ``mxc.sym``.
    op:
        A :class:`CustomOp` subclass (instantiated once, without arguments)
        or instance.
    override:
        Replace an operator already registered under *name* (a built-in one
        included); without it that is an :class:`~mxc.errors.ExtensionError`.
    **hooks:
        Hook functions (:data:`HOOKS`), plus ``is_subgraph_op`` and ``doc``,
        for spelling 3.

    Returns
    -------
    The decorated/passed class or instance (spelling 3: the generated class).

    Raises
    ------
    ExtensionError
        A required hook is missing (``parse_attrs``, ``infer_shape``, and
        ``forward`` or ``create_op_state``, except for subgraph operators)
        or the name is taken.
    """
    if op is None and not hooks:
        def deco(cls):
            _register(name, cls, override)
            return cls
        return deco
    if hooks:
        if op is not None:
            raise TypeError("register_custom_op: pass either a CustomOp or hook functions, "
                            "not both")
        op = _class_from_hooks(name, dict(hooks))
    _register(name, op, override)
    return op


def is_custom_op(name: str) -> bool:
    """True when *name* is registered as a custom operator."""
    return has_op(name) and isinstance(get_op(name), _CustomOpDefMixin)


def unregister_custom_op(name: str) -> None:
    """Remove custom operator *name* (no-op if absent); built-ins are refused."""
    if not has_op(name):
        return
    op = get_op(name)
    if not isinstance(op, _CustomOpDefMixin):
        raise ExtensionError(f"operator {name!r} is a built-in operator; only custom operators "
                             f"can be unregistered")
    unregister_op(name)


def get_custom_op(name: str) -> CustomOp:
    """The :class:`CustomOp` instance registered under *name*."""
    return _opdef(name).impl


def list_custom_ops() -> list[str]:
    """Names of every registered custom operator, sorted."""
    return sorted(n for n, op in registered_ops().items()
                  if isinstance(op, _CustomOpDefMixin) and op.name == n)


def _opdef(name: str) -> _CustomOpDefMixin:
    try:
        op = get_op(name)
    except UnsupportedOpError:
        raise ExtensionError(f"no custom operator {name!r} is registered; custom operators: "
                             f"{', '.join(list_custom_ops()) or 'none'}") from None
    if not isinstance(op, _CustomOpDefMixin):
        raise ExtensionError(f"operator {name!r} is a built-in operator, not a custom one")
    return op


# ---------------------------------------------------------------------------
# calling an operator directly (tests, training code)
# ---------------------------------------------------------------------------
def _prepare(name: str, inputs: Sequence, attrs: Mapping[str, Any] | None):
    opdef = _opdef(name)
    if opdef.impl.is_subgraph_op:
        raise ExtensionError(f"operator {name!r} is a subgraph operator; it runs as part of a "
                             f"partitioned graph, not on its own")
    p = opdef.parse_attrs({k: v for k, v in (attrs or {}).items()}, node=None)
    arrays = [np.asarray(x) for x in inputs]
    if len(arrays) != p.info.num_in:
        raise ExtensionError(f"operator {name!r} takes {p.info.num_in} inputs, got "
                             f"{len(arrays)}")
    return opdef, p, arrays


def create_state(name: str, attrs: Mapping[str, Any] | None = None) -> Any:
    """Create a state of stateful operator *name* for :func:`run_forward`/:func:`run_backward`."""
    opdef = _opdef(name)
    p = opdef.parse_attrs(dict(attrs or {}), node=None)
    if not opdef.is_stateful:
        raise ExtensionError(f"operator {name!r} is not stateful (no create_op_state)")
    return opdef._new_state(p, None)


def run_forward(name: str, inputs: Sequence, attrs: Mapping[str, Any] | None = None, *,
                state: Any = None) -> list[np.ndarray]:
    """Run custom operator *name* once on numpy *inputs*; returns its outputs.

    Shapes and dtypes are inferred with the operator's own hooks first, so
    outputs are preallocated and checked as in a graph.  A stateful
    operator uses *state* (from :func:`create_state`) or a fresh one.
    Inputs the operator mutates are written in place.
    """
    opdef, p, arrays = _prepare(name, inputs, attrs)
    n_out = p.info.num_out
    shapes = [a.shape for a in arrays]
    dtypes = [a.dtype.name for a in arrays]
    _, out_shapes = opdef.infer_shape(p, shapes, [None] * n_out)
    _, out_dtypes = opdef.infer_type(p, dtypes, [None] * n_out)
    ctx = ForwardContext(node=None, out_shapes=out_shapes, out_dtypes=out_dtypes,
                         in_shapes=shapes, in_dtypes=dtypes)
    outs = opdef._forward(p, arrays, ctx, state=state)
    return [o.astype(t) if t is not None and o.dtype.name != t else o
            for o, t in zip(outs, out_dtypes)]


def run_backward(name: str, out_grads: Sequence | np.ndarray, inputs: Sequence,
                 attrs: Mapping[str, Any] | None = None, *, outputs: Sequence | None = None,
                 state: Any = None) -> list[np.ndarray | None]:
    """Gradients of custom operator *name*'s inputs, given its outputs' gradients.

    Parameters
    ----------
    out_grads:
        One array per output (a bare array for a single-output operator).
    inputs:
        The forward inputs.
    outputs:
        The forward outputs; computed with :func:`run_forward` if omitted.
    state:
        For a stateful operator, the state whose ``backward`` to call
        (default: a fresh one, also used for the forward run).

    Returns
    -------
    list
        One gradient per input (None where the operator returns None);
        each is checked to have its input's shape.
    """
    opdef, p, arrays = _prepare(name, inputs, attrs)
    n_in, n_out = p.info.num_in, p.info.num_out
    if opdef.is_stateful and state is None:
        state = opdef._new_state(p, None)
    if outputs is None:
        outputs = run_forward(name, arrays, attrs, state=state)
    outs = [np.asarray(o) for o in outputs]
    grads = [np.asarray(out_grads)] if isinstance(out_grads, np.ndarray) else \
        [np.asarray(g) for g in out_grads]
    if len(grads) != n_out:
        raise ExtensionError(f"operator {name!r} has {n_out} outputs; got {len(grads)} output "
                             f"gradients")
    if opdef.is_stateful:
        fn = getattr(state, "backward", None)
        if not callable(fn):
            raise ExtensionError(f"operator {name!r}: its state {type(state).__name__} has no "
                                 f"backward(out_grads, inputs, outputs) method")
        result = opdef._call("backward", None, fn, grads, arrays, outs)
    else:
        if not _overrides(opdef.impl, "backward"):
            raise ExtensionError(f"operator {name!r} ({opdef.extension}) does not implement "
                                 f"backward")
        result = opdef._call("backward", None, opdef.impl.backward, dict(p.info.attrs), grads,
                             arrays, outs)
    if isinstance(result, np.ndarray) and n_in == 1:
        result = [result]
    if not isinstance(result, (list, tuple)) or len(result) != n_in:
        raise opdef._fail("backward", None, f"returned {result!r}; expected a list of {n_in} "
                          f"input gradients")
    in_grads: list[np.ndarray | None] = []
    for i, (g, x) in enumerate(zip(result, arrays)):
        if g is None:
            in_grads.append(None)
            continue
        g = np.asarray(g)
        if g.shape != x.shape:
            raise opdef._fail("backward", None, f"gradient {i} has shape {fmt_shape(g.shape)}, "
                              f"but input {i} has shape {fmt_shape(x.shape)}")
        in_grads.append(g)
    return in_grads
