"""The TIR lowering pipeline for CPU kernels: TVM's ``s_tir`` pipeline plus one pass.

TVM 0.27's ``LowerTVMBuiltin`` turns every ``local`` buffer into a
``TVMBackendAllocWorkspace``/``FreeWorkspace`` call pair, however small --
for a register-blocked micro-kernel that is two runtime calls per output
tile around a 100-cycle loop (squeezenet's first convolution: 16k tiles,
about half its time).  :func:`annotate_stack_allocs` marks small,
constant-size ``local`` allocations ``disable_lower_builtin`` (TVM's own
annotation for "leave this allocation to the code generator"), so LLVM gets
a stack ``alloca`` it promotes to registers.
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm.tirx.stmt import AllocBuffer

#: the registered TIR pipeline name (pass as ``tvm.compile(..., tir_pipeline=NAME)``)
PIPELINE = "mxc_cpu"

#: largest ``local`` allocation kept on the stack (bytes)
MAX_STACK_BYTES = 16 * 1024

_KEY = "disable_lower_builtin"


def _scope(buf) -> str:
    scope = getattr(buf, "scope", None)
    return scope() if callable(scope) else str(scope or "global")


def _stack_bytes(buf) -> int | None:
    try:
        elems = math.prod(int(d) for d in buf.shape)
    except (TypeError, ValueError):
        return None
    dtype = tvm.runtime.DataType(str(buf.dtype))
    return elems * max(1, dtype.bits * dtype.lanes // 8)


def _annotate(func, _mod, _ctx):
    def visit(node, mutator):
        node = mutator.default_mutate(node)
        buf = node.buffer
        if _scope(buf) != "local" or _KEY in node.annotations:
            return node
        size = _stack_bytes(buf)
        if size is None or size > MAX_STACK_BYTES:
            return node
        ann = dict(node.annotations)
        ann[_KEY] = tvm.tirx.IntImm("bool", 1)
        return AllocBuffer(buf, annotations=ann)

    return tvm_ffi.structural_mutate(func, [(AllocBuffer, visit)])


annotate_stack_allocs = tvm.tirx.transform.prim_func_pass(
    _annotate, opt_level=0, name="MxcAnnotateStackAllocs")


def _factory():
    from tvm.tirx import compilation_pipeline as cp
    pipeline, finalize_host, finalize_device = cp.get_tir_pipeline("s_tir")

    def host():
        return tvm.ir.transform.Sequential([annotate_stack_allocs, finalize_host()])

    return pipeline, host, finalize_device


_REGISTERED = False


def tir_pipeline() -> str:
    """Register (once) and return the name of mxc's CPU TIR pipeline."""
    global _REGISTERED
    if not _REGISTERED:
        from tvm.tirx import compilation_pipeline as cp
        cp.register_tir_pipeline(PIPELINE, _factory)
        _REGISTERED = True
    return PIPELINE
