"""Transforms of bound weights done once, when the runtime loads the model.

Some kernels want their weights in a form that is larger than the weights
themselves: Winograd's ``U = G g G^T`` is (m+2)^2/9 times the 3x3 weights
(1.8x for F(2, 3), 4x for F(4, 3)).  Compiled in as constants, those forms
made an artifact 1.6-2.5x its parameters.  Instead, a legalization emits the
transform as a kernel on the constant weights and marks that kernel
(:func:`mark_load_time`); the CPU pipeline's pass
:func:`lift_load_time_pass`, right after ``LegalizeOps``, then either

* **lifts** the marked calls of a region function ``regionK`` (the functions
  named by the build context's ``lift``, :mod:`.build_context`) into a new function
  ``regionK_transform_params`` (the weights in, a tuple of the transformed
  weights out) and makes the transformed weights trailing parameters of
  ``regionK``.  :func:`add_load_steps` records that in the runtime graph: the
  weights become stored parameters (``params.npz``, not constants of the
  library, where ``FoldConstant`` would evaluate the transform again), read by
  a ``load`` step whose output slots feed the region; the runtime
  (:mod:`mxc.runtime.load_steps`) runs such steps once, when the session is
  made, keeps their results on the device like any parameter and drops the
  weights.  The artifact stores the weights once, as given; the transform
  costs tens of milliseconds at load time (ResNet-18) and nothing per call.
* or **folds** them in numpy at compile time (the evaluator the kernel's kind
  registered with :func:`register_evaluator`), for every other function: a
  module built outside ``mxc.compile`` (tests, tuning task extraction) and
  compiled control-flow bodies keep the transformed weights as constants, as
  before.

A marked call is lifted or folded before ``FoldConstant`` could evaluate it by
compiling it (one LLVM build per call).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from ...errors import BackendError
from ...registry import Registry

from .schedules.fold import substitute_vars
from .schedules.base.module_utils import static_shape

#: the PrimFunc attribute naming a kernel's load-time transform kind
ATTR = "mxc.load_time"
#: the name of a region's load-time function
SUFFIX = "_transform_params"

#: ``evaluate(constant args as numpy, output shape) -> numpy``: a transform's compile-time fold
Evaluator = Callable[[list[np.ndarray], tuple], np.ndarray]

#: every load-time transform kind's numpy evaluator; the kernels that mark load-time
#: transforms (Winograd's weight transform) register theirs, imported on the first lookup
EVALUATORS: Registry[Evaluator] = Registry(
    "load-time evaluators", noun="load-time evaluator", error=BackendError,
    builtins=("mxc.backends.tvm.schedules.base.winograd_transforms",),
    unknown=lambda kind: BackendError(f"no numpy evaluator for the load-time transform "
                                      f"{kind!r}; known: {', '.join(EVALUATORS.names())}"))


def register_evaluator(kind: str):
    """Register the numpy evaluation of the load-time transform *kind* (decorator)."""
    return EVALUATORS.register(kind)


def mark_load_time(bb: relax.BlockBuilder, call: relax.Call, kind: str) -> relax.Call:
    """Mark the kernel *call* invokes (a ``call_te`` on constants) as a load-time
    transform of *kind*; returns *call*."""
    gv = call.args[0]
    bb.update_func(gv, bb.get()[gv].with_attr(ATTR, kind))
    return call


def _marked_calls(mod: tvm.IRModule, func: relax.Function) -> list:
    """``(var, call, kind)`` of every binding of *func* calling a marked kernel on
    constants only."""
    if not isinstance(func.body, relax.SeqExpr):
        return []
    call_tir = tvm.ir.Op.get("relax.call_tir")
    found = []
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value if isinstance(b, relax.VarBinding) else None
            if not (isinstance(v, relax.Call) and v.op.same_as(call_tir)):
                continue
            attrs = mod[v.args[0]].attrs
            kind = attrs.get(ATTR) if attrs is not None else None
            args = v.args[1]
            if kind is None or not isinstance(args, relax.Tuple) \
                    or not all(isinstance(a, Constant) for a in args.fields):
                continue
            found.append((b.var, v, str(kind)))
    return found


def _nbytes(expr) -> int:
    shape = static_shape(expr)
    dtype = getattr(expr.ty, "dtype", None)
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(str(dtype)).itemsize


def _fold(func: relax.Function, calls: list) -> relax.Function:
    replace = {}
    for var, call, kind in calls:
        evaluate = EVALUATORS.lookup(kind)
        out = evaluate([a.value.numpy() for a in call.args[1].fields], static_shape(var))
        replace[var] = relax.const(np.ascontiguousarray(out), str(out.dtype))
    return substitute_vars(func, replace)


def _lift(bb: relax.BlockBuilder, name: str, func: relax.Function, calls: list) -> tuple:
    """*func* taking the results of *calls* as trailing parameters, and the record of
    its new load-time function (added to *bb*), which takes the constants the calls
    read as parameters: stored with the model's parameters, not compiled in (where
    ``FoldConstant`` would evaluate the calls again).  Equal constants (tied weights:
    earlier passes copy them per use) are one parameter, stored once."""
    tname = name + SUFFIX
    constants: list = []          # (numpy value, its parameter of the load-time function)
    kinds: dict[str, dict] = {}

    def parameter(c: Constant, stats: dict) -> relax.Var:
        value = c.value.numpy()
        for known, var in constants:
            if known.shape == value.shape and known.dtype == value.dtype \
                    and np.array_equal(known, value):
                return var
        var = relax.Var(f"w{len(constants)}", c.ty)
        constants.append((np.ascontiguousarray(value), var))
        stats["stored_bytes"] += value.nbytes
        return var

    calls_in = []
    for var, call, kind in calls:
        k = kinds.setdefault(kind, {"count": 0, "stored_bytes": 0, "bytes": 0})
        k["count"] += 1
        k["bytes"] += _nbytes(var)
        args = relax.Tuple([parameter(c, k) for c in call.args[1].fields])
        calls_in.append((var, relax.Call(call.op, [call.args[0], args] + list(call.args[2:]),
                                         call.attrs, call.ty_args)))
    with bb.function(tname, [var for _, var in constants]):
        with bb.dataflow():
            outs = [bb.emit(call, name_hint=var.name) for var, call in calls_in]
            result = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(result)
    params = [relax.Var(f"{var.name}_at_load", var.ty) for var, _, _ in calls]
    body = substitute_vars(func, dict(zip((c[0] for c in calls), params)))
    lifted = relax.Function(list(func.params) + params, body.body, func.ret_ty, func.is_pure,
                            func.attrs)
    record = {"function": tname, "count": len(calls), "kinds": kinds,
              "inputs": [value for value, _ in constants]}
    return lifted, record


def lift_load_time_pass(ctx) -> tvm.transform.Pass:
    """The pass lifting the marked weight transforms of the build *ctx*'s ``lift``
    functions into load-time functions (recorded in ``ctx.records.lifted``) and
    folding the others in numpy (see the module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="MxcLiftLoadTimeTransforms")
    def _pass(mod: tvm.IRModule, _pass_ctx) -> tvm.IRModule:
        return _lift_or_fold(mod, ctx.lift, ctx.records.lifted)

    return _pass


def _lift_or_fold(mod: tvm.IRModule, functions: frozenset, lifted: dict | None):
    work = [(gv, func, _marked_calls(mod, func)) for gv, func in mod.functions_items()
            if isinstance(func, relax.Function)]
    work = [w for w in work if w[2]]
    if not work:
        return mod
    bb = relax.BlockBuilder(mod)
    for gv, func, calls in work:
        if gv.name_hint in functions:
            func, record = _lift(bb, gv.name_hint, func, calls)
            if lifted is not None:
                lifted[gv.name_hint] = record
        else:
            func = _fold(func, calls)
        bb.update_func(gv, func)
    # the replaced calls are dead now: drop them before FoldConstant would evaluate them
    return relax.transform.DeadCodeElimination()(bb.finalize())


# ---------------------------------------------------------------------------
# the runtime graph
# ---------------------------------------------------------------------------
def add_load_steps(plan, params: dict, record: Mapping[str, dict]) -> tuple:
    """``(plan, params)`` with a load step (:class:`~mxc.runtime.plan.LoadStep`) before
    every region whose function was lifted: it reads the weights it transforms (new
    stored parameters, named after it) and its output slots (new ones) are the
    region's trailing inputs.  A plan with load steps has the runtime graph version
    that introduced them (older runtimes refuse it)."""
    if not record:
        return plan, params
    import dataclasses
    from ...runtime.plan import LoadStep, ParamSlot, RegionStep
    n = plan.num_slots
    params, specs, steps = dict(params), list(plan.params), []

    def new_slots(count: int) -> tuple[int, ...]:
        nonlocal n
        n += count
        return tuple(range(n - count, n))

    for step in plan.steps:
        lifted = record.get(step.function) if isinstance(step, RegionStep) else None
        if lifted:
            name = f"{step.name}{SUFFIX}"
            ins = new_slots(len(lifted["inputs"]))
            for k, (slot, array) in enumerate(zip(ins, lifted["inputs"])):
                key = f"{name}_{k}"
                if key in params:
                    raise BackendError(f"a model parameter is named {key!r}, the name of a "
                                       f"weight transformed at load time; rename it")
                params[key] = array
                specs.append(ParamSlot(key, slot))
            outs = new_slots(lifted["count"])
            steps.append(LoadStep(name, lifted["function"], ins, outs))
            step = dataclasses.replace(step, inputs=tuple(step.inputs) + outs)
        steps.append(step)
    return dataclasses.replace(plan, num_slots=n, params=tuple(specs), steps=tuple(steps)), params


def lifted_totals(record: Mapping[str, dict], kind: str) -> dict:
    """``{"count", "stored_bytes", "bytes"}`` of the lifted transforms of *kind*: how
    many, the bytes they read (stored) and produce (in memory after loading)."""
    total = {"count": 0, "stored_bytes": 0, "bytes": 0}
    for r in record.values():
        for key, v in r["kinds"].get(kind, {}).items():
            total[key] += v
    return total
