"""The loop nest a bfloat16 dot-product step stands for, shared by every ISA's step.

x86's ``vdpbf16ps`` (:mod:`.bf16_step`, 16 lanes) and AArch64's ``bfdot``
(:mod:`.arm_bf16_step`, 4 lanes) tensorize the same computation at different
widths; describing it once keeps the two steps provably the same semantics.
"""

from __future__ import annotations


def dot_description(lanes: int, group: int):
    """The TIR a bfloat16 dot step stands for: ``C[lanes] += A[group] . B[lanes, group]``
    on 16-bit patterns widened to float32 -- one description for x86's ``vdpbf16ps``
    (16 lanes) and AArch64's ``bfdot`` (4 lanes, :mod:`.arm_bf16_step`), so the two
    steps tensorize the very same loop nest."""
    from tvm.script import tirx as T

    def f32(x):
        return T.reinterpret(T.shift_left(T.cast(x, "uint32"), T.uint32(16)), dtype="float32")

    @T.prim_func(s_tir=True)
    def desc(a: T.Buffer((group,), "uint16", offset_factor=1),
             b: T.Buffer((lanes, group), "uint16", offset_factor=1),
             c: T.Buffer((lanes,), "float32", offset_factor=1, scope="local")) -> None:
        with T.sblock("root"):
            T.reads(c[0:lanes], a[0:group], b[0:lanes, 0:group])
            T.writes(c[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, group):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        c[vi] = c[vi] + f32(a[vk]) * f32(b[vi, vk])

    return desc
