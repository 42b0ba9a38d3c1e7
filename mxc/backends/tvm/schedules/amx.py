"""AMX tile steps (``tdpbf16ps``, ``tdpbusd``), their emulation, and the tile schedule.

Sapphire Rapids and later multiply whole tiles: ``tdpbf16ps`` adds a rows x 32
bfloat16 by 32x16 (VNNI-packed) product into rows x 16 float32 accumulators,
``tdpbusd`` a rows x 64 uint8 by 64x16 int8 one into int32 -- 16x the work of
one ``vdpbf16ps``/``vpdpbusd``.  TVM 0.27 ships no AMX tensor intrinsics, and
its LLVM code generator has no ``x86_amx`` type, so, as for the bf16 vector
kernels (:mod:`.bf16`), each step is an LLVM function linked into the kernel
(``pragma_import_llvm``) and inlined: load the accumulator and operand tiles
(``tileloadd64``), one tile product, store the accumulator (``tilestored64``).
It uses LLVM's ``*.internal`` intrinsics, whose tile shapes are operands, so
LLVM's tile-configuration pass writes the ``ldtilecfg`` itself.

:func:`tile_intrinsic` makes that step a tensor intrinsic and :func:`rule_tiles`
schedules a convolution around it (used by :mod:`.bf16_amx` and
:mod:`.int8_amx` on targets with ``amx-bf16``/``amx-int8``);
:func:`dense_kernel` is a bare ``C = A . B`` of steps.

**Emulation.**  The machines this was written on have no AMX.  With
``MXC_EMULATE_AMX=1`` (:data:`EMULATE_ENV`) the step is built as scalar loops with
the instruction's definition instead -- same function, same pointers and byte
strides -- so the whole kernel around it (packing, tiling, strides, fused
epilogues) runs on any x86 CPU and is checked against the numpy oracle
(``tests/backends/test_amx.py``); the manifest then lists the AMX features as
emulated, not needed.  What emulation cannot check, the four tile instructions and
LLVM's tile configuration, is checked in the assembly for ``-mcpu=sapphirerapids``.
Nothing here has been timed.
"""

from __future__ import annotations

import functools
import os

from tvm import s_tir, tirx

#: rows of a tile, and bytes of one tile row
ROWS, ROW_BYTES = 16, 64
#: instruction -> (operand dtype, accumulator dtype, operand elements per tile row)
KINDS = {"tdpbf16ps": ("uint16", "float32", 32), "tdpbusd": ("uint8", "int32", 64)}


#: environment variable: when set to 1, :func:`helper_ir` gives the scalar emulation
#: of each tile step (same function, same arguments), so the AMX kernels -- their
#: layouts, strides, blocking and fused epilogues -- run and are checked on a CPU
#: without AMX; only the four tile instructions themselves are then not exercised
EMULATE_ENV = "MXC_EMULATE_AMX"


def emulating() -> bool:
    """Whether this process builds the scalar emulation of the tile steps."""
    return os.environ.get(EMULATE_ENV, "") == "1"


def helper_name(kind: str, rows: int = ROWS, steps: int = 1) -> str:
    return f"mxc_amx_{kind}_{rows}x16" + (f"_s{steps}" if steps > 1 else "")


def helper_ir(kind: str, rows: int = ROWS, steps: int = 1) -> str:
    """The LLVM function of *steps* tile steps of *kind* (``tdpbf16ps`` or ``tdpbusd``)
    into one accumulator tile of *rows* rows: ``(c, a, b, a_stride, b_stride,
    c_stride)``, strides in bytes.  The accumulator is loaded once, stays in a tile
    register across the steps -- step ``s`` reads A 64 bytes a row further and B 16
    rows further -- and is stored once.  Its scalar emulation when :func:`emulating`."""
    if kind not in KINDS:
        raise ValueError(f"no AMX tile product {kind!r}; known: {', '.join(KINDS)}")
    if not 1 <= rows <= ROWS:
        raise ValueError(f"an AMX tile has 1 to {ROWS} rows, not {rows}")
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"an AMX helper takes 1 to {MAX_STEPS} steps, not {steps}")
    return (_emulation_ir if emulating() else _tile_ir)(kind, rows, steps)


#: most steps one helper unrolls (2,048 bfloat16 / 4,096 int8 input channels)
MAX_STEPS = 64


@functools.lru_cache(maxsize=None)
def _tile_ir(kind: str, rows: int, steps: int) -> str:
    name = helper_name(kind, rows, steps)
    acc, ops = f"i16 {rows}, i16 {ROW_BYTES}", f"i16 {ROWS}, i16 {ROW_BYTES}"
    body = []
    for s in range(steps):
        prev = "%tc" if s == 0 else f"%r{s - 1}"
        body.append(f"""
  %pa{s} = getelementptr i8, ptr %a, i64 {s * ROW_BYTES}
  %ob{s} = mul i64 %sb, {s * ROWS}
  %pb{s} = getelementptr i8, ptr %b, i64 %ob{s}
  %ta{s} = call x86_amx @llvm.x86.tileloadd64.internal({acc}, ptr %pa{s}, i64 %sa)
  %tb{s} = call x86_amx @llvm.x86.tileloadd64.internal({ops}, ptr %pb{s}, i64 %sb)
  %r{s} = call x86_amx @llvm.x86.{kind}.internal(i16 {rows}, i16 {ROW_BYTES}, \
i16 {ROW_BYTES}, x86_amx {prev}, x86_amx %ta{s}, x86_amx %tb{s})""")
    return f"""
define linkonce_odr void @{name}(ptr %c, ptr %a, ptr %b, i64 %sa, i64 %sb, i64 %sc) \
alwaysinline {{
  %tc = call x86_amx @llvm.x86.tileloadd64.internal({acc}, ptr %c, i64 %sc){"".join(body)}
  call void @llvm.x86.tilestored64.internal({acc}, ptr %c, i64 %sc, x86_amx %r{steps - 1})
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
    "tdpbf16ps": ("float", "fadd", """
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
    "tdpbusd": ("i32", "add", "".join(f"""
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


@functools.lru_cache(maxsize=None)
def _emulation_ir(kind: str, rows: int, steps: int) -> str:
    """Scalar loops with the tile steps' semantics: ``C[m, n] += sum_k A[m, k-group] .
    B[k, n-group]`` over ``m < rows``, 16 ``n`` and ``16 * steps`` groups ``k`` (A's
    steps are consecutive 64 bytes of a row, B's consecutive 16-row blocks)."""
    name = helper_name(kind, rows, steps)
    elem, _, body = _GROUP_IR[kind]
    convert = """
define linkonce_odr float @mxc_amx_bf16_to_f32(i16 %x) alwaysinline {
  %w = zext i16 %x to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}
""" if kind == "tdpbf16ps" else ""
    return convert + f"""
define linkonce_odr void @{name}(ptr %c, ptr %a, ptr %b, i64 %sa, i64 %sb, i64 %sc) \
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
    steps = k // per_row
    ir, name = helper_ir(kind, ROWS, steps), helper_name(kind, ROWS, steps)
    b_type = "int8" if kind == "tdpbusd" else operand

    @T.prim_func
    def kernel(a: T.Buffer((m, k), operand), b: T.Buffer((n // ROWS, k // group, per_row), b_type),
               c: T.Buffer((m, n), acc)):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in range(m * n):
            c[i // n, i % n] = T.cast(0, acc)
        for io, jo in T.grid(m // ROWS, n // ROWS):
            with T.attr(0, "pragma_import_llvm", ir):
                T.evaluate(T.call_extern(
                    "void", name, T.address_of(c[io * ROWS, jo * ROWS]),
                    T.address_of(a[io * ROWS, 0]), T.address_of(b[jo, 0, 0]),
                    T.int64(k * size), T.int64(ROW_BYTES), T.int64(n * 4)))

    return kernel


# ---------------------------------------------------------------------------
# convolution on tiles: the tensor intrinsic and the schedule
# ---------------------------------------------------------------------------
#: per kind: (A dtype, B dtype, accumulator dtype, operand elements per accumulator lane)
OPERANDS = {"tdpbf16ps": ("uint16", "uint16", "float32", 2),
            "tdpbusd": ("uint8", "int8", "int32", 4)}
#: float32/int32 lanes of an accumulator tile row
LANES = ROW_BYTES // 4


def tile_channels(kind: str) -> int:
    """Input channels of one A tile row (64 bytes): 32 bfloat16, 64 int8."""
    return KINDS[kind][2]


def tile_rows(width: int) -> int:
    """Output pixels per tile: the largest divisor of the row *width* up to 16 (a
    partial tile would need its own configuration)."""
    return max(r for r in range(1, ROWS + 1) if width % r == 0)


#: strides the tile kernels take (a stride-2 layer reads its input split by column
#: phase, :func:`phase_split`)
STRIDES = ((1, 1), (2, 2))


def conv_fits(xs, ws, ys, strides, kind: str, min_rows: int) -> bool:
    """Whether an NHWC conv2d (input/weight/output shapes *xs*/*ws*/*ys*) is a tile
    kernel's: stride 1 or 2 (:data:`STRIDES`), at least one tile row of input channels
    (padding fewer up to it multiplies the work), whole 16-channel output blocks, and
    rows of at least *min_rows* pixels."""
    return (tuple(int(s) for s in strides) in STRIDES and ws[2] >= tile_channels(kind)
            and ys[3] % LANES == 0 and tile_rows(ys[2]) >= min_rows)


def phase_split(shape, padded, phases: int):
    """The padded input ``[n, h, w, c]`` (element ``padded(i, y, x, ch)``) as
    ``[n, h, phases, ceil(w / phases), c]``: column ``x`` at phase ``x % phases``,
    position ``x // phases``.  A stride-``phases`` row's consecutive output pixels then
    read consecutive pixels of one phase -- a tile at a stride of one pixel, as at
    stride 1 -- and the rounding copy (``pad_temp``) makes the split for free."""
    from tvm import te
    n, h, w, c = shape
    return te.compute((n, h, phases, -(-w // phases), c),
                      lambda i, y, ph, x, ch: padded(i, y, x * phases + ph, ch),
                      name="pad_temp")


def phase_tap(src, phases: int, i, y, x, tap, ch):
    """``padded[i, y, x * phases + tap, ch]`` of :func:`phase_split`'s *src* (*tap*:
    the kernel column's offset, ``rx * dilation``)."""
    return src[i, y, tap % phases, x + tap // phases, ch]


def _product(kind: str, a, b):
    from tvm.script import tirx as T
    if kind == "tdpbusd":
        return T.cast(a, "int32") * T.cast(b, "int32")

    def f32(x):
        return T.reinterpret(T.shift_left(T.cast(x, "uint32"), T.uint32(16)), dtype="float32")
    return f32(a) * f32(b)


def tile_steps(kind: str, channels: int) -> int:
    """Tile steps one helper call takes over *channels* input channels (padded to whole
    tile rows): all of them, or the largest divisor up to :data:`MAX_STEPS`."""
    blocks = -(-channels // tile_channels(kind))
    return max(s for s in range(1, min(blocks, MAX_STEPS) + 1) if blocks % s == 0)


def register(kind: str, width: int, channels: int) -> None:
    """Register *kind*'s tile intrinsic for output rows of *width* pixels over *channels*
    input channels (before any schedule, or tuning record, names it)."""
    tile_intrinsic(kind, tile_rows(width), tile_steps(kind, channels))


@functools.lru_cache(maxsize=None)
def tile_intrinsic(kind: str, rows: int, steps: int = 1) -> str:
    """Register (once) and name *steps* tile steps of *kind* as a tensor intrinsic:
    ``C[rows, 16] += A[rows, 16 * g * steps] . B[16 * steps, 16, g]`` (``g`` operands
    per accumulator lane), A and C at any row stride, B contiguous rows of 64 bytes."""
    from tvm.script import tirx as T

    a_type, b_type, acc, group = OPERANDS[kind]
    cols, size = tile_channels(kind) * steps, 2 if a_type == "uint16" else 1
    pairs = cols // group
    name = helper_name(kind, rows, steps)

    def product(x, y):
        return _product(kind, x, y)

    @T.prim_func(s_tir=True)
    def desc(a_h: T.handle, b_h: T.handle, c_h: T.handle) -> None:
        sa, sc = T.int32(), T.int32()
        a = T.match_buffer(a_h, (rows, cols), a_type, offset_factor=1, strides=[sa, 1])
        b = T.match_buffer(b_h, (pairs, LANES, group), b_type, offset_factor=1)
        c = T.match_buffer(c_h, (rows, LANES), acc, offset_factor=1, strides=[sc, 1],
                           scope="local")
        with T.sblock("root"):
            T.reads(c[0:rows, 0:LANES], a[0:rows, 0:cols], b[0:pairs, 0:LANES, 0:group])
            T.writes(c[0:rows, 0:LANES])
            for p, lane, r, i in T.grid(rows, LANES, pairs, group):
                with T.sblock("update"):
                    vp, vl, vr, vi = T.axis.remap("SSRR", [p, lane, r, i])
                    c[vp, vl] = c[vp, vl] + product(a[vp, vr * group + vi], b[vr, vl, vi])

    # the same buffers (TVMScript takes a function's match_buffer only in its own body),
    # the step as one call of the helper (strides in bytes)
    @T.prim_func(s_tir=True)
    def impl(a_h: T.handle, b_h: T.handle, c_h: T.handle) -> None:
        sa, sc = T.int32(), T.int32()
        a = T.match_buffer(a_h, (rows, cols), a_type, offset_factor=1, strides=[sa, 1])
        b = T.match_buffer(b_h, (pairs, LANES, group), b_type, offset_factor=1)
        c = T.match_buffer(c_h, (rows, LANES), acc, offset_factor=1, strides=[sc, 1],
                           scope="local")
        with T.sblock("root"):
            T.reads(c[0:rows, 0:LANES], a[0:rows, 0:cols], b[0:pairs, 0:LANES, 0:group])
            T.writes(c[0:rows, 0:LANES])
            T.evaluate(T.call_extern(
                "void", name, c.access_ptr("rw"), a.access_ptr("r"), b.access_ptr("r"),
                T.int64(sa) * T.int64(size), T.int64(ROW_BYTES), T.int64(sc) * T.int64(4)))

    intrin = f"mxc_amx_{kind}_{rows}x{LANES}_s{steps}"
    s_tir.TensorIntrin.register(intrin, desc, impl, override=True)
    return intrin


def rule_tiles(func: tirx.PrimFunc, block: str, kind: str):
    """The tile schedule of the ``[n, y, x, k, ry, rx, rc, ri]`` dot-product block
    *block* of *func* (None when it has none)::

        parallel for (n, y, 16 * v output channels):        # one output row a thread
            for x tile of rows pixels:
                acc[rows][16 * v] = 0
                for (ry, rx), channel chunk, v blocks:      # a chunk: up to 64 tile rows
                    acc[:, block] += steps(pad_temp[y + ry, x + rx : + rows], w[...])
            out[row] = epilogue(acc)                        # fused, vectorized

    A tile's pixels are a row's consecutive ``rows`` output pixels, whose taps are
    consecutive input pixels: the A tile's stride is one pixel's channels.  One helper
    call runs the steps over a whole chunk of input channels (:func:`tile_steps`) with
    the accumulator held in a tile register, so it is loaded and stored once per tap,
    not once per 32 (64) channels."""
    from .int8 import open_dot_kernel, schedule_pads, vectorize_epilogues

    opened = open_dot_kernel(func, block)
    if opened is None:
        return None
    sch, main, ext, epilogues, keep = opened                  # ext: n y x k ry rx rc ri
    group = OPERANDS[kind][3]
    if ext[7] != group or ext[6] % (tile_channels(kind) // group) or ext[3] % LANES:
        return None
    n, y, x, k, ry, rx, rc, ri = sch.get_loops(main)
    rows = tile_rows(ext[2])
    xo, xi = sch.split(x, [None, rows])
    blocks = ext[3] // LANES
    ko, kv, kl = sch.split(k, [None, max(v for v in (1, 2, 4) if blocks % v == 0), LANES])
    steps = tile_steps(kind, ext[6] * group)
    rco, rci = sch.split(rc, [None, steps * tile_channels(kind) // group])
    sch.reorder(n, y, ko, xo, ry, rx, rco, kv, xi, kl, rci, ri)
    par = sch.fuse(n, y, ko)
    for epi in epilogues:
        sch.reverse_compute_at(epi, par, preserve_unit_loops=True)
    sch.parallel(par)
    sch.annotate(par, "pragma_import_llvm", helper_ir(kind, rows, steps))
    vectorize_epilogues(sch, epilogues)
    init = sch.decompose_reduction(main, xo)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(xi, tile_intrinsic(kind, rows, steps))
    schedule_pads(sch, keep)
    return sch
