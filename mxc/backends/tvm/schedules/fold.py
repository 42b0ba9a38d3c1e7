"""Fold constant arithmetic in numpy before TVM's ``FoldConstant``.

With parameters bound as constants, every BatchNorm leaves a small chain of
constant ops (``sqrt``, ``divide``, ``multiply``, ``subtract``, ``reshape``)
behind, and the transposed weights of the channels-last rewrite add more.
``relax.transform.FoldConstant`` evaluates each by legalizing it and
*compiling* a kernel with LLVM -- one build per distinct shape, about 18 s of
a ResNet-18 compile on a 2-core machine.  This pass evaluates the same ops in
numpy (same IEEE float32 operations: ``+ - * /`` and ``sqrt`` are correctly
rounded both ways), leaving only the rare rest to ``FoldConstant``.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from .base.module_utils import rewrite_functions, static_shape, tensor_dtype

_BINARY = {
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
    "relax.divide": np.divide, "relax.maximum": np.maximum, "relax.minimum": np.minimum,
}
_UNARY = {"relax.sqrt": np.sqrt, "relax.negative": np.negative, "relax.abs": np.abs}
_FLOATS = ("float32", "float64")

#: folded constants larger than this stay for FoldConstant (numpy temporaries)
_MAX_ELEMENTS = 1 << 26


def _evaluate(call, args: list[np.ndarray]) -> np.ndarray | None:
    name = call.op.name
    shape, dtype = static_shape(call), tensor_dtype(call)
    if shape is None or dtype is None or int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS:
        return None
    if name in _BINARY or name in _UNARY:
        # exactness: only float32/float64 elementwise arithmetic of matching dtypes
        if dtype not in _FLOATS or any(a.dtype.name != dtype for a in args):
            return None
        fn = _BINARY.get(name) or _UNARY[name]
        with np.errstate(all="ignore"):
            out = fn(*args)
    elif name == "relax.reshape":
        out = args[0].reshape(shape)
    elif name == "relax.permute_dims":
        axes = call.attrs.axes
        out = np.transpose(args[0], None if axes is None else [int(a) for a in axes])
    elif name in ("relax.expand_dims", "relax.squeeze", "relax.flatten"):
        out = args[0].reshape(shape)
    else:
        return None
    out = np.ascontiguousarray(out)
    if out.shape != shape or out.dtype.name != dtype:
        return None
    return out


def _fold_function(func: relax.Function) -> relax.Function | None:
    values: dict = {}          # var -> folded numpy value
    replace: dict = {}         # var -> new Constant
    for block in func.body.blocks if isinstance(func.body, relax.SeqExpr) else []:
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                continue
            v = b.value
            if isinstance(v, Constant):
                continue
            if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op)):
                continue
            args = []
            ok = True
            for a in v.args[:1] if v.op.name in ("relax.reshape",) else v.args:
                if isinstance(a, Constant):
                    args.append(a.value.numpy())
                elif isinstance(a, relax.Var) and a in values:
                    args.append(values[a])
                else:
                    ok = False
                    break
            if not ok or not args:
                continue
            out = _evaluate(v, args)
            if out is None:
                continue
            values[b.var] = out
            replace[b.var] = relax.const(out, out.dtype.name)
    if not replace:
        return None
    # bind the folded vars to constants; DCE removes the dead bindings later
    return substitute_vars(func, replace)


def substitute_vars(func: relax.Function, replace: dict) -> relax.Function:
    """*func* with every use of the variables in *replace* replaced by their value."""
    @relax.expr_functor.mutator
    class _Sub(relax.PyExprMutator):
        def visit_var_(self, var):
            return replace.get(var, var)

        def visit_dataflow_var_(self, var):
            return replace.get(var, var)

    return _Sub().visit_expr(func)


@tvm.transform.module_pass(opt_level=0, name="MxcFoldConstantsNumpy")
def fold_constants_numpy(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """Evaluate constant elementwise/reshape chains in numpy (see module docstring)."""
    new = rewrite_functions(
        mod, lambda _gv, f: _fold_function(f) if isinstance(f, relax.Function) else None)
    return mod if new is mod else relax.transform.DeadCodeElimination()(new)


# ---------------------------------------------------------------------------
# scalar constants into kernels
# ---------------------------------------------------------------------------
def _immediate(value: np.ndarray):
    from tvm import tirx
    dtype = value.dtype.name
    scalar = value.reshape(()).item()
    if value.dtype.kind == "f":
        return tirx.FloatImm(dtype, float(scalar))
    if value.dtype.kind == "b":
        return tirx.IntImm("bool", int(bool(scalar)))
    return tirx.IntImm(dtype, int(scalar))


def _specialize(func, bound: dict):
    """*func* without the parameters in *bound* (index -> numpy scalar), their loads
    replaced by immediates."""
    import tvm_ffi
    from tvm import tirx
    params = list(func.params)
    subst = {params[i]: _immediate(v) for i, v in bound.items()}

    from tvm.s_tir.stmt import SBlock

    def is_bound(buf) -> bool:
        return any(buf.same_as(var) for var in subst)

    def visit_load(node, mutator):
        src = node.source
        for var, imm in subst.items():
            if src.same_as(var):
                return imm
        return mutator.default_mutate(node)

    def visit_block(node, mutator):
        node = mutator.default_mutate(node)
        reads = [r for r in node.reads if not is_bound(r.source)]
        if len(reads) == len(node.reads):
            return node
        return SBlock(list(node.iter_vars), reads, list(node.writes), node.name_hint, node.body,
                      node.init, list(node.alloc_buffers), list(node.match_buffers),
                      dict(node.annotations), node.span)

    body = tvm_ffi.structural_mutate(func.body, [(tvm.ir.expr.TensorLoad, visit_load),
                                                 (SBlock, visit_block)])
    keep = [p for i, p in enumerate(params) if i not in bound]
    return tirx.PrimFunc(keep, body, func.ret_type, func.attrs)


@tvm.transform.module_pass(opt_level=0, name="MxcInlineScalarConstants")
def inline_scalar_constants(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """Pass 0-d constants to fused kernels as immediates, not as 0-d buffers.

    ``relu`` is ``where(x > 0 or isnan(x), x, 0)`` with a 0-d constant ``0``;
    after fusion it is a kernel parameter, and loading it inside the
    vectorised epilogue makes LLVM scalarise the whole ``select`` (one branch
    per element).  Each kernel called with 0-d constant arguments gets a copy
    with those values baked in.
    """
    from tvm import tirx
    call_tir = tvm.ir.Op.get("relax.call_tir")
    specialized: dict = {}
    new_funcs: dict = {}

    @relax.expr_functor.mutator
    class _Rewrite(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not (isinstance(call.op, tvm.ir.Op) and call.op.same_as(call_tir)):
                return call
            gv, args = call.args[0], call.args[1]
            if not isinstance(args, relax.Tuple):
                return call
            func = mod[gv] if isinstance(gv, tvm.ir.GlobalVar) else None
            if not isinstance(func, tirx.PrimFunc):
                return call
            bound = {}
            for i, a in enumerate(args.fields):
                if isinstance(a, Constant) and a.value.numpy().ndim == 0:
                    bound[i] = a.value.numpy()
            if not bound:
                return call
            key = (gv.name_hint,) + tuple((i, v.dtype.name, v.tobytes()) for i, v in
                                          sorted(bound.items()))
            new_gv = specialized.get(key)
            if new_gv is None:
                new_gv = self.builder_.add_func(_specialize(func, bound), gv.name_hint)
                specialized[key] = new_gv
                new_funcs[new_gv] = True
            rest = [a for i, a in enumerate(args.fields) if i not in bound]
            return relax.Call(call.op, [new_gv, relax.Tuple(rest)] + list(call.args[2:]),
                              call.attrs, call.ty_args)

    rewriter = _Rewrite(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
    out = rewriter.builder_.finalize()
    if not specialized:
        return mod
    return relax.transform.DeadCodeElimination()(out)
