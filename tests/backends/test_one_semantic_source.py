"""One semantic source per op: a TVM converter module does not re-define a compiler helper.

Every attribute-derived fact a lowering needs (axes reduced, pooling divisors,
resize weights, the gamma broadcast shape, the quantized output type ...) is
computed once, in ``mxc/compiler/ops/`` (on the op's ``OpDef`` or a family
helper), and imported by ``mxc/backends/tvm/ops/<family>.py``.  Read with
:mod:`ast`, so new modules are covered.

A copy is found by its *body*, not its name: each function is normalized (its
name and docstring dropped, its parameters and locals renamed by order of first
appearance) and compared with every function of ``mxc/compiler/ops``, so
renaming a copied helper does not hide it.  A function that *emits Relax*
(takes the lowering context or builds ``R.*`` expressions) is the op's lowering
twin of a numpy kernel, not a copy of a fact, and is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

MXC = Path(__file__).resolve().parents[2] / "mxc"
COMPILER_OPS = MXC / "compiler" / "ops"
TVM_OPS = MXC / "backends" / "tvm" / "ops"

#: copies still present, each with the reason it is not fixed here:
#: ``(tvm module, tvm function) -> reason``
PENDING: dict[tuple[str, str], str] = {}


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _emits_relax(fn: ast.FunctionDef) -> bool:
    params = [a.arg for a in fn.args.args]
    if "ctx" in params:
        return True
    return any(isinstance(n, ast.Name) and n.id == "R" for n in ast.walk(fn))


class _Renamer(ast.NodeTransformer):
    """Rename parameters and assigned locals to ``v0, v1, ...`` by first appearance."""

    def __init__(self, local_names: set[str]):
        self.local_names = local_names
        self.mapping: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name not in self.local_names:
            return name
        return self.mapping.setdefault(name, f"v{len(self.mapping)}")

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._rename(node.arg)
        node.annotation = None
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._rename(node.id)
        return node


def normalized_body(fn: ast.FunctionDef) -> str:
    """The function's arguments and body with its name, docstring, annotations and local names erased."""
    args = fn.args
    local_names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    local_names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    local_names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Store)}
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    # parse a fresh copy so renaming does not change the trees other callers hold
    module = ast.Module(body=[ast.parse(ast.unparse(stmt)).body[0] for stmt in body],
                        type_ignores=[])
    fresh_args = ast.parse(f"def f({ast.unparse(args)}): pass").body[0].args
    renamer = _Renamer(local_names)
    renamer.visit(fresh_args)
    renamer.visit(module)
    return ast.dump(fresh_args) + ast.dump(module)


def _compiler_bodies() -> dict[str, str]:
    """Normalized body -> ``module:function`` for every top-level function of compiler/ops."""
    bodies: dict[str, str] = {}
    for path in sorted(COMPILER_OPS.rglob("*.py")):
        rel = path.relative_to(COMPILER_OPS)
        for name, fn in _functions(path).items():
            bodies.setdefault(normalized_body(fn), f"{rel}:{name}")
    return bodies


def _shared_helpers() -> list[tuple[str, str, str]]:
    """``(tvm module, tvm function, compiler module:function)`` for each copied body or name."""
    compiler_bodies = _compiler_bodies()
    found = []
    for tvm_file in sorted(TVM_OPS.rglob("*.py")):
        rel = tvm_file.relative_to(TVM_OPS)
        twin = COMPILER_OPS / rel
        twin_fns = _functions(twin) if twin.exists() else {}
        for name, fn in _functions(tvm_file).items():
            if _emits_relax(fn):
                continue
            if name in twin_fns:
                found.append((str(rel), name, f"{rel}:{name}"))
            elif normalized_body(fn) in compiler_bodies:
                found.append((str(rel), name, compiler_bodies[normalized_body(fn)]))
    return found


def test_no_helper_is_defined_in_both_a_compiler_family_and_its_converter():
    copies = [c for c in _shared_helpers() if c[:2] not in PENDING]
    assert not copies, ("helpers defined in both compiler/ops and backends/tvm/ops, by name or by "
                        f"body (import the compiler's instead): {copies}")


def test_the_pending_list_holds_only_real_copies():
    # an entry whose copy is gone must leave the list, so it cannot hide a new one
    assert set(PENDING) <= {c[:2] for c in _shared_helpers()}


def test_a_renamed_copy_is_found_by_its_body():
    original = ast.parse('def a(p, q):\n    """doc"""\n    n = p.x + q\n    return n * 2\n').body[0]
    renamed = ast.parse("def b(z, w):\n    k = z.x + w\n    return k * 2\n").body[0]
    different = ast.parse("def c(z, w):\n    k = z.x + w\n    return k * 3\n").body[0]
    assert normalized_body(original) == normalized_body(renamed)
    assert normalized_body(original) != normalized_body(different)
