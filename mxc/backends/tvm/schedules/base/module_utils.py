"""Small helpers the CPU pipeline's passes share: static tensor types, function rewrites,
and the TIR schedule helpers both the CPU rules and the Winograd rule use."""

from __future__ import annotations

from typing import Callable

import tvm
from tvm import relax, tirx
from tvm.ir.expr import Constant


def static_shape(expr) -> tuple[int, ...] | None:
    """The static shape of a Relax tensor expression, else None (unknown or symbolic)."""
    sinfo = getattr(expr, "ty", None)
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        return None
    try:
        return tuple(int(d) for d in sinfo.shape)
    except (TypeError, ValueError):
        return None


def tensor_dtype(expr) -> str | None:
    """The dtype of a Relax tensor expression, else None."""
    sinfo = getattr(expr, "ty", None)
    return str(sinfo.dtype) if isinstance(sinfo, relax.TensorType) else None


def rewrite_functions(mod: tvm.IRModule, rewrite: Callable) -> tvm.IRModule:
    """*mod* with every function ``rewrite(gv, func)`` returns a replacement for (None:
    unchanged) replaced; *mod* itself when nothing changes."""
    updates = {}
    for gv, func in mod.functions_items():
        new = rewrite(gv, func)
        if new is not None:
            updates[gv] = new
    if not updates:
        return mod
    mod = mod.clone()
    for gv, func in updates.items():
        mod.update_func(gv, func)
    return mod


def rewrite_graph_functions(mod: tvm.IRModule, rewrite: Callable) -> tvm.IRModule:
    """*mod* with each Relax graph function (not a fused ``Primitive`` one) replaced by
    ``rewrite(bb, func)`` unless that is None; *bb*, a BlockBuilder over *mod*, takes
    the kernels the rewrite adds (``bb.call_te``).  *mod* itself when nothing changes."""
    bb = relax.BlockBuilder(mod)
    changed = False
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function) and isinstance(func.body, relax.SeqExpr) \
                and not (func.attrs and "Primitive" in func.attrs):
            new = rewrite(bb, func)
            if new is not None:
                bb.update_func(gv, new)
                changed = True
    return bb.get() if changed else mod


def var_uses(func: relax.Function) -> dict:
    """How many times each variable of the Relax function *func* is read (bindings and
    the function's result), counting every occurrence."""
    uses: dict = {}

    def count(expr) -> None:
        if isinstance(expr, relax.Var):
            uses[expr] = uses.get(expr, 0) + 1
        elif isinstance(expr, relax.Call):
            for arg in expr.args:
                count(arg)
        elif isinstance(expr, relax.Tuple):
            for field in expr.fields:
                count(field)
        elif isinstance(expr, relax.TupleGetItem):
            count(expr.tuple_value)
        elif not isinstance(expr, Constant):
            relax.analysis.post_order_visit(expr, lambda e: count(e)
                                            if isinstance(e, relax.Var) else None)

    for block in func.body.blocks:
        for b in block.bindings:
            count(b.value)
    count(func.body.body)
    return uses


def bindings_of(func: relax.Function) -> dict:
    """Each variable bound in *func*'s body -> its binding."""
    return {b.var: b for block in func.body.blocks for b in block.bindings}


def dataflow_bindings(func: relax.Function):
    """The bindings of *func*'s dataflow blocks, in order (the pure ones a rewrite may
    move or drop)."""
    for block in func.body.blocks:
        if isinstance(block, relax.DataflowBlock):
            yield from block.bindings


def replace_bindings(func: relax.Function, replace: dict, drop: set) -> relax.Function:
    """*func* with the binding of each variable in *replace* replaced by the bindings
    ``replace[var]`` lists (``(var, value)`` pairs, in order) and those in *drop* removed."""
    blocks = []
    for block in func.body.blocks:
        new = []
        for b in block.bindings:
            if b.var in drop:
                continue
            new += [relax.VarBinding(v, value) for v, value in replace.get(b.var, [(b.var,
                                                                                     b.value)])]
        blocks.append(relax.DataflowBlock(new) if isinstance(block, relax.DataflowBlock)
                      else relax.BindingBlock(new))
    return relax.Function(func.params, relax.SeqExpr(blocks, func.body.body), func.ret_ty,
                          func.is_pure, func.attrs)


# ---------------------------------------------------------------------------
# TIR schedule helpers shared by the CPU rules and the Winograd rule
# ---------------------------------------------------------------------------
def is_spatial(block) -> bool:
    return all(iv.iter_type == tirx.IterVar.DataPar for iv in block.iter_vars)


def writes_param(sch, block_rv, params) -> bool:
    return any(w.source.same_as(p) for w in sch.get(block_rv).writes for p in params)


def root_blocks(sch):
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def block_name(sch, block_rv) -> str:
    return sch.get(block_rv).name_hint


#: a block its consumers read in more places than this is computed once into its
#: buffer, not inlined
MAX_INLINED_READS = 4


def consumer_reads(sch, block_rv) -> int:
    """How many loads of *block_rv*'s output its consumer blocks contain (each one a copy
    of its expression if it were inlined)."""
    import tvm_ffi
    writes = sch.get(block_rv).writes
    if not writes:      # no declared write region (scatter_nd's data-dependent update)
        return 0
    out = writes[0].source
    loads: list = []
    for c in sch.get_consumers(block_rv):
        tvm_ffi.structural_walk(sch.get(c).body, [(tvm.ir.expr.TensorLoad, loads.append)])
    return sum(1 for ld in loads if ld.source.same_as(out))


def inline_injective(sch, params, keep=()) -> None:
    """Inline every spatial, non-output block (except *keep*) into its consumers,
    then what is left into its producers where possible.

    A block its consumers read in more than :data:`MAX_INLINED_READS` places stays:
    inlined, its whole expression (with everything already inlined into it) is
    copied into each place, so the kernel grows with the product and every later
    inline and simplification with it.  Places, not consumer blocks: once the
    readers are inlined into one concatenation, that one block reads it 20 times.
    SSD's per-class decoder reads one box decoding (itself six levels' transposes,
    concatenated) from 20 class concatenations: inlining it took minutes of
    scheduling, and the decoded boxes would have been recomputed,
    ``exp`` and all, 20 times per box at run time.
    """
    keep_names = {block_name(sch, b) for b in keep}
    for _ in range(2):
        changed = False
        for b in root_blocks(sch):
            name = block_name(sch, b)
            blk = sch.get(b)
            if name in keep_names or not is_spatial(blk) or writes_param(sch, b, params):
                continue
            if consumer_reads(sch, b) > MAX_INLINED_READS:
                continue
            try:
                sch.compute_inline(b)
                changed = True
            except Exception:  # noqa: BLE001 - not inlinable: keep it
                pass
        if not changed:
            break


def accumulate_locally(sch, block_rv, params) -> tuple:
    """(the block, its epilogue blocks) with the block's result in a ``local`` buffer.

    An output block gets a ``local`` cache whose write-back is the epilogue;
    otherwise its consumers (the inlined elementwise chain) are the epilogue."""
    name = block_name(sch, block_rv)
    if writes_param(sch, block_rv, params):
        epilogues = [sch.cache_write(block_rv, 0, "local")]
        return sch.get_sblock(name), epilogues
    sch.set_scope(block_rv, 0, "local")
    return block_rv, list(sch.get_consumers(block_rv))
