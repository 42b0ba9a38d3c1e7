"""Extension libraries: mxc.library.load, tracking, refusal, entry points, guard.

Mirrors MXNet's ``mx.library.load(path, verbose)``: path validation before
any code runs, ``initialize(version)``, the "Found N operators /
partitioners / graph passes" report, errors raised inside a library naming
it, plus what mxc adds: loading twice is a no-op, a refused library leaves
nothing registered, ``loaded()``/``unload()``, and pip entry points.
"""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import mxc
from mxc import library
from mxc import sym as S
from mxc.compiler import custom_op as co
from mxc.compiler.ops import has_op
from mxc.compiler.partition import has_subgraph_backend
from mxc.compiler.passes.registry import has_pass
from mxc.errors import ExtensionError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "extensions" / "my_ops.py"


@pytest.fixture(autouse=True)
def _unload_new_libraries():
    """Unload every library a test loaded (a library loaded before stays)."""
    before = {id(r) for r in library.loaded()}
    yield
    for rec in library.loaded():
        if id(rec) not in before:
            library.unload(rec)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# A library with two operators, one partitioner and one graph pass.
FULL_LIBRARY = """
    import numpy as np
    import mxc
    from mxc.compiler.partition import ANY_SUBGRAPH, register_partitioner

    class _Unary(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

    @mxc.register_custom_op("{p}_relu")
    class Relu(_Unary):
        def forward(self, attrs, inputs, outputs):
            return [np.maximum(inputs[0], 0)]

    @mxc.register_custom_op("{p}_fail")
    class Fail(_Unary):
        def forward(self, attrs, inputs, outputs):
            raise ValueError("negative values are not allowed here")

    def supported_ops(graph, ids, options):
        for i, node in enumerate(graph.nodes):
            if node.op == "{p}_relu":
                ids[i] = ANY_SUBGRAPH

    register_partitioner("{p}_part").add_strategy("strategy1", "_{p}_subgraph_op",
                                                   supported_ops=supported_ops)

    @mxc.register_pass("{p}_pass")
    def my_pass(graph, ctx):
        return None

    def initialize(version):
        return {ok}
"""


def full_library(tmp_path: Path, prefix: str, ok: str = "True", name: str = "vlib") -> Path:
    return write(tmp_path / f"{name}.py", FULL_LIBRARY.format(p=prefix, ok=ok))


def nothing_registered(prefix: str) -> bool:
    return (not has_op(f"{prefix}_relu") and not has_op(f"{prefix}_fail")
            and not has_subgraph_backend(f"{prefix}_part")
            and not has_pass(f"{prefix}_pass"))


# ---------------------------------------------------------------------------
# the example library (examples/extensions/my_ops.py)
# ---------------------------------------------------------------------------
def test_example_library_gemm_stateful_and_mutating_ops():
    rec = library.load(EXAMPLE, verbose=False)
    assert rec in library.loaded()
    assert rec.name == "my_ops" and rec.path == EXAMPLE
    assert rec.operators == ["my_gemm", "state_gemm", "my_accumulate"]
    assert rec.partitioners == [] and rec.graph_passes == []

    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    dc = rng.standard_normal((2, 4)).astype(np.float32)
    x, y = S.var("a"), S.var("b")
    np.testing.assert_allclose(S.my_gemm(x, y).eval(a=a, b=b)[0], a @ b, rtol=1e-5)
    da, db = co.run_backward("my_gemm", [dc], [a, b])
    np.testing.assert_allclose(da, dc @ b.T, rtol=1e-5)
    np.testing.assert_allclose(db, a.T @ dc, rtol=1e-5)
    with pytest.raises(ExtensionError, match="expected input 0 to have float32 type"):
        S.my_gemm(x, y).infer_type(a="float64", b="float64")

    stateful = S.state_gemm(x, y, test_kw=100)
    exe = stateful.bind(args={"a": a, "b": b})
    for _ in range(2):
        np.testing.assert_allclose(exe.forward()[0], a @ b, rtol=1e-5)
    assert mxc.compiler.ops.get_op("state_gemm").state_of(stateful.outputs[0].node).count == 102

    acc = S.my_accumulate(S.var("data"), S.var("total"))
    assert acc.list_auxiliary_states() == ["total"]
    exe = acc.bind(args={"data": np.ones(3, np.float32)},
                   aux_states={"total": np.zeros(3, np.float32)})
    exe.forward()
    assert exe.forward()[0].tolist() == [2, 2, 2]


def test_example_library_refuses_old_mxc(monkeypatch, tmp_path):
    copy = write(tmp_path / "old_ops.py", EXAMPLE.read_text().replace(
        '"my_gemm"', '"old_gemm"').replace('"state_gemm"', '"old_state_gemm"').replace(
        '"my_accumulate"', '"old_accumulate"'))
    monkeypatch.setattr(library, "version", lambda: 99)
    with pytest.raises(ExtensionError, match=r"'old_ops' .* refused to load: initialize\(99\) "
                                             r"returned False"):
        library.load(copy, verbose=False)
    assert not has_op("old_gemm") and not has_op("old_state_gemm")


# ---------------------------------------------------------------------------
# verbose report, loaded(), loading twice
# ---------------------------------------------------------------------------
def test_verbose_output_lists_what_the_library_registered(tmp_path, capsys):
    path = full_library(tmp_path, "v1")
    rec = library.load(path)
    out = capsys.readouterr().out
    assert out == (f"Loaded extension library 'vlib' from {path.resolve()}\n"
                   "Found 2 operators in library\n"
                   "\tOp[0] v1_relu\n"
                   "\tOp[1] v1_fail\n"
                   "Found 1 partitioners in library\n"
                   "\tPartitioner[0] v1_part\n"
                   "\t\tStrategy[0] strategy1 subgraphOp: '_v1_subgraph_op'\n"
                   "Found 1 graph passes in library\n"
                   "\tGraph Pass [0] v1_pass\n")
    assert rec.operators == ["v1_relu", "v1_fail"]
    assert rec.partitioners == ["v1_part"] and rec.graph_passes == ["v1_pass"]
    assert rec.registrations == {"operators": ["v1_relu", "v1_fail"],
                                 "partitioners": ["v1_part"], "graph passes": ["v1_pass"]}
    assert "2 operators, 1 partitioners, 1 graph passes" in repr(rec)


def test_quiet_load_loaded_listing_and_double_load(tmp_path, capsys):
    path = full_library(tmp_path, "v2")
    rec = library.load(str(path), verbose=False)
    assert capsys.readouterr().out == ""
    assert rec in library.loaded()
    again = library.load(tmp_path / "." / "vlib.py")       # same file, other spelling
    assert again is rec
    assert capsys.readouterr().out == ""                   # a no-op: nothing re-run
    assert [r for r in library.loaded() if r.path == path.resolve()] == [rec]
    x = np.array([-1.0, 2.0], np.float32)
    assert S.v2_relu(S.var("x")).eval(x=x)[0].tolist() == [0, 2]


def test_library_ops_name_their_extension(tmp_path):
    path = write(tmp_path / "named.py", """
        import mxc
        EXTENSION_NAME = "acme-kernels"

        @mxc.register_custom_op("acme_id")
        class Identity(mxc.CustomOp):
            def parse_attrs(self, attrs):
                return 1, 1
            def infer_shape(self, attrs, in_shapes):
                return in_shapes, in_shapes
            def forward(self, attrs, inputs, outputs):
                return [inputs[0]]
    """)
    rec = library.load(path, verbose=False)
    assert rec.name == "acme-kernels"
    assert co.get_custom_op("acme_id").extension == "acme-kernels"
    assert mxc.compiler.ops.get_op("acme_id").extension == "acme-kernels"


def test_unload_removes_registrations_and_restores_overridden_ones(tmp_path):
    @mxc.register_custom_op("ov_op")
    class Original(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0] + 1]

    try:
        path = write(tmp_path / "overrider.py", """
            import mxc

            @mxc.register_custom_op("ov_op", override=True)
            class Replacement(mxc.CustomOp):
                def parse_attrs(self, attrs):
                    return 1, 1
                def infer_shape(self, attrs, in_shapes):
                    return in_shapes, in_shapes
                def forward(self, attrs, inputs, outputs):
                    return [inputs[0] + 100]

            @mxc.register_custom_op("ov_new")
            class New(Replacement):
                pass
        """)
        rec = library.load(path, verbose=False)
        assert rec.operators == ["ov_op", "ov_new"]
        assert S.ov_op(S.var("x")).eval(x=np.zeros(1))[0].tolist() == [100]
        library.unload(rec)
        assert rec not in library.loaded() and not has_op("ov_new")
        assert S.ov_op(S.var("x")).eval(x=np.zeros(1))[0].tolist() == [1]
        assert rec.module_name not in sys.modules
        library.load(path, verbose=False)              # loads (and runs) again after unload
        assert has_op("ov_new")
        library.unload("overrider")                    # by name
        assert not has_op("ov_new")
        with pytest.raises(ExtensionError, match="no loaded extension library matches"):
            library.unload("overrider")
    finally:
        co.unregister_custom_op("ov_op")


PASS_LIBRARY = """
    import mxc

    @mxc.register_pass("{p}-drop-copies")
    def drop_copies(graph, ctx):
        "Remove _copy nodes."
        for node in list(graph.op_nodes()):
            if node.op == "_copy":
                graph.replace_all_uses_with(node.out, node.inputs[0])
        graph.eliminate_dead_code()

    def initialize(version):
        return {ok}
"""


def test_pass_manager_passes_are_tracked_and_rolled_back(tmp_path, capsys):
    from mxc.compiler.passes import has_pass
    rec = library.load(write(tmp_path / "passes_ok.py", PASS_LIBRARY.format(p="pm1", ok="True")))
    assert rec.graph_passes == ["pm1-drop-copies"]
    assert "Found 1 graph passes in library\n\tGraph Pass [0] pm1-drop-copies\n" in \
        capsys.readouterr().out
    y = S._copy(S.exp(S.var("x")))
    assert [n.op for n in y.optimize_for("pm1-drop-copies").graph.op_nodes()] == ["exp"]
    with pytest.raises(ExtensionError, match="refused to load"):
        library.load(write(tmp_path / "passes_no.py", PASS_LIBRARY.format(p="pm2", ok="False")))
    assert not has_pass("pm2-drop-copies")
    library.unload(rec)
    assert not has_pass("pm1-drop-copies")


def test_extension_of_names_the_library_that_defined_an_object(tmp_path):
    rec = library.load(full_library(tmp_path, "eo"), verbose=False)
    assert library.extension_of(rec.module.my_pass) == "vlib"
    assert library.extension_of(rec.module.Relu) == "vlib"
    assert library.extension_of(rec.module.Relu()) == "vlib"
    assert library.extension_of(np.maximum) == "numpy"
    assert library.extension_of(test_extension_of_names_the_library_that_defined_an_object) \
        == __name__


def test_library_overriding_a_builtin_is_restored_by_unload(tmp_path):
    builtin = mxc.compiler.ops.get_op("exp")
    x = S.var("x")
    before = S.exp(x)                                  # built (and parsed) by the built-in
    assert before.infer_shape(x=(2,))[1] == [(2,)]
    path = write(tmp_path / "fast_exp.py", """
        import numpy as np
        import mxc

        @mxc.register_custom_op("exp", override=True)
        class ApproxExp(mxc.CustomOp):
            def parse_attrs(self, attrs):
                return 1, 1
            def infer_shape(self, attrs, in_shapes):
                return in_shapes, in_shapes
            def forward(self, attrs, inputs, outputs):
                return [1 + inputs[0]]                 # a (bad) first-order approximation
    """)
    rec = library.load(path, verbose=False)
    try:
        assert rec.operators == ["exp"]
        data = np.array([0.0, 1.0], np.float32)
        assert before.eval(x=data)[0].tolist() == [1, 2]   # the old node uses the new op
        assert S.exp(x).eval(x=data)[0].tolist() == [1, 2]
    finally:
        library.unload(rec)
    assert mxc.compiler.ops.get_op("exp") is builtin
    np.testing.assert_allclose(before.eval(x=np.array([1.0], np.float32))[0], [np.e], rtol=1e-6)


def test_a_library_loading_itself_is_refused(tmp_path):
    path = write(tmp_path / "selfish.py", """
        import mxc
        mxc.library.load(__file__)
    """)
    with pytest.raises(ExtensionError, match="loads itself while it is being loaded"):
        library.load(path, verbose=False)


def test_package_directory_library(tmp_path):
    pkg = tmp_path / "pkg_ext"
    write(pkg / "kernels.py", """
        import numpy as np
        def triple(x):
            return np.asarray(x) * 3
    """)
    write(pkg / "__init__.py", """
        import mxc
        from .kernels import triple

        @mxc.register_custom_op("pkg_triple")
        class Triple(mxc.CustomOp):
            def parse_attrs(self, attrs):
                return 1, 1
            def infer_shape(self, attrs, in_shapes):
                return in_shapes, in_shapes
            def forward(self, attrs, inputs, outputs):
                return [triple(inputs[0])]
    """)
    rec = library.load(pkg, verbose=False)
    assert rec.name == "pkg_ext" and rec.path == pkg.resolve()
    assert library.load(pkg / "__init__.py", verbose=False) is rec
    assert S.pkg_triple(S.var("x")).eval(x=np.ones(2))[0].tolist() == [3, 3]


# ---------------------------------------------------------------------------
# refusal and failures leave nothing behind
# ---------------------------------------------------------------------------
def test_initialize_returning_false_refuses_the_library(tmp_path, capsys):
    path = full_library(tmp_path, "r1", ok="version >= 999999", name="refused")
    with pytest.raises(ExtensionError) as info:
        library.load(path)
    msg = str(info.value)
    assert f"extension library 'refused' ({path.resolve()}) refused to load" in msg
    assert f"initialize({library.version()}) returned False" in msg
    assert "nothing it registered was kept" in msg
    assert nothing_registered("r1")
    assert all(r.path != path.resolve() for r in library.loaded())
    assert not any(m.startswith("_mxc_ext_refused") for m in sys.modules)
    assert capsys.readouterr().out == ""


def test_initialize_raising_refuses_with_its_message(tmp_path):
    path = full_library(tmp_path, "r2", ok='(_ for _ in ()).throw(RuntimeError("needs AVX-512"))',
                        name="raiser")
    with pytest.raises(ExtensionError, match=r"extension library 'raiser' .* failed to "
                                             r"initialize: initialize\(\d+\) raised RuntimeError: "
                                             r"needs AVX-512") as info:
        library.load(path)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert nothing_registered("r2")


def test_import_error_rolls_back_partial_registrations(tmp_path):
    path = write(tmp_path / "half.py", textwrap.dedent(FULL_LIBRARY.format(p="r3", ok="True"))
                 + "\nraise ImportError('libfoo.so: cannot open shared object file')\n")
    with pytest.raises(ExtensionError, match=r"'half' .* failed to import: ImportError: "
                                             r"libfoo.so: cannot open shared object file"):
        library.load(path)
    assert nothing_registered("r3")
    syntax = write(tmp_path / "broken.py", "def oops(:\n")
    with pytest.raises(ExtensionError, match="'broken' .* failed to import: SyntaxError"):
        library.load(syntax)


def test_duplicate_registration_inside_a_library_is_reported(tmp_path):
    first = library.load(full_library(tmp_path / "a", "dup"), verbose=False)
    with pytest.raises(ExtensionError, match=r"'vlib' .* failed to import: ExtensionError: "
                                             r"cannot register custom operator 'dup_relu'"):
        library.load(full_library(tmp_path / "b", "dup"), verbose=False)
    assert first.operators == ["dup_relu", "dup_fail"] and has_op("dup_relu")


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.py", "load path .*missing.py does NOT exist"),
    (lambda d: write(d / "lib.txt", "open('RAN', 'w')\n"), "is NOT an extension library"),
    (lambda d: write(d / "libcustomop_lib.so", "open('RAN', 'w')\n"),
         "Error loading library: .*libcustomop_lib.so"),  # .so: the native loader
    (lambda d: (d / "notpkg").mkdir() or d / "notpkg", "directory without __init__.py"),
    (lambda d: 42, "must be a str or os.PathLike, got int"),
])
def test_bad_paths_are_rejected_before_running_anything(tmp_path, monkeypatch, make, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExtensionError, match=message):
        library.load(make(tmp_path))
    assert not (tmp_path / "RAN").exists()


# ---------------------------------------------------------------------------
# errors inside extension code
# ---------------------------------------------------------------------------
def test_exception_in_a_library_op_forward_names_extension_function_and_node(tmp_path):
    library.load(full_library(tmp_path, "e1", name="faulty"), verbose=False)
    s = S.e1_fail(S.e1_relu(S.var("x")), name="checker")
    with pytest.raises(ExtensionError) as info:
        s.eval(x=np.ones(2, np.float32))
    err = info.value
    assert str(err) == ("extension 'faulty': operator 'e1_fail' forward raised on node "
                        "'checker': ValueError: negative values are not allowed here")
    assert (err.extension, err.function, err.node) == ("faulty", "operator 'e1_fail' forward",
                                                       "checker")
    assert isinstance(err.__cause__, ValueError)


def test_guard_wraps_foreign_exceptions_for_partitioners_and_passes():
    node = mxc.compiler.ir.Node("exp", "exp3")
    with pytest.raises(ExtensionError) as info, \
            library.guard("my_ext", "partitioner 'myProp' supported_ops", node):
        {}["missing"]
    assert str(info.value) == ("extension 'my_ext': partitioner 'myProp' supported_ops raised on "
                               "node 'exp3' (exp): KeyError: 'missing'")
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(ExtensionError, match=r"^extension 'p': graph pass 'x' raised: "
                                             r"ShapeError: bad$"), \
            library.guard("p", "graph pass 'x'"):
        raise mxc.errors.ShapeError("bad")
    original = ExtensionError("already attributed")
    with pytest.raises(ExtensionError) as info, library.guard("outer", "f", "n"):
        raise original
    assert info.value is original
    with library.guard("quiet", "f"):
        pass


def test_current_library_during_load(tmp_path):
    seen = []
    mxc.library._test_probe = seen.append
    try:
        path = write(tmp_path / "probe.py", """
            import mxc
            mxc.library._test_probe(mxc.library.current_library().name)
            def initialize(version):
                mxc.library._test_probe(version)
                return True
        """)
        library.load(path, verbose=False)
    finally:
        del mxc.library._test_probe
    assert seen == ["probe", library.version()]
    assert library.current_library() is None


def test_version_encoding():
    major, minor, patch = (int(p) for p in mxc.__version__.split(".")[:3])
    assert library.version() == major * 10000 + minor * 100 + patch


# ---------------------------------------------------------------------------
# entry points (pip-installed extensions)
# ---------------------------------------------------------------------------
class FakeDist:
    name = "mxc-fake-ext"


class FakeEntryPoint:
    """What importlib.metadata yields for an installed distribution's entry point."""

    def __init__(self, name, value, group="mxc.extensions"):
        self.name, self.value, self.group, self.dist = name, value, group, FakeDist()

    def load(self):
        module_name, _, attr = self.value.partition(":")
        obj = importlib.import_module(module_name.strip())
        return getattr(obj, attr.strip()) if attr else obj


@pytest.fixture
def fake_entry_points(monkeypatch, tmp_path):
    eps: list = []

    def entry_points(**params):
        return [ep for ep in eps if ep.group == params.get("group")]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield eps
    for mod in [m for m in sys.modules if m.startswith("fake_mxc_")]:
        sys.modules.pop(mod, None)


def test_entry_points_are_discovered_and_loaded_once(fake_entry_points, tmp_path, capsys):
    write(tmp_path / "site" / "fake_mxc_ext.py", FULL_LIBRARY.format(p="ep1", ok="True"))
    write(tmp_path / "site" / "fake_mxc_init.py", """
        import mxc
        calls = []
        def initialize(version):
            calls.append(version)
            mxc.register_custom_op(
                "ep2_neg", parse_attrs=lambda attrs: (1, 1),
                infer_shape=lambda attrs, shapes: (shapes, shapes),
                forward=lambda attrs, inputs, outputs: [-inputs[0]])
            return True
    """)
    fake_entry_points.append(FakeEntryPoint("fake", "fake_mxc_ext"))
    fake_entry_points.append(FakeEntryPoint("fake_init", "fake_mxc_init:initialize"))
    fake_entry_points.append(FakeEntryPoint("other", "nothing_here", group="other.group"))
    records = library.load_entry_points(verbose=True)
    out = capsys.readouterr().out
    assert [r.name for r in records] == ["fake", "fake_init"]
    first, second = records
    assert first.source == "entry point mxc.extensions:fake"
    assert first.distribution == "mxc-fake-ext"
    assert first.path == (tmp_path / "site" / "fake_mxc_ext.py")
    assert first.operators == ["ep1_relu", "ep1_fail"] and first.graph_passes == ["ep1_pass"]
    assert second.operators == ["ep2_neg"]
    assert sys.modules["fake_mxc_init"].calls == [library.version()]
    assert "Found 2 operators in library\n\tOp[0] ep1_relu\n" in out
    assert "Found 1 operators in library\n\tOp[0] ep2_neg\n" in out
    assert S.ep2_neg(S.var("x")).eval(x=np.ones(1))[0].tolist() == [-1]
    assert library.load_entry_points() == records              # once per process
    assert sys.modules["fake_mxc_init"].calls == [library.version()]
    assert all(r in library.loaded() for r in records)


def test_broken_entry_point_is_skipped_with_a_warning_or_raised_when_strict(
        fake_entry_points, tmp_path):
    write(tmp_path / "site" / "fake_mxc_bad.py", FULL_LIBRARY.format(p="ep3", ok="False"))
    write(tmp_path / "site" / "fake_mxc_good.py", FULL_LIBRARY.format(p="ep4", ok="True"))
    fake_entry_points.append(FakeEntryPoint("bad", "fake_mxc_bad"))
    fake_entry_points.append(FakeEntryPoint("missing", "fake_mxc_does_not_exist"))
    fake_entry_points.append(FakeEntryPoint("good", "fake_mxc_good"))
    with pytest.warns(RuntimeWarning) as caught:
        records = library.load_entry_points()
    assert [r.name for r in records] == ["good"]
    messages = [str(w.message) for w in caught]
    assert any("'bad'" in m and "refused to load" in m for m in messages)
    assert any("'missing'" in m and "ModuleNotFoundError" in m for m in messages)
    assert nothing_registered("ep3") and has_op("ep4_relu")
    with pytest.raises(ExtensionError, match="'bad' .*refused to load"):
        library.load_entry_points(strict=True)


def test_ensure_entry_points_loaded_runs_once(fake_entry_points, tmp_path, monkeypatch):
    monkeypatch.setattr(library, "_ENTRY_POINTS_DONE", False)
    write(tmp_path / "site" / "fake_mxc_lazy.py", FULL_LIBRARY.format(p="ep5", ok="True"))
    fake_entry_points.append(FakeEntryPoint("lazy", "fake_mxc_lazy"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert library.ensure_entry_points_loaded() is True
        assert has_op("ep5_relu")
        assert library.ensure_entry_points_loaded() is False
