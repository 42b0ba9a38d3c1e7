"""The layer rules hold for every import in the source, including imports inside functions.

Read with :mod:`ast` by ``tools/import_graph.py`` (nothing is imported), so files
added later are covered too.  The never-list: nothing under ``mxc/compiler/``
imports ``mxc.frontend``, ``mxc.backends``, ``mxc.runtime``, ``mxc.cli`` or
``mxc.library``; the runtime imports the compiler only from ``runtime/host.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from import_graph import Import, collect_imports, import_cycles, upward_imports  # noqa: E402


def test_no_upward_imports_anywhere_in_the_source():
    bad = upward_imports(collect_imports(REPO))
    assert not bad, "upward imports:\n" + "\n".join(
        f"  {i.path}:{i.line} {i.importer} -> {i.target}" for i in bad)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    # an independent check of the checker on a made-up tree: a function-level relative
    # import from the compiler into the backends, and a runtime module other than host.py
    # importing the compiler, are caught; host.py is not
    pkg = tmp_path / "mxc"
    for d in ("compiler/passes", "backends", "runtime", "frontend"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "compiler" / "__init__.py").write_text("")
    (pkg / "backends" / "ref.py").write_text("X = 1\n")
    (pkg / "compiler" / "passes" / "fold.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ...frontend import attrs\n"
        "def run():\n    from ...backends.ref import X\n    return X\n")
    (pkg / "runtime" / "host.py").write_text("from ..compiler import passes\n")
    (pkg / "runtime" / "session.py").write_text("import mxc.compiler.passes.fold\n")
    bad = {(i.importer, i.target, i.in_function) for i in upward_imports(collect_imports(tmp_path))}
    assert bad == {("mxc.compiler.passes.fold", "mxc.backends.ref", True),
                   ("mxc.compiler.passes.fold", "mxc.frontend", False),
                   ("mxc.runtime.session", "mxc.compiler.passes.fold", False)}


def test_the_checker_sees_by_name_and_type_checking_routes(tmp_path):
    # importlib.import_module("...") with a literal name and an import under
    # `if TYPE_CHECKING:` are dependencies too: both upward routes are reported
    pkg = tmp_path / "mxc"
    for d in ("compiler", "backends", "frontend"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "backends" / "tvm.py").write_text("X = 1\n")
    (pkg / "compiler" / "shim.py").write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..frontend import attrs\n"
        "def get():\n    return importlib.import_module('mxc.backends.tvm').X\n"
        "def ok(name):\n    return importlib.import_module(name)\n")
    found = upward_imports(collect_imports(tmp_path))
    assert {(i.importer, i.target, i.by_name, i.type_only) for i in found} == {
        ("mxc.compiler.shim", "mxc.backends.tvm", True, False),
        ("mxc.compiler.shim", "mxc.frontend", False, True)}


def test_cycles_are_found_as_strongly_connected_groups():
    edges = [Import("a", "b", "a.py", 1, False), Import("b", "c", "b.py", 1, True),
             Import("c", "a", "c.py", 1, False), Import("c", "d", "c.py", 2, False),
             Import("d", "e", "d.py", 1, False)]
    assert import_cycles(edges) == [["a", "b", "c"]]


#: packages whose modules sit in no import cycle (issue 36): each module of them imports
#: only modules below it, deferred imports inside functions and TYPE_CHECKING ones included
ACYCLIC = ("mxc.compiler", "mxc.runtime", "mxc.serving", "mxc.backends.tvm.bucket_model",
           "mxc.backends.tvm.buckets", "mxc.backends.tvm.compile", "mxc.backends.tvm.schedules",
           "mxc.mxnet")


def test_no_import_cycle_reaches_the_compiler_runtime_or_serving():
    found = [group for group in import_cycles(collect_imports(REPO))
             if any(m == p or m.startswith(p + ".") for m in group for p in ACYCLIC)]
    assert not found, "import cycles:\n" + "\n".join(f"  {', '.join(g)}" for g in found)


SCHEDULES = "mxc.backends.tvm.schedules"


def test_schedule_families_import_only_base_and_base_imports_no_family():
    # issue 36, dlight's layout: schedules/base/ (shared machinery) imports nothing else
    # of schedules/; each module of schedules/families/ (one kernel family) imports base/
    # only -- where one family hands a layer to another, the dispatcher above them
    # (schedules/legalize.py, schedules/cpu.py) wires them together
    base, families = SCHEDULES + ".base", SCHEDULES + ".families"

    def under(name, pkg):
        return name == pkg or name.startswith(pkg + ".")

    bad = []
    for i in collect_imports(REPO):
        if not under(i.target, SCHEDULES) or i.target in (SCHEDULES, base, families):
            continue
        if under(i.importer, base) and not under(i.target, base):
            bad.append(i)
        elif under(i.importer, families) and not under(i.target, base):
            bad.append(i)
    assert not bad, "schedules layering:\n" + "\n".join(
        f"  {i.path}:{i.line} {i.importer} -> {i.target}" for i in bad)
