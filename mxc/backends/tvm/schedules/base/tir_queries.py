"""Facts about TIR blocks that the CPU schedule rules decide on.

Every fact is read from the IR's structure -- iter vars, loop extents, buffer
regions, expression nodes found by a structural walk -- never from printed
TIR, whose spelling changes between TVM versions (and whose text a buffer or
variable name can accidentally match).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

#: intrinsics TVM 0.27's LLVM back end cannot lower for vector types: a block calling
#: one is left scalar (vectorising it fails the build with "unknown intrinsic")
SCALAR_ONLY_OPS = frozenset({"tirx.sinh", "tirx.cosh", "tirx.call_extern",
                             "tirx.call_pure_extern", "tirx.tvm_call_packed"})

#: the operator of ``T.if_then_else``: a load guarded by a condition (padding)
_IF_THEN_ELSE = "prim.if_then_else"


def as_int(x) -> int | None:
    """*x* as a Python int, or None when it is not a constant."""
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def uses_var(expr, var) -> bool:
    """Whether *var* occurs in *expr*."""
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr, []))


def is_reduction(block) -> bool:
    """Whether *block* has a reduction (``CommReduce``) iter var."""
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)


def canonical_loops(sch, block_rv):
    """The block's loops when they map one-to-one, in order, onto its iter vars."""
    block = sch.get(block_rv)
    loops = sch.get_loops(block_rv)
    if len(loops) != len(block.iter_vars):
        return None
    for loop_rv, iv in zip(loops, block.iter_vars):
        loop = sch.get(loop_rv)
        if as_int(loop.extent) is None or as_int(loop.extent) != as_int(iv.dom.extent):
            return None
    return loops


def _called_ops(stmt) -> set[str]:
    """Names of the operators *stmt* calls (``tirx.sinh``, ``prim.if_then_else`` ...)."""
    names: set[str] = set()

    def call(node) -> None:
        name = getattr(node.op, "name", None)
        if name is not None:
            names.add(str(name))

    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Call, call)])
    return names


def has_root_block(func) -> bool:
    """Whether *func*'s body is TVM's ``root`` block, the one every schedule starts from.
    A kernel TVM lowers to an external call (``sort``/``topk``/``argsort``: one opaque
    block calling a library routine) has none: there is nothing for a rule to schedule."""
    from tvm.s_tir import SBlockRealize
    body = func.body
    return isinstance(body, SBlockRealize) and str(body.block.name_hint) == "root"


def has_bounds_check(stmt) -> bool:
    """Whether *stmt* has a conditional load (a ``Select`` or ``if_then_else``): the
    zero padding of a convolution or pooling input."""
    selects: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.Select, selects.append)])
    return bool(selects) or _IF_THEN_ELSE in _called_ops(stmt)


def is_vectorizable(stmt) -> bool:
    """Whether *stmt* calls no intrinsic of :data:`SCALAR_ONLY_OPS`."""
    return not (_called_ops(stmt) & SCALAR_ONLY_OPS)


def constant_bounds(stmt, var) -> set[int]:
    """Constants K of the comparisons ``K <= var`` and ``var < K`` in *stmt*: where a
    condition on *var* changes value (a concatenation switching input along it)."""
    found: set[int] = set()

    def lower(node) -> None:          # K <= var
        if isinstance(node.a, tirx.IntImm) and isinstance(node.b, tirx.Var) \
                and node.b.same_as(var):
            found.add(int(node.a.value))

    def upper(node) -> None:          # var < K
        if isinstance(node.a, tirx.Var) and node.a.same_as(var) \
                and isinstance(node.b, tirx.IntImm):
            found.add(int(node.b.value))

    tvm_ffi.structural_walk(stmt, [(tirx.LE, lower), (tirx.LT, upper)])
    return found
