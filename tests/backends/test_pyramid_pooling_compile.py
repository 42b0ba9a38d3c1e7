"""A pyramid-pooling head (PSPNet, ICNet) compiles to narrow vectors and the right numbers.

The head pools one feature map to 1x1, 2x2, 3x3 and 6x6
(``_contrib_AdaptiveAvgPooling2D``), convolves each level, resizes it back
(``_contrib_BilinearResize2D``) and concatenates the levels with the feature
map.  Channels-last, the concatenation reads four channels-first branches:
each piece of a channel row is a gather.  Vectorised whole, those pieces
became 512- to 2048-lane vectors in the real models, and LLVM spent minutes
legalising them (ICNet-ResNet50: 414 s of build).  The invariant checked here
is structural: no vectorised loop of a kernel the elementwise rule schedules
(transposes, gathers, the concatenation) is wider than that rule's widest
vector part; not a time.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.instrument import pass_instrument

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm.build import build_module
from mxc.backends.tvm.converter import lower_graph
from mxc.backends.tvm.schedules.base.elementwise import VECTOR_PART_VECTORS
from mxc.backends.tvm.schedules.base.microarch import cpu_info
from mxc.backends.tvm.targets import resolve_target
from conftest import ISA_TARGETS, isa_target
from test_cpu_schedules import _params

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

LEVELS = (1, 2, 3, 6)


def _pyramid_head(channels: int, side: int):
    """feature map -> 4 pooled levels -> conv 1x1 + BN + relu -> resize -> concat -> conv."""
    x = S.var("data")
    feat = S.Activation(S.Convolution(x, kernel=(1, 1), num_filter=channels, name="feat"),
                        act_type="relu", name="feat_relu")
    branches = [feat]
    for s in LEVELS:
        p = S._contrib_AdaptiveAvgPooling2D(feat, output_size=s, name=f"pool{s}")
        c = S.Convolution(p, kernel=(1, 1), num_filter=channels // 4, no_bias=True,
                          name=f"conv{s}")
        c = S.Activation(S.BatchNorm(c, fix_gamma=False, name=f"bn{s}"), act_type="relu",
                         name=f"relu{s}")
        branches.append(S._contrib_BilinearResize2D(c, height=side, width=side, name=f"up{s}"))
    cat = S.concat(*branches, dim=1, name="cat")
    head = S.Convolution(cat, kernel=(1, 1), num_filter=16, name="head")
    return head, {"data": (1, 8, side, side)}


def _scheduled_kernels(sym, shapes, target):
    """The module's PrimFuncs right after mxc's default CPU schedules, and the rules."""
    seen: dict = {}

    @pass_instrument
    class _Capture:
        def run_after_pass(self, mod, info):
            if info.name == "MxcCpuDefaultSchedule":
                seen.update({gv.name_hint: f for gv, f in mod.functions_items()
                             if isinstance(f, tirx.PrimFunc)})

    mod = lower_graph(sym.graph, shapes=shapes, params=_params(sym, shapes))
    stats: dict = {}
    with tvm.transform.PassContext(opt_level=3, instruments=[_Capture()]):
        build_module(mod, target, stats=stats)
    return seen, stats


def _vector_loop_extents(func) -> list[int]:
    loops: list = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, loops.append)])
    return [int(lp.extent) for lp in loops if lp.kind == tirx.ForKind.VECTORIZED]


@pytest.mark.parametrize("isa", sorted(ISA_TARGETS))
def test_pyramid_pooling_head_vectorises_at_most_a_few_vectors_at_once(isa):
    # 256 feature channels and 64 per level: the old rule vectorised each piece of
    # the concatenated channel row whole (256- and 64-lane vectors)
    sym, shapes = _pyramid_head(256, 12)
    target = ISA_TARGETS[isa]
    widest = cpu_info(resolve_target(target)).lanes * VECTOR_PART_VECTORS[0]
    kernels, rules = _scheduled_kernels(sym, shapes, target)
    cat = [k for k in kernels if "concatenate" in k]
    assert cat and all(rules[k] == "elementwise" for k in cat), rules
    wide = {k: max(ext) for k, f in kernels.items() if rules[k] == "elementwise"
            and (ext := _vector_loop_extents(f)) and max(ext) > widest}
    assert not wide, f"vectors wider than {widest} lanes: {wide}"
    assert _vector_loop_extents(kernels[cat[0]]), "the concatenation is not vectorised"


@pytest.mark.parametrize("isa", sorted(ISA_TARGETS))
def test_pyramid_pooling_head_matches_the_reference(isa):
    sym, shapes = _pyramid_head(64, 12)
    params = _params(sym, shapes)
    feeds = {"data": np.random.RandomState(1).randn(*shapes["data"]).astype(np.float32)}
    got = mxc.compile(sym, params, shapes, target=isa_target(isa)).run(feeds)
    want = run_graph(sym.graph, {**params, **feeds})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_the_build_stage_names_each_kernel_it_schedules():
    """The progress line says which kernel is being built: ``note("kernel NAME")`` for
    every kernel the default schedules reach, while the build stage runs."""
    from mxc.backends.tvm.compile_progress import QuietProgress

    class Recording(QuietProgress):
        def __init__(self):
            super().__init__()
            self.notes: list[tuple[str, str]] = []

        def note(self, detail: str) -> None:
            self.notes.append((self.stage, detail))

    sym, shapes = _pyramid_head(32, 6)
    prog = Recording()
    mxc.compile(sym, _params(sym, shapes), shapes, progress=prog)
    kernels = [d.split(" ", 2)[2] for stage, d in prog.notes     # "kernel i/N NAME"
               if d.startswith("kernel ") and stage.startswith("build")]
    assert any("concatenate" in k for k in kernels), prog.notes
    assert any(k.startswith("adaptive_avg_pool2d") for k in kernels), prog.notes


def test_the_build_stage_counts_kernels_and_says_when_code_generation_begins():
    """Each kernel note carries its place first (``i/N``: what a truncated progress line
    keeps), up to N/N, and the last note of the
    build stage says code is being generated: LLVM's code generation of every kernel is
    one call after the schedules, and the line must not name a kernel done long ago."""
    import re
    from mxc.backends.tvm.compile_progress import QuietProgress

    class Recording(QuietProgress):
        def __init__(self):
            super().__init__()
            self.notes: list[str] = []

        def note(self, detail: str) -> None:
            if self.stage.startswith("build"):
                self.notes.append(detail)

    sym, shapes = _pyramid_head(32, 6)
    prog = Recording()
    mxc.compile(sym, _params(sym, shapes), shapes, progress=prog)
    counts = [re.fullmatch(r"kernel (\d+)/(\d+) \S+", n) for n in prog.notes[:-1]]
    assert counts and all(counts), prog.notes
    places = [(int(m[1]), int(m[2])) for m in counts]
    n = places[0][1]
    assert places == [(i, n) for i in range(1, n + 1)], prog.notes
    assert prog.notes[-1] == f"{n} kernel(s) scheduled; generating code", prog.notes
