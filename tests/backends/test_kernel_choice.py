"""Issue 36: a kernel is chosen once, carried as data.

* every kernel family's kernels are scheduled by that family's rule because
  legalization stamped the family on them (``mxc.kernel_family``), not by a block's
  name: a renamed block is still scheduled by its family, a kernel whose stamp is
  stripped is not;
* "can this CPU do bfloat16?" is decided once per compile, and the precision
  validated once.

Host-independent: the kernels are scheduled (not run) for explicit CPUs
(``sapphirerapids``: AVX-512 VNNI/BF16 and AMX), and the compiles target them too --
compiling needs no such instructions on this machine.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm import relax, s_tir  # noqa: E402

from mxc.backends.tvm.build import resolve_target  # noqa: E402
from mxc.backends.tvm.build_context import build_context  # noqa: E402
from mxc.backends.tvm.schedules import cpu, kernel_choice  # noqa: E402
from mxc.backends.tvm.schedules.base import kernel_family, microarch  # noqa: E402

SPR = "llvm -mcpu=sapphirerapids"
RNG = np.random.RandomState(0)


def _module(x_shape, x_dtype, layers):
    """A Relax module applying *layers* (``relax.op`` builders of one argument) to x."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, x_dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for layer in layers:
                y = bb.emit(layer(y))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    return bb.get()


def _conv(w, dtype="float32", out_dtype=None):
    """A 3x3 channels-last convolution of HWIO weights *w* (the output NHWC: no transpose
    is fused into the last kernel)."""
    return lambda y: relax.op.nn.conv2d(y, relax.const(w, dtype), padding=(1, 1),
                                        data_layout="NHWC", kernel_layout="HWIO",
                                        out_dtype=out_dtype)


#: (CPU, precision, Winograd mode, module): builds whose kernels cover every family
BUILDS = {
    # AMX-BF16 tiles (a conv) and the AVX512-BF16 vector kernel (a batch-1 dense layer)
    "bf16": (SPR, "bf16", "off", lambda: _module((1, 14, 14, 64), "float32", [
        _conv(RNG.randn(3, 3, 64, 64).astype("float32")),
        lambda y: relax.op.reshape(y, (1, 64 * 14 * 14)),
        lambda y: relax.op.matmul(y, relax.const(RNG.randn(64 * 14 * 14, 32)
                                                 .astype("float32")))])),
    # bf16 Winograd: Winograd's transforms around a bf16 product
    "bf16_winograd": ("llvm -mcpu=cooperlake", "bf16", "on", lambda: _module(
        (1, 14, 14, 64), "float32", [_conv(RNG.randn(3, 3, 64, 64).astype("float32"))])),
    # float32 Winograd
    "winograd": ("llvm -mcpu=znver3", "fp32", "on", lambda: _module(
        (1, 14, 14, 64), "float32", [_conv(RNG.randn(3, 3, 64, 64).astype("float32"))])),
    # AMX-INT8 tiles (a conv) and VNNI (a batch-1 dense layer)
    "int8": (SPR, "fp32", "off", lambda: _module((1, 14, 14, 64), "uint8", [
        _conv(RNG.randint(-8, 8, (3, 3, 64, 64)), "int8", "int32"),
        lambda y: relax.op.astype(relax.op.clip(y, 0, 255), "uint8"),
        lambda y: relax.op.reshape(y, (1, 64 * 14 * 14)),
        lambda y: relax.op.matmul(y, relax.const(RNG.randint(-8, 8, (64 * 14 * 14, 32)),
                                                 "int8"), out_dtype="int32")])),
}


def _stamped(build: str):
    """(build context, [(family, kernel)]) of every kernel a family stamped in *build*."""
    from mxc.backends.tvm.tune import fused_module
    cpu_name, precision, winograd, make = BUILDS[build]
    target = resolve_target(cpu_name)
    ctx = build_context(target, precision=precision, winograd=winograd, record=False,
                        strict=True)
    fused = fused_module(make(), target, ctx)
    found = []
    for _, func in fused.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            found += [(f, func) for f in kernel_family.kernel_families(func)]
    return ctx, found


def _renamed(func):
    """*func* with every block but the root renamed: nothing a rule could know a kernel by."""
    from tvm.s_tir.stmt import SBlock
    count = [0]

    def visit(node, mutator):
        node = mutator.default_mutate(node)
        if node.name_hint == "root":
            return node
        count[0] += 1
        return SBlock(list(node.iter_vars), list(node.reads), list(node.writes),
                      f"b{count[0]}", node.body, node.init, list(node.alloc_buffers),
                      list(node.match_buffers), dict(node.annotations), node.span)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(SBlock, visit)]))


def _stripped(func):
    """*func* without the family stamp on any block."""
    sch = s_tir.Schedule(func)
    for b in sch.get_child_blocks(sch.get_sblock("root")):
        if kernel_family.FAMILY_ATTR in sch.get(b).annotations:
            sch.unannotate(b, kernel_family.FAMILY_ATTR)
    return sch.mod["main"]


def test_every_family_with_a_rule_is_in_the_table_and_the_rules():
    names = [f.name for f in kernel_choice.TABLE if f.rule is not None]
    assert sorted(names) == sorted(
        {"int8", "int8_amx", "bf16", "bf16_amx", "winograd"})
    assert [r.name for r in cpu.RULES[:len(names)]] == names
    assert all(isinstance(r, cpu.FamilyRule) for r in cpu.RULES[:len(names)])


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_a_family_rule_follows_the_stamp_not_the_name(build):
    ctx, kernels = _stamped(build)
    families = {f for f, _ in kernels}
    expected = {"bf16": {"bf16_amx", "bf16"}, "bf16_winograd": {"winograd", "bf16"},
                "winograd": {"winograd"}, "int8": {"int8_amx", "int8"}}[build]
    assert families == expected
    rule_families = {f.name for f in kernel_choice.TABLE}
    for family, func in kernels:
        name, sch = cpu.default_schedule(func, ctx)
        assert name == family, (family, name)
        # renamed: the same rule schedules it, the same steps
        name, renamed = cpu.default_schedule(_renamed(func), ctx)
        assert name == family, (family, name)
        assert [i.kind.name for i in renamed.trace.insts] == \
            [i.kind.name for i in sch.trace.insts]
        # stripped: no family's rule takes it (a generic rule may)
        name, _ = cpu.default_schedule(_stripped(func), ctx)
        assert name not in rule_families, (family, name)


def test_a_family_rule_never_asks_the_cpu():
    """The stamp is the decision: the bf16 rule schedules a stamped kernel even under a
    context whose CPU row lacks bfloat16 (legalization would not have stamped it there)."""
    import dataclasses
    ctx, kernels = _stamped("bf16")
    ctx = dataclasses.replace(ctx, cpu=dataclasses.replace(ctx.cpu, bf16_dot="",
                                                           bf16_tiles=False))
    for family, func in kernels:
        assert cpu.default_schedule(func, ctx)[0] == family


def test_the_table_enables_families_from_the_context_data():
    ctx = build_context(resolve_target(SPR), record=False)
    assert kernel_choice.enabled(ctx) == {"int8_amx", "int8", "winograd"}
    bf = build_context(resolve_target(SPR), precision="bf16", record=False)
    assert kernel_choice.enabled(bf) == {"int8_amx", "int8", "bf16_amx", "bf16_winograd",
                                         "bf16", "winograd"}
    zen3 = build_context(resolve_target("llvm -mcpu=znver3"), precision="bf16",
                         winograd="off", record=False)
    assert kernel_choice.enabled(zen3) == {"int8"}      # AVX2 int8 steps; no bf16


@pytest.fixture()
def conv_model(tmp_path):
    from mxc import sym as S
    from mxc.frontend.params import save_params
    y = S.Convolution(S.var("data"), kernel=(3, 3), num_filter=32, pad=(1, 1), name="conv")
    y = S.Activation(y, act_type="relu")
    y.save(str(tmp_path / "c-symbol.json"))
    rng = np.random.RandomState(0)
    save_params(str(tmp_path / "c.params"),
                {"arg:conv_weight": rng.uniform(-1, 1, (32, 64, 3, 3)).astype("float32"),
                 "arg:conv_bias": np.zeros(32, np.float32)})
    return [str(tmp_path / "c-symbol.json"), "--params", str(tmp_path / "c.params"),
            "--shape", "data=1,64,12,12", "-q"]


def test_one_bf16_decision_and_one_precision_check_per_compile(conv_model, tmp_path,
                                                               monkeypatch):
    from mxc.backends.tvm import options
    from mxc.cli import main
    from mxc.runtime import read_manifest
    calls = {"bf16_dot": 0, "check_precision": 0}

    def counted(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(microarch, "_FEATURES", {})     # nothing decided before this compile
    monkeypatch.setattr(microarch, "bf16_dot", counted("bf16_dot", microarch.bf16_dot))
    monkeypatch.setattr(options, "check_precision",
                        counted("check_precision", options.check_precision))
    out = tmp_path / "bf16.mxc"
    assert main(["compile", *conv_model, "--cpu", "sapphirerapids", "--precision", "bf16",
                 "-o", str(out)]) == 0
    assert read_manifest(out)["precision"]["kernels"] == 1
    assert calls == {"bf16_dot": 1, "check_precision": 1}, calls
