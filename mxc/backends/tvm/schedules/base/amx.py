"""AMX tile kernels: the tensor intrinsic, the convolution schedule, a bare dense kernel.

Sapphire Rapids and later multiply whole tiles: ``tdpbf16ps`` adds a rows x 32
bfloat16 by 32x16 (VNNI-packed) product into rows x 16 float32 accumulators,
``tdpbusd`` a rows x 64 uint8 by 64x16 int8 one into int32 -- 16x the work of
one ``vdpbf16ps``/``vpdpbusd``.  TVM 0.27 ships no AMX tensor intrinsics; the
steps are LLVM functions (:mod:`.amx_steps`), which :func:`tile_intrinsic` makes
a tensor intrinsic and :func:`rule_tiles` schedules a convolution around (for
:mod:`..families.bf16_amx` and :mod:`..families.int8_amx`, on targets with
``amx-bf16``/``amx-int8``; the int8 and bf16 kernels use its input phase split and
tap-major packing too, which is why this tile machinery sits in ``base/``);
:func:`dense_kernel` is a bare ``C = A . B`` of steps.

**Checked without AMX.**  The machines this was written on have none.  With
``MXC_EMULATE_AMX=1`` the steps are built as scalar loops with the instructions'
definition (:mod:`.amx_steps`), so the whole kernel around them (packing, tiling,
strides, fused epilogues) runs on any x86 CPU and is checked against the numpy
oracle (``tests/backends/test_amx.py``); the manifest then lists the AMX features
as emulated, not needed.  What emulation cannot check -- the tile instructions and
LLVM's tile configuration -- is checked in the assembly for ``-mcpu=sapphirerapids``.
Nothing here has been timed.
"""

from __future__ import annotations

import functools

import numpy as np
from tvm import s_tir, tirx

from .amx_steps import KINDS, MAX_BLOCKS, MAX_PRODUCTS, ROW_BYTES, ROWS, helper_ir, helper_name
from .bf16_step import bits_to_float
from .dot_kernel import open_dot_kernel, schedule_pads, vectorize_epilogues
from .kernel_family import PAD, part


def dense_kernel(kind: str, m: int, n: int, k: int, emulate: bool | None = None):
    """A PrimFunc ``C[m, n] = A[m, k] . B`` of *kind*'s tile steps; B packed
    ``[n/16, k/g, 16 * g]`` (``g`` = operand elements per accumulator lane: 2 for
    bfloat16 bits, 4 for int8), A row-major.  Not used by the pipeline (see above).
    *emulate*: the steps' scalar emulation (None: the current build context's choice)."""
    from tvm.script import tirx as T

    operand, acc, per_row = KINDS[kind]
    group = per_row // ROWS
    if m % ROWS or n % ROWS or k % per_row:
        raise ValueError(f"AMX {kind} dense needs m, n multiples of {ROWS} and k of "
                         f"{per_row}, not {m}x{n}x{k}")
    size = 2 if operand == "uint16" else 1
    steps = k // per_row
    ir, name = helper_ir(kind, ROWS, steps, emulate=emulate), helper_name(kind, ROWS, steps)
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
                    T.int64(k * size), T.int64(ROW_BYTES), T.int64(n * 4), T.int64(0)))

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
                      name="pad_temp", attrs=part(PAD))


def phase_tap(src, phases: int, i, y, x, tap, ch):
    """``padded[i, y, x * phases + tap, ch]`` of :func:`phase_split`'s *src* (*tap*:
    the kernel column's offset, ``rx * dilation``)."""
    return src[i, y, tap % phases, x + tap // phases, ch]


def _product(kind: str, a, b):
    """One product of the step, written as the kernels' TE writes it (tensorize
    matches the expressions): bfloat16 bits widened by :func:`.bf16_step.bits_to_float`,
    int8 codes widened to int32."""
    if kind == "tdpbusd":
        return a.astype("int32") * b.astype("int32")
    return bits_to_float(a) * bits_to_float(b)


def tile_blocks(channels: int) -> int:
    """16-channel accumulator tiles one helper call fills: up to :data:`MAX_BLOCKS`,
    dividing the output *channels*' blocks (each A tile then serves them all)."""
    return max(v for v in range(1, MAX_BLOCKS + 1) if (channels // LANES) % v == 0)


def tile_steps(kind: str, channels: int, blocks: int = 1) -> int:
    """Tile steps one helper call takes over *channels* input channels (padded to whole
    tile rows): all of them, or the largest divisor keeping ``steps * blocks`` within
    :data:`MAX_PRODUCTS`."""
    rows = -(-channels // tile_channels(kind))
    return max(s for s in range(1, min(rows, MAX_PRODUCTS // blocks) + 1) if rows % s == 0)


def register(kind: str, width: int, channels: int, out_channels: int) -> None:
    """Register *kind*'s tile intrinsic for output rows of *width* pixels, *channels*
    input and *out_channels* output channels (before any schedule, or tuning record,
    names it)."""
    blocks = tile_blocks(out_channels)
    tile_intrinsic(kind, tile_rows(width), tile_steps(kind, channels, blocks), blocks)


def tap_major(packed: np.ndarray) -> np.ndarray:
    """VNNI-packed weights ``[K/16, KH, KW, C/g, 16, g]`` as ``[KH, KW, K/16, C/g, 16, g]``:
    a tap's B tiles for consecutive 16-channel blocks one stride apart, so one helper
    call's blocks are one region (tensorize takes extra leading dimensions only of
    extent 1)."""
    return np.ascontiguousarray(packed.transpose(1, 2, 0, 3, 4, 5))


@functools.lru_cache(maxsize=None)
def tile_intrinsic(kind: str, rows: int, steps: int = 1, blocks: int = 1) -> str:
    """Register (once) and name a helper call (:mod:`.amx_steps`) as a tensor intrinsic:
    ``C[rows, 16 v] += A[rows, 16 g s] . B[v, 16 s, 16, g]`` (``s`` steps, ``v`` blocks,
    ``g`` operands per accumulator lane); A, C and B's blocks at any stride."""
    from tvm.script import tirx as T

    a_type, b_type, acc, group = OPERANDS[kind]
    cols, size = tile_channels(kind) * steps, 2 if a_type == "uint16" else 1
    pairs, lanes = cols // group, LANES * blocks
    name = helper_name(kind, rows, steps, blocks)

    def product(x, y):
        return _product(kind, x, y)

    def function(call: bool):
        """The description (``call=False``: the loops the step computes) or the
        implementation (the helper call, strides in bytes) over the same buffers."""
        @T.prim_func(s_tir=True)
        def step(a_h: T.handle, b_h: T.handle, c_h: T.handle) -> None:
            sa, sc, sv = T.int32(), T.int32(), T.int32()
            a = T.match_buffer(a_h, (rows, cols), a_type, offset_factor=1, strides=[sa, 1])
            b = T.match_buffer(b_h, (blocks, pairs, LANES, group), b_type, offset_factor=1,
                               strides=[sv, LANES * group, group, 1])
            c = T.match_buffer(c_h, (rows, lanes), acc, offset_factor=1, strides=[sc, 1],
                               scope="local")
            with T.sblock("root"):
                T.reads(c[0:rows, 0:lanes], a[0:rows, 0:cols],
                        b[0:blocks, 0:pairs, 0:LANES, 0:group])
                T.writes(c[0:rows, 0:lanes])
                if call:
                    T.evaluate(T.call_extern(
                        "void", name, c.access_ptr("rw"), a.access_ptr("r"),
                        b.access_ptr("r"), T.int64(sa) * T.int64(size), T.int64(ROW_BYTES),
                        T.int64(sc) * T.int64(4), T.int64(sv) * T.int64(size)))
                else:
                    for p, lane, r, i in T.grid(rows, lanes, pairs, group):
                        with T.sblock("update"):
                            vp, vl, vr, vi = T.axis.remap("SSRR", [p, lane, r, i])
                            c[vp, vl] = c[vp, vl] + product(a[vp, vr * group + vi],
                                                            b[vl // LANES, vr, vl % LANES, vi])
        return step

    intrin = f"mxc_amx_{kind}_{rows}x{lanes}_s{steps}"
    s_tir.TensorIntrin.register(intrin, function(False), function(True), override=True)
    return intrin


def rule_tiles(func: tirx.PrimFunc, family: str, kind: str):
    """The tile schedule of the ``[n, y, x, k, ry, rx, rc, ri]`` dot-product block of
    *func* stamped with *family* (:mod:`.kernel_family`), its weights :func:`tap_major`
    (None when it has no such block)::

        parallel for (n, y, 16 v output channels):         # one output row a thread
            for x tile of rows pixels:
                acc[rows][16 v] = 0
                for (ry, rx), channel chunk:                 # a chunk: up to 64 products
                    acc += steps(pad_temp[y + ry, x + rx : + rows], w[ry, rx, v blocks])
            out[row] = epilogue(acc)                       # fused, vectorized

    A tile's pixels are a row's consecutive ``rows`` output pixels, whose taps are
    consecutive input pixels: the A tile's stride is one pixel's channels.  One helper
    call runs the steps over a chunk of input channels (:func:`tile_steps`) for ``v``
    accumulator tiles (:func:`tile_blocks`) held in tile registers: each is loaded and
    stored once per tap, and each A tile loaded once for all ``v``."""
    opened = open_dot_kernel(func, family)
    if opened is None:
        return None
    sch, main, ext, epilogues, keep = opened                  # ext: n y x k ry rx rc ri
    group = OPERANDS[kind][3]
    if ext[7] != group or ext[6] % (tile_channels(kind) // group) or ext[3] % LANES:
        return None
    n, y, x, k, ry, rx, rc, ri = sch.get_loops(main)
    rows, blocks = tile_rows(ext[2]), tile_blocks(ext[3])
    steps = tile_steps(kind, ext[6] * group, blocks)
    xo, xi = sch.split(x, [None, rows])
    ko, kv = sch.split(k, [None, blocks * LANES])
    rco, rci = sch.split(rc, [None, steps * tile_channels(kind) // group])
    sch.reorder(n, y, ko, xo, ry, rx, rco, xi, kv, rci, ri)
    par = sch.fuse(n, y, ko)
    for epi in epilogues:
        sch.reverse_compute_at(epi, par, preserve_unit_loops=True)
    sch.parallel(par)
    sch.annotate(par, "pragma_import_llvm", helper_ir(kind, rows, steps, blocks))
    vectorize_epilogues(sch, epilogues)
    init = sch.decompose_reduction(main, xo)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(xi, tile_intrinsic(kind, rows, steps, blocks))
    schedule_pads(sch, keep)
    return sch
