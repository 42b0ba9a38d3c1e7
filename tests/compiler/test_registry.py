"""The one registry abstraction (mxc.registry.Registry) and the registries built on it.

Duplicates name whoever registered first (read from the registered object, not
the call stack), ``override=True`` replaces, misses suggest the closest name,
built-ins are imported lazily and once, snapshots round-trip, and loading then
unloading an extension leaves every registry exactly as it was.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import mxc
from mxc import library
from mxc.errors import PartitionError, PassError, UnsupportedOpError
from mxc.registry import Registry, all_registries, builtin_modules

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from import_graph import collect_imports, import_cycles  # noqa: E402


def _line_of(path: Path, text: str) -> int:
    """1-based line of the first line of *path* containing *text* (the oracle for origins)."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {path}")


def first_definition(x):
    return x


def second_definition(x):
    return x


# ---------------------------------------------------------------------------
# registration: duplicates name the first registrant, override replaces
# ---------------------------------------------------------------------------
def test_a_duplicate_names_the_first_registrants_module_file_and_line():
    reg: Registry = Registry("widgets", noun="widget", error=LookupError)
    reg.register("w", first_definition)
    with pytest.raises(LookupError) as info:
        reg.register("w", second_definition)
    line = _line_of(Path(__file__), "def first_definition")
    msg = str(info.value)
    assert f"widget 'w' is already registered (by {__name__}.first_definition " \
           f"(tests/compiler/test_registry.py:{line}))" in msg
    assert "override=True" in msg
    assert reg.lookup("w") is first_definition          # the failed attempt changed nothing


def test_an_explicit_origin_is_reported_verbatim_and_decorators_register():
    reg: Registry = Registry("widgets", noun="widget", error=LookupError)

    @reg.register("w", origin="the acme plug-in")
    def made(x):
        return x

    assert reg.lookup("w") is made                       # the decorator returns its argument
    with pytest.raises(LookupError, match=r"\(by the acme plug-in\)"):
        reg.register("w", second_definition)


def test_override_replaces_and_registering_the_same_object_again_is_harmless():
    reg: Registry = Registry("widgets")
    reg.register("w", first_definition)
    reg.register("w", first_definition)                  # same definition: no error
    reg.register("w", second_definition, override=True)
    assert reg.lookup("w") is second_definition
    assert "second_definition" in reg.entry("w").origin


def test_builtin_operators_and_passes_name_their_defining_file():
    from mxc.compiler.ops import OpDef, get_op, register_op
    ops_file = REPO / "mxc" / "compiler" / "ops" / "elemwise_unary.py"
    decorator = _line_of(ops_file, '@register_op("exp"')
    with pytest.raises(ValueError) as info:
        @register_op("exp")
        class Exp2(OpDef):
            pass
    msg = str(info.value)
    assert "operator 'exp' is already registered (by mxc.compiler.ops.elemwise_unary.Exp" in msg
    line = int(msg.split("elemwise_unary.py:")[1].split(")")[0])
    assert decorator <= line <= decorator + 1             # the decorator or the class line
    assert type(get_op("exp")).__name__ == "Exp"           # not replaced

    dce_file = REPO / "mxc" / "compiler" / "passes" / "builtin" / "dce.py"
    dce_line = _line_of(dce_file, '@register_pass("dce"')  # a decorated def starts there
    with pytest.raises(PassError, match=r"pass 'dce' is already registered \(by "
                                        r"mxc\.compiler\.passes\.builtin\.dce\.dce "
                                        rf"\(mxc/compiler/passes/builtin/dce\.py:"
                                        rf"{dce_line}\)\)"):
        mxc.register_pass("dce", first_definition)


def test_converters_are_attributed_without_reading_the_call_stack():
    pytest.importorskip("tvm")
    from mxc.backends.tvm import converter
    from mxc.compiler.ops import get_op
    conv = converter.get_converter("Convolution")
    assert conv.module == "mxc.backends.tvm.ops." + get_op("Convolution").family
    # made by a helper defined elsewhere, attributed to the family that registered it
    assert converter.get_converter("broadcast_add").module == "mxc.backends.tvm.ops.broadcast"
    assert converter.get_converter("_copy").module == "mxc.backends.tvm.ops.elemwise_misc"
    with pytest.raises(ValueError, match=r"TVM converter for 'Convolution' is already "
                                         r"registered \(by mxc\.backends\.tvm\.ops\.nn"):
        converter.register_converter("Convolution")(first_definition)
    assert "sys._getframe" not in (REPO / "mxc" / "backends" / "tvm" / "converter.py").read_text()


# ---------------------------------------------------------------------------
# lookup: typed errors with a did-you-mean
# ---------------------------------------------------------------------------
def test_a_miss_raises_the_registrys_own_error_with_the_closest_name():
    reg: Registry = Registry("widgets", noun="widget", error=LookupError)
    reg.register("sprocket", first_definition)
    reg.register("gear", second_definition)
    with pytest.raises(LookupError, match=r"unknown widget 'sprockett' \(did you mean "
                                          r"'sprocket'\?\); known widgets: gear, sprocket"):
        reg.lookup("sprockett")
    assert reg.suggest("GEAR") == "gear"                  # another case first
    assert reg.get("nothing-like-it") is None and reg.did_you_mean("zzzzzz") == ""


def test_the_real_registries_keep_their_error_types():
    from mxc.compiler.partition import get_subgraph_backend
    from mxc.compiler.partition.custom import get_partitioner
    from mxc.compiler.passes import get_pass
    with pytest.raises(PassError, match=r"unknown pass 'fold-batchnorn' \(did you mean "
                                        r"'fold-batchnorm'\?\)"):
        get_pass("fold-batchnorn")
    with pytest.raises(PartitionError, match=r"unknown subgraph backend 'defualt' \(did you "
                                             r"mean 'default'\?\)"):
        get_subgraph_backend("defualt")
    with pytest.raises(PartitionError, match="unknown partitioner 'no-such-partitioner'"):
        get_partitioner("no-such-partitioner")
    with pytest.raises(UnsupportedOpError) as info:
        mxc.compiler.ops.get_op("Convolutoin")
    assert info.value.suggestions == {"Convolutoin": "Convolution"}


# ---------------------------------------------------------------------------
# lazy built-ins
# ---------------------------------------------------------------------------
def _builtin_package(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))


def test_builtins_are_imported_on_the_first_miss_and_only_once(tmp_path, monkeypatch):
    calls = []     # one item per import of the built-in module
    reg: Registry = Registry("widgets", builtins=["_reg_builtins_a"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    # the built-in module finds the registry where a real one would import it from
    monkeypatch.setattr(mxc, "_test_lazy_registry", reg, raising=False)
    monkeypatch.setattr(mxc, "_test_lazy_calls", calls, raising=False)
    _builtin_package(tmp_path, "_reg_builtins_a", """
        import mxc
        LAZY = mxc._test_lazy_registry
        mxc._test_lazy_calls.append(1)

        def one():
            return 1

        LAZY.register("builtin-one", one)
        LAZY.lookup("builtin-one")            # a lookup while loading does not recurse
        assert LAZY.get("absent") is None
    """)

    def early():
        return 0
    early.__module__ = "_reg_builtins_a"      # as if defined by the built-in module
    try:
        reg.register("early", early)           # a built-in's registration does not load
        assert "_reg_builtins_a" not in sys.modules and calls == []
        assert reg.lookup("early") is early and calls == []   # nor does a hit
        assert reg.lookup("builtin-one")() == 1 and calls == [1]
        assert reg.get("missing") is None and "missing" not in reg
        reg.register("user", first_definition)
        assert sorted(reg) == ["builtin-one", "early", "user"] and calls == [1]
        assert reg.entry("builtin-one").builtin and reg.entry("early").builtin
        assert not reg.entry("user").builtin
        assert sorted(reg.baseline().entries) == ["builtin-one", "early"]
    finally:
        sys.modules.pop("_reg_builtins_a", None)


def test_any_other_registration_loads_the_builtins_first_and_clashes_name_them(
        tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    reg: Registry = Registry("widgets", noun="widget", error=LookupError,
                             builtins=["_reg_builtins_c"])
    monkeypatch.setattr(mxc, "_test_lazy_registry", reg, raising=False)
    _builtin_package(tmp_path, "_reg_builtins_c", """
        import mxc

        def taken():
            pass

        mxc._test_lazy_registry.register("taken", taken)
    """)
    line = _line_of(tmp_path / "_reg_builtins_c.py", "def taken")
    try:
        with pytest.raises(LookupError, match=r"widget 'taken' is already registered \(by "
                                              r"_reg_builtins_c\.taken \(.*_reg_builtins_c\.py:"
                                              rf"{line}\)\)"):
            reg.register("taken", first_definition)
        assert reg.builtins_loaded
    finally:
        sys.modules.pop("_reg_builtins_c", None)


def test_a_failing_builtin_import_is_retried_on_the_next_lookup(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    _builtin_package(tmp_path, "_reg_builtins_b", "raise RuntimeError('not yet')\n")
    reg: Registry = Registry("widgets", builtins=["_reg_builtins_b"])
    with pytest.raises(RuntimeError, match="not yet"):
        reg.get("x")
    assert not reg.builtins_loaded
    (tmp_path / "_reg_builtins_b.py").write_text("X = 1\n")
    sys.modules.pop("_reg_builtins_b", None)
    try:
        assert reg.get("x") is None and reg.builtins_loaded
    finally:
        sys.modules.pop("_reg_builtins_b", None)


def test_a_package_stands_for_its_public_modules_in_name_order(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    pkg = tmp_path / "_reg_family_pkg"
    (pkg / "sub").mkdir(parents=True)
    for rel in ("__init__.py", "b.py", "a.py", "_helper.py", "sub/__init__.py", "sub/z.py"):
        (pkg / rel).write_text("")
    (tmp_path / "_reg_single.py").write_text("")
    try:
        assert builtin_modules(["_reg_family_pkg", "_reg_single"]) == [
            "_reg_family_pkg", "_reg_family_pkg.a", "_reg_family_pkg.b",
            "_reg_family_pkg.sub", "_reg_family_pkg.sub.z", "_reg_single"]
        assert "_reg_single" not in sys.modules and "_reg_family_pkg.a" not in sys.modules
    finally:
        for name in [m for m in sys.modules if m.startswith("_reg_family_pkg")]:
            sys.modules.pop(name)


def test_builtins_are_names_not_functions():
    with pytest.raises(TypeError, match="module or package names"):
        Registry("widgets", builtins=lambda: ["x"])       # type: ignore[arg-type]
    with pytest.raises(TypeError, match="module or package names"):
        Registry("widgets", builtins="x")


#: run in a fresh interpreter (what earlier tests registered would blur the picture):
#: import the modules that define mxc's registries, load every registry's built-ins and
#: print each entry whose registering module is inside mxc but not among the built-ins
_STRAY_ENTRIES = """
import importlib
from mxc.registry import all_registries
for name in ("mxc.compiler.ops.registry", "mxc.compiler.passes.registry",
             "mxc.compiler.partition.registry", "mxc.compiler.partition.custom",
             "mxc.backends.tvm.converter", "mxc.backends.tvm.load_time", "mxc.cli",
             "mxc.mxnet.operator"):
    importlib.import_module(name)
print("KINDS", sorted(reg.kind for reg in all_registries()))
for reg in all_registries():
    reg.load_builtins()
    for key, entry in reg.snapshot().entries.items():
        source = entry.source if entry.source is not None else entry.value
        module = None if isinstance(source, str) else getattr(source, "__module__", None)
        module = module if isinstance(module, str) else type(source).__module__
        if module.startswith("mxc.") and not entry.builtin:
            print(f"STRAY {reg.kind}: {key!r} registered by {module}, which the "
                  f"registry's builtins {reg._builtins} do not name")
"""


def test_every_registry_finds_its_builtins_one_way():
    """A registry names where its built-ins live (``builtins=``: modules, or packages
    standing for their public modules); every entry a module of mxc registers is one of
    them, and no module of mxc but the registry scans a package or keeps a module list.

    (A backend of a higher layer -- ``tvm`` -- is registered by that layer when first
    asked for, :func:`~mxc.compiler.partition.provide_subgraph_backend`; a fresh
    interpreter that asks for none has none.)"""
    import subprocess
    proc = subprocess.run([sys.executable, "-c", _STRAY_ENTRIES], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    kinds = next(line for line in lines if line.startswith("KINDS"))
    for kind in ("operators", "passes", "subgraph backends", "partitioners", "TVM converters",
                 "host-only operators", "load-time evaluators", "commands",
                 "MXNet custom operators"):
        assert repr(kind) in kinds
    stray = [line for line in lines if line.startswith("STRAY")]
    assert not stray, "\n".join(stray)
    scanners = sorted(str(p.relative_to(REPO)) for p in (REPO / "mxc").rglob("*.py")
                      if "pkgutil" in p.read_text())
    scanners.remove("mxc/registry.py")
    assert scanners == [], f"package scans outside mxc/registry.py: {scanners}"
    assert not list((REPO / "mxc").rglob("_load_all.py"))


def test_no_registry_is_in_an_import_cycle_with_its_builtins():
    cycles = import_cycles(collect_imports(REPO))
    registries = {"mxc.registry", "mxc.compiler.ops.registry", "mxc.compiler.passes.registry",
                  "mxc.compiler.partition.registry", "mxc.compiler.partition.custom",
                  "mxc.backends.tvm.converter", "mxc.cli", "mxc.library"}
    assert not [g for g in cycles if registries & set(g)], cycles


# ---------------------------------------------------------------------------
# snapshot, diff, restore
# ---------------------------------------------------------------------------
class Growing:
    """A Revertible value: items appended after registration are undone by restore."""

    def __init__(self):
        self.items = []

    def registry_state(self):
        return len(self.items)

    def restore_registry_state(self, state):
        del self.items[state:]


def test_snapshot_restore_round_trip_and_the_diff_lists_each_change():
    reg: Registry = Registry("widgets")
    seen = []
    reg.subscribe(lambda name, old, new: seen.append((name, old, new)))
    grow, keep, gone = Growing(), object(), object()
    reg.register("grow", grow)
    reg.register("keep", keep, aliases=["keep-alias"])
    reg.register("gone", gone)
    before = {n: reg.entry(n) for n in reg}
    snap = reg.snapshot()

    assert reg.changes_since(snap) == []
    new = object()
    reg.register("keep", new, override=True)
    reg.register("added", object())
    reg.unregister("gone")
    grow.items.append("x")
    changes = {c.name: c for c in reg.changes_since(snap)}
    assert set(changes) == {"keep", "added", "gone", "grow"}
    assert changes["keep"].before.value is keep and changes["keep"].after.value is new
    assert changes["added"].before is None and changes["gone"].after is None
    assert changes["grow"].before is changes["grow"].after    # same entry, grown value

    seen.clear()
    reg.restore(snap)
    assert {n: reg.entry(n) for n in reg} == before            # the very same entries
    assert grow.items == [] and reg.lookup("keep-alias") is keep
    assert reg.changes_since(snap) == []
    assert {name for name, _, _ in seen} == {"keep", "added", "gone"}  # listeners told


def test_aliases_share_the_value_and_cannot_take_another_name():
    reg: Registry = Registry("widgets", noun="widget", error=LookupError)
    reg.register("a", first_definition)
    reg.register("b", second_definition)
    reg.add_alias("a", "a2")
    assert reg.lookup("a2") is first_definition and reg.entry("a2").is_alias
    with pytest.raises(LookupError, match="widget 'b' is already registered"):
        reg.add_alias("a", "b")


# ---------------------------------------------------------------------------
# extension libraries leave every registry as it was
# ---------------------------------------------------------------------------
EVERYTHING = """
    import mxc
    from mxc.cli import register_command
    from mxc.compiler.partition import (ANY_SUBGRAPH, SubgraphProperty, register_partitioner,
                                        register_subgraph_property)

    hooks = dict(parse_attrs=lambda attrs: (1, 1),
                 infer_shape=lambda attrs, shapes: (shapes, shapes),
                 forward=lambda attrs, inputs, outputs: [inputs[0]])
    mxc.register_custom_op("reg_t_op", **hooks)
    mxc.register_custom_op("exp", override=True, **hooks)

    @mxc.register_pass("reg-t-pass")
    def a_pass(graph, ctx):
        "Nothing."

    register_partitioner("reg_t_part").add_strategy("s", "_reg_t_sg",
                                                    supported_ops=lambda g, ids, o: ANY_SUBGRAPH)
    register_partitioner("{existing}").add_strategy("more", "_reg_t_sg2")

    class Extra(SubgraphProperty):
        pass

    register_subgraph_property("default", Extra)

    @register_command("reg-t-verb", help="a verb from an extension")
    def add_arguments(parser):
        pass

    def run(args):
        return 0
    {converter}
    def initialize(version):
        return {ok}
"""

CONVERTER = """
    from mxc.backends.tvm.converter import register_converter, register_host_only

    @register_converter("reg_t_op")
    def lower(ctx):
        return ctx.inputs[0]

    register_host_only("reg_t_host", reason="an extension says so")
"""


@pytest.mark.parametrize("ok", [True, False])
def test_load_then_unload_leaves_every_registry_as_before(tmp_path, ok):
    pytest.importorskip("tvm")
    import mxc.backends.tvm.converter  # noqa: F401  (its registries exist before the load)
    import mxc.cli  # noqa: F401
    from mxc.compiler.partition import register_partitioner
    from mxc.compiler.partition.registry import get_subgraph_backend

    existing = register_partitioner("reg_t_existing")
    existing.add_strategy("first", "_reg_t_sg0")
    try:
        before = {reg: reg.snapshot() for reg in all_registries()}
        for reg in before:
            reg.load_builtins()
        before = {reg: reg.snapshot() for reg in all_registries()}
        default_properties = get_subgraph_backend("default").property_names()
        text = textwrap.dedent(EVERYTHING).format(
            existing="reg_t_existing", ok=ok,
            converter=textwrap.dedent(CONVERTER))
        path = tmp_path / "everything.py"
        path.write_text(text)
        if ok:
            rec = library.load(path, verbose=False)
            assert sorted(rec.operators) == ["exp", "reg_t_op"]
            assert rec.graph_passes == ["reg-t-pass"]
            assert set(rec.partitioners) == {"reg_t_part", "reg_t_existing", "default"}
            changed = {reg.kind for reg, snap in before.items() if reg.changes_since(snap)}
            assert {"operators", "passes", "partitioners", "subgraph backends", "commands",
                    "TVM converters", "host-only operators"} <= changed
            library.unload(rec)
        else:
            with pytest.raises(mxc.errors.ExtensionError, match="refused to load"):
                library.load(path, verbose=False)
        assert [r for r in all_registries() if r not in before] == []
        for reg, snap in before.items():
            assert reg.changes_since(snap) == [], reg.kind
        assert [s.name for s in existing.strategies] == ["first"]
        assert get_subgraph_backend("default").property_names() == default_properties
        from mxc.compiler.ops import get_op
        assert type(get_op("exp")).__name__ == "Exp"
        assert mxc.sym.exp(mxc.sym.var("x")).graph.op_nodes()[0].op == "exp"
    finally:
        for rec in library.loaded():
            if rec.name == "everything":
                library.unload(rec)
        from mxc.compiler.partition.custom import PARTITIONERS
        from mxc.compiler.partition.registry import unregister_subgraph_backend
        unregister_subgraph_backend("reg_t_existing")
        PARTITIONERS.unregister("reg_t_existing")
