"""mxc's import graph, read from the source with :mod:`ast` (nothing is imported).

Layering is only true if it holds for *every* import, including the ones
hidden inside functions to dodge import cycles, so this module counts both
kinds.  It answers two questions:

* **upward imports** -- imports that break the layer rules
  (:data:`NEVER`): nothing under ``mxc.compiler`` imports the frontend,
  the backends, the runtime, the CLI, ``mxc.library`` or the Symbol API
  (except the compatibility re-export ``mxc.compiler.symbol``); the runtime imports
  the compiler only from ``runtime/host.py``; ``mxc.serving`` sits above the
  runtime (nothing in the runtime, backends, frontend or compiler imports it,
  and it imports neither the CLI, the compiler nor the backends);
* **import cycles** -- strongly connected groups of modules.

Two routes that are not import statements count as well: an
``importlib.import_module("mxc.x")`` call with a literal module name (an import
by name is still a dependency), and an import under ``if TYPE_CHECKING:``
(it never runs, but the annotation ties the modules together; such edges have
``type_only`` set).  The test
``tests/compiler/test_import_rules.py`` enforces the rules; run
``python tools/import_graph.py [root]`` for a report (root: the folder holding
``mxc/``; default this checkout).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Import", "NEVER", "collect_imports", "upward_imports", "import_cycles", "main"]

#: (importer prefix, imported prefixes it must never reach, importer modules exempt)
NEVER: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("mxc.compiler", ("mxc.frontend", "mxc.backends", "mxc.runtime", "mxc.cli", "mxc.library",
                      "mxc.serving"), ()),
    # the Symbol API sits on the floor above the compiler; the one route down to it is the
    # old path mxc.compiler.symbol, a by-name re-export kept for compatibility
    ("mxc.compiler", ("mxc.symbol", "mxc.sym", "mxc.model", "mxc.mxnet", "mxc.draw"),
     ("mxc.compiler.symbol",)),
    ("mxc.runtime", ("mxc.compiler",), ("mxc.runtime.host",)),
    # serving sits above the runtime: nothing below it may depend on a web framework
    ("mxc.runtime", ("mxc.serving", "mxc.cli"), ()),
    ("mxc.backends", ("mxc.serving",), ()),
    ("mxc.frontend", ("mxc.serving",), ()),
    ("mxc.serving", ("mxc.cli", "mxc.compiler", "mxc.backends"), ()),
)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: *importer* imports *target* (a module name)."""

    importer: str
    target: str
    path: str
    line: int
    in_function: bool
    #: under ``if TYPE_CHECKING:`` (read by type checkers only)
    type_only: bool = False
    #: an ``importlib.import_module("...")`` call rather than an import statement
    by_name: bool = False


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, path: str, modules: set[str]):
        self.module, self.is_package, self.path, self.modules = module, is_package, path, modules
        self.depth = 0
        self.type_checking = 0
        self.found: list[Import] = []

    def _base(self, level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        pkg = self.module.split(".")
        if not self.is_package:
            pkg = pkg[:-1]
        pkg = pkg[:len(pkg) - (level - 1)]
        return ".".join(pkg + ([name] if name else []))

    def _add(self, target: str, node: ast.AST, by_name: bool = False) -> None:
        if target.split(".")[0] != "mxc":
            return
        self.found.append(Import(self.module, target, self.path, node.lineno, self.depth > 0,
                                 self.type_checking > 0, by_name))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else None
        if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            target = node.args[0].value
            if target.startswith("."):  # relative to the package argument: this package
                level = len(target) - len(target.lstrip("."))
                target = self._base(level, target.lstrip(".") or None)
            self._add(target, node, by_name=True)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._base(node.level, node.module)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.modules else base, node)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else \
            test.attr if isinstance(test, ast.Attribute) else None
        if name == "TYPE_CHECKING":  # annotations only: never executed, still a dependency
            self.type_checking += 1
            for stmt in node.body:
                self.visit(stmt)
            self.type_checking -= 1
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def _scoped(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped


def collect_imports(root: Path) -> list[Import]:
    """Every ``mxc`` import in the package at *root* (the folder holding ``mxc/``)."""
    files = sorted((root / "mxc").rglob("*.py"))
    modules = {_module_name(f, root) for f in files}
    found: list[Import] = []
    for f in files:
        name = _module_name(f, root)
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        v = _Visitor(name, f.name == "__init__.py", str(f.relative_to(root)), modules)
        v.visit(tree)
        found.extend(dict.fromkeys(v.found))  # one edge per statement and target
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def upward_imports(imports: list[Import]) -> list[Import]:
    """The imports that break a rule of :data:`NEVER`."""
    bad = []
    for imp in imports:
        for importer, forbidden, exempt in NEVER:
            if _under(imp.importer, importer) and imp.importer not in exempt and \
                    any(_under(imp.target, f) for f in forbidden):
                bad.append(imp)
    return bad


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative), largest first."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return sorted(groups, key=lambda g: (-len(g), g))


def main(argv: list[str] | None = None) -> int:
    """Print the upward imports and the import cycles; exit 1 if there is an upward import."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    imports = collect_imports(root)
    inner = sum(i.in_function for i in imports)
    print(f"{len(imports)} mxc imports ({inner} inside functions)")
    bad = upward_imports(imports)
    print(f"upward imports: {len(bad)}")
    for i in bad:
        where = "in a function" if i.in_function else "module level"
        where += ", by name" if i.by_name else ""
        where += ", TYPE_CHECKING" if i.type_only else ""
        print(f"  {i.path}:{i.line}  {i.importer} -> {i.target}  ({where})")
    cycles = import_cycles(imports)
    print(f"import cycles: {len(cycles)}")
    for group in cycles:
        print(f"  {len(group)} modules: {', '.join(group)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
