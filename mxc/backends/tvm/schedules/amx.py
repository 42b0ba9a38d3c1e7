"""AMX tile micro-kernels (``tdpbf16ps``, ``tdpbusd``): compiled and inspected, not yet used.

Sapphire Rapids and later multiply whole tiles: ``tdpbf16ps`` adds a 16x32
bfloat16 by 32x16 (VNNI-packed) product into 16x16 float32 accumulators,
``tdpbusd`` a 16x64 uint8 by 64x16 int8 one into int32 -- 16x the work of one
``vdpbf16ps``/``vpdpbusd``.  TVM 0.27 ships no AMX tensor intrinsics, and
its LLVM code generator has no ``x86_amx`` type, so, as for the bf16 vector
kernels (:mod:`.bf16`), each step is an LLVM function linked into the kernel
(``pragma_import_llvm``) and inlined: load the accumulator and operand tiles
(``tileloadd64``), one tile product, store the accumulator (``tilestored64``).
It uses LLVM's ``*.internal`` intrinsics, whose tile shapes are operands, so
LLVM's tile-configuration pass writes the ``ldtilecfg`` itself.

:func:`dense_kernel` builds ``C[M, N] += A[M, K] . B[K, N]`` from these steps
for ``M, N`` multiples of 16 and ``K`` of one step's depth, B packed as
:func:`.bf16.pack_weights` / :func:`.int8.pack_weights` pack it.

**Status.**  The kernels compile for ``-mcpu=sapphirerapids`` and their
assembly has the tile configuration and instructions
(``tests/backends/test_amx.py``), but they have never run: the machine they
were written on (AMD Zen 4) has no AMX.  So the compile pipeline does not
select them; ``--precision bf16`` on a Sapphire Rapids target uses the
AVX512-BF16 kernels and INT8 the AVX512-VNNI ones.  Wiring them in (the
legalization of :mod:`.bf16`/:mod:`.int8` choosing a tile kernel when the
target has ``amx-bf16``/``amx-int8``, then a blocked schedule keeping the
accumulators in tiles across the reduction) needs an AMX machine to check
the results against the vector kernels.
"""

from __future__ import annotations

import functools

#: rows of a tile, and bytes of one tile row
ROWS, ROW_BYTES = 16, 64
#: instruction -> (operand dtype, accumulator dtype, operand elements per tile row)
KINDS = {"tdpbf16ps": ("uint16", "float32", 32), "tdpbusd": ("uint8", "int32", 64)}


def helper_name(kind: str) -> str:
    return f"mxc_amx_{kind}_16x16"


@functools.lru_cache(maxsize=None)
def helper_ir(kind: str) -> str:
    """The LLVM function of one tile step of *kind* (``tdpbf16ps`` or ``tdpbusd``):
    ``(c, a, b, a_stride, b_stride, c_stride)``, strides in bytes."""
    if kind not in KINDS:
        raise ValueError(f"no AMX tile product {kind!r}; known: {', '.join(KINDS)}")
    name = helper_name(kind)
    tile = f"i16 {ROWS}, i16 {ROW_BYTES}"
    return f"""
define linkonce_odr void @{name}(ptr %c, ptr %a, ptr %b, i64 %sa, i64 %sb, i64 %sc) \
alwaysinline {{
  %tc = call x86_amx @llvm.x86.tileloadd64.internal({tile}, ptr %c, i64 %sc)
  %ta = call x86_amx @llvm.x86.tileloadd64.internal({tile}, ptr %a, i64 %sa)
  %tb = call x86_amx @llvm.x86.tileloadd64.internal({tile}, ptr %b, i64 %sb)
  %r = call x86_amx @llvm.x86.{kind}.internal({tile}, i16 {ROW_BYTES}, x86_amx %tc, \
x86_amx %ta, x86_amx %tb)
  call void @llvm.x86.tilestored64.internal({tile}, ptr %c, i64 %sc, x86_amx %r)
  ret void
}}
declare x86_amx @llvm.x86.tileloadd64.internal(i16, i16, ptr, i64)
declare x86_amx @llvm.x86.{kind}.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare void @llvm.x86.tilestored64.internal(i16, i16, ptr, i64, x86_amx)
"""


def dense_kernel(kind: str, m: int, n: int, k: int):
    """A PrimFunc ``C[m, n] = A[m, k] . B`` of *kind*'s tile steps; B packed
    ``[n/16, k/g, 16 * g]`` (``g`` = operand elements per accumulator lane: 2 for
    bfloat16 bits, 4 for int8), A row-major.  Not used by the pipeline (see above)."""
    from tvm.script import tirx as T

    operand, acc, per_row = KINDS[kind]
    group = per_row // ROWS
    if m % ROWS or n % ROWS or k % per_row:
        raise ValueError(f"AMX {kind} dense needs m, n multiples of {ROWS} and k of "
                         f"{per_row}, not {m}x{n}x{k}")
    size = 2 if operand == "uint16" else 1
    ir, name = helper_ir(kind), helper_name(kind)
    b_type = "int8" if kind == "tdpbusd" else operand

    @T.prim_func
    def kernel(a: T.Buffer((m, k), operand), b: T.Buffer((n // ROWS, k // group, per_row), b_type),
               c: T.Buffer((m, n), acc)):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in range(m * n):
            c[i // n, i % n] = T.cast(0, acc)
        for io, jo in T.grid(m // ROWS, n // ROWS):
            with T.attr(0, "pragma_import_llvm", ir):
                for ko in range(k // per_row):
                    T.evaluate(T.call_extern(
                        "void", name, T.address_of(c[io * ROWS, jo * ROWS]),
                        T.address_of(a[io * ROWS, ko * per_row]),
                        T.address_of(b[jo, ko * ROWS, 0]), T.int64(k * size),
                        T.int64(ROW_BYTES), T.int64(n * 4)))

    return kernel
