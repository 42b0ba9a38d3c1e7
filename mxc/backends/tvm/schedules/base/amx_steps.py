"""AMX tile steps as LLVM functions: the real instructions, or their scalar emulation.

A helper ``(c, a, b, sa, sb, sc, sv)`` (strides in bytes) adds ``steps`` tile
products into ``blocks`` accumulator tiles of ``rows`` rows side by side
(``C[:, 16 v : 16 v + 16]`` at ``c + 64 v``, row stride ``sc``): each step loads one
A tile (``rows`` x 64 bytes at ``a + 64 s``, row stride ``sa``) and, per block, one
B tile (16 rows of 64 bytes at ``b + sv v + 16 sb s``).  The accumulators are loaded
once, stay in tile registers across the steps, and are stored once; one A tile
serves all the blocks.  TVM 0.27's LLVM code generator has no ``x86_amx`` type, so
the helper is linked into the kernel as LLVM IR (``pragma_import_llvm``) and
inlined; it uses LLVM's ``*.internal`` intrinsics, whose tile shapes are operands,
so LLVM's tile-configuration pass writes the ``ldtilecfg`` itself.

**Emulation.**  When the build's context says ``emulate_amx`` (``MXC_EMULATE_AMX=1``,
read once into the options: :class:`...options.CompileOptions`) the helper is built as
scalar loops with the instructions' definition instead -- same name, arguments and
memory -- so every kernel around it runs on a CPU without AMX.  The setting is read
from the entered build context (:func:`...build_context.current_context`), never the
environment: the code and the manifest of one build agree on it.
"""

from __future__ import annotations

import functools

#: rows of a tile, and bytes of one tile row
ROWS, ROW_BYTES = 16, 64
#: instruction -> (operand dtype, accumulator dtype, operand elements per tile row)
KINDS = {"tdpbf16ps": ("uint16", "float32", 32), "tdpbusd": ("uint8", "int32", 64)}
#: most tile products one helper unrolls (steps x blocks): 2,048 bfloat16 / 4,096 int8
#: input channels for one block
MAX_PRODUCTS = 64
#: accumulator tiles a helper keeps (with one A and one B tile: 6 of the 8 registers)
MAX_BLOCKS = 4
def helper_name(kind: str, rows: int = ROWS, steps: int = 1, blocks: int = 1) -> str:
    return f"mxc_amx_{kind}_{rows}x{16 * blocks}_s{steps}"


def helper_ir(kind: str, rows: int = ROWS, steps: int = 1, blocks: int = 1,
              emulate: bool | None = None) -> str:
    """The LLVM IR of the helper :func:`helper_name` names (module docstring); its
    scalar emulation when *emulate* (None: the current build context's ``emulate_amx``;
    outside any build, the real instructions)."""
    if kind not in KINDS:
        raise ValueError(f"no AMX tile product {kind!r}; known: {', '.join(KINDS)}")
    if not 1 <= rows <= ROWS:
        raise ValueError(f"an AMX tile has 1 to {ROWS} rows, not {rows}")
    if not 1 <= blocks <= MAX_BLOCKS or not 1 <= steps * blocks <= MAX_PRODUCTS:
        raise ValueError(f"an AMX helper takes 1 to {MAX_BLOCKS} blocks and 1 to "
                         f"{MAX_PRODUCTS} products, not {steps} steps x {blocks} blocks")
    if emulate is None:
        from ...build_context import current_context
        ctx = current_context()
        emulate = ctx is not None and ctx.emulate_amx
    return (_emulation_ir if emulate else _tile_ir)(kind, rows, steps, blocks)


_SIGNATURE = "(ptr %c, ptr %a, ptr %b, i64 %sa, i64 %sb, i64 %sc, i64 %sv) alwaysinline"


@functools.lru_cache(maxsize=None)
def _tile_ir(kind: str, rows: int, steps: int, blocks: int) -> str:
    acc, ops = f"i16 {rows}, i16 {ROW_BYTES}", f"i16 {ROWS}, i16 {ROW_BYTES}"
    lines = []
    for v in range(blocks):
        lines += [f"%pc{v} = getelementptr i8, ptr %c, i64 {v * ROW_BYTES}",
                  f"%c{v}_0 = call x86_amx @llvm.x86.tileloadd64.internal({acc}, ptr %pc{v}, "
                  f"i64 %sc)",
                  f"%ov{v} = mul i64 %sv, {v}"]
    for s in range(steps):
        lines += [f"%pa{s} = getelementptr i8, ptr %a, i64 {s * ROW_BYTES}",
                  f"%ta{s} = call x86_amx @llvm.x86.tileloadd64.internal({acc}, ptr %pa{s}, "
                  f"i64 %sa)",
                  f"%os{s} = mul i64 %sb, {s * ROWS}"]
        for v in range(blocks):
            lines += [f"%ob{s}_{v} = add i64 %os{s}, %ov{v}",
                      f"%pb{s}_{v} = getelementptr i8, ptr %b, i64 %ob{s}_{v}",
                      f"%tb{s}_{v} = call x86_amx @llvm.x86.tileloadd64.internal({ops}, "
                      f"ptr %pb{s}_{v}, i64 %sb)",
                      f"%c{v}_{s + 1} = call x86_amx @llvm.x86.{kind}.internal(i16 {rows}, "
                      f"i16 {ROW_BYTES}, i16 {ROW_BYTES}, x86_amx %c{v}_{s}, x86_amx %ta{s}, "
                      f"x86_amx %tb{s}_{v})"]
    lines += [f"call void @llvm.x86.tilestored64.internal({acc}, ptr %pc{v}, i64 %sc, "
              f"x86_amx %c{v}_{steps})" for v in range(blocks)]
    body = "\n  ".join(lines)
    return f"""
define linkonce_odr void @{helper_name(kind, rows, steps, blocks)}{_SIGNATURE} {{
  {body}
  ret void
}}
declare x86_amx @llvm.x86.tileloadd64.internal(i16, i16, ptr, i64)
declare x86_amx @llvm.x86.{kind}.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare void @llvm.x86.tilestored64.internal(i16, i16, ptr, i64, x86_amx)
"""


#: per kind: LLVM IR computing one group's products into ``%p`` (a float or i32) from
#: the group's first operand bytes ``%ap`` and ``%bp`` -- the instruction's definition:
#: ``tdpbf16ps`` widens each bfloat16 to float32 (exact) and adds the pair's products
#: in order; ``tdpbusd`` multiplies unsigned by signed bytes and adds the four in int32
_GROUP_IR = {
    "tdpbf16ps": ("float", """
  %a0 = load i16, ptr %ap
  %ap1 = getelementptr i8, ptr %ap, i64 2
  %a1 = load i16, ptr %ap1
  %b0 = load i16, ptr %bp
  %bp1 = getelementptr i8, ptr %bp, i64 2
  %b1 = load i16, ptr %bp1
  %fa0 = call float @mxc_amx_bf16_to_f32(i16 %a0)
  %fa1 = call float @mxc_amx_bf16_to_f32(i16 %a1)
  %fb0 = call float @mxc_amx_bf16_to_f32(i16 %b0)
  %fb1 = call float @mxc_amx_bf16_to_f32(i16 %b1)
  %m0 = fmul float %fa0, %fb0
  %m1 = fmul float %fa1, %fb1
  %s0 = fadd float %acc, %m0
  %p = fadd float %s0, %m1
"""),
    "tdpbusd": ("i32", "".join(f"""
  %ap{j} = getelementptr i8, ptr %ap, i64 {j}
  %a{j} = load i8, ptr %ap{j}
  %bp{j} = getelementptr i8, ptr %bp, i64 {j}
  %b{j} = load i8, ptr %bp{j}
  %wa{j} = zext i8 %a{j} to i32
  %wb{j} = sext i8 %b{j} to i32
  %m{j} = mul i32 %wa{j}, %wb{j}""" for j in range(4)) + """
  %s0 = add i32 %acc, %m0
  %s1 = add i32 %s0, %m1
  %s2 = add i32 %s1, %m2
  %p = add i32 %s2, %m3
"""),
}

_BF16_TO_F32 = """
define linkonce_odr float @mxc_amx_bf16_to_f32(i16 %x) alwaysinline {
  %w = zext i16 %x to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}
"""


@functools.lru_cache(maxsize=None)
def _emulation_ir(kind: str, rows: int, steps: int, blocks: int) -> str:
    """Scalar loops with the steps' semantics, one block at a time:
    ``C[m, 16 v + n] += sum_k A[m, k-group] . B_v[k, n-group]`` over ``m < rows``,
    16 ``n`` and ``16 * steps`` groups ``k`` (A's steps are consecutive 64 bytes of a
    row, each block's B steps consecutive 16-row blocks)."""
    name = helper_name(kind, rows, steps, blocks)
    elem, body = _GROUP_IR[kind]
    calls = "\n  ".join(
        f"%pc{v} = getelementptr i8, ptr %c, i64 {v * ROW_BYTES}\n"
        f"  %ov{v} = mul i64 %sv, {v}\n"
        f"  %pb{v} = getelementptr i8, ptr %b, i64 %ov{v}\n"
        f"  call void @{name}_block(ptr %pc{v}, ptr %a, ptr %pb{v}, i64 %sa, i64 %sb, i64 %sc)"
        for v in range(blocks))
    return (_BF16_TO_F32 if kind == "tdpbf16ps" else "") + f"""
define linkonce_odr void @{name}{_SIGNATURE} {{
  {calls}
  ret void
}}

define linkonce_odr void @{name}_block(ptr %c, ptr %a, ptr %b, i64 %sa, i64 %sb, i64 %sc) \
alwaysinline {{
entry:
  br label %row
row:
  %mi = phi i64 [0, %entry], [%mi1, %row_end]
  %arow = mul i64 %mi, %sa
  %crow = mul i64 %mi, %sc
  br label %col
col:
  %ni = phi i64 [0, %row], [%ni1, %col_end]
  %coff0 = mul i64 %ni, 4
  %coff = add i64 %crow, %coff0
  %cp = getelementptr i8, ptr %c, i64 %coff
  %init = load {elem}, ptr %cp
  br label %step
step:
  %ki = phi i64 [0, %col], [%ki1, %step]
  %acc = phi {elem} [%init, %col], [%p, %step]
  %aoff0 = mul i64 %ki, 4
  %aoff = add i64 %arow, %aoff0
  %ap = getelementptr i8, ptr %a, i64 %aoff
  %boff0 = mul i64 %ki, %sb
  %boff = add i64 %boff0, %coff0
  %bp = getelementptr i8, ptr %b, i64 %boff
{body}
  %ki1 = add i64 %ki, 1
  %kmore = icmp ult i64 %ki1, {16 * steps}
  br i1 %kmore, label %step, label %col_end
col_end:
  store {elem} %p, ptr %cp
  %ni1 = add i64 %ni, 1
  %nmore = icmp ult i64 %ni1, 16
  br i1 %nmore, label %col, label %row_end
row_end:
  %mi1 = add i64 %mi, 1
  %mmore = icmp ult i64 %mi1, {rows}
  br i1 %mmore, label %row, label %done
done:
  ret void
}}
"""
