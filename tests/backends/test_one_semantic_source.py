"""One semantic source per op: a TVM converter module does not re-define its compiler family's helpers.

Every attribute-derived fact a lowering needs (axes reduced, pooling divisors,
resize weights, the gamma broadcast shape ...) is computed once, in
``mxc/compiler/ops/<family>.py`` (or on the op's ``OpDef``), and imported by
``mxc/backends/tvm/ops/<family>.py``.  Read with :mod:`ast`, so new modules are
covered.  A function of the same name that *emits Relax* (takes the lowering
context or builds ``R.*`` expressions) is the op's lowering twin of a numpy
kernel, not a copy of a fact, and is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

MXC = Path(__file__).resolve().parents[2] / "mxc"
COMPILER_OPS = MXC / "compiler" / "ops"
TVM_OPS = MXC / "backends" / "tvm" / "ops"

#: copies still present, each with the reason it is not fixed here
PENDING: dict[tuple[str, str], str] = {}


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _emits_relax(fn: ast.FunctionDef) -> bool:
    params = [a.arg for a in fn.args.args]
    if "ctx" in params:
        return True
    return any(isinstance(n, ast.Name) and n.id == "R" for n in ast.walk(fn))


def _shared_helpers() -> list[tuple[str, str]]:
    found = []
    for tvm_file in sorted(TVM_OPS.rglob("*.py")):
        rel = tvm_file.relative_to(TVM_OPS)
        twin = COMPILER_OPS / rel
        if not twin.exists():
            continue
        compiler_fns = _functions(twin)
        for name, fn in _functions(tvm_file).items():
            if name in compiler_fns and not _emits_relax(fn):
                found.append((str(rel), name))
    return found


def test_no_helper_is_defined_in_both_a_compiler_family_and_its_converter():
    copies = [c for c in _shared_helpers() if c not in PENDING]
    assert not copies, ("helpers defined in both compiler/ops and backends/tvm/ops (import the "
                        f"compiler's instead): {copies}")


def test_the_pending_list_holds_only_real_copies():
    # an entry whose copy is gone must leave the list, so it cannot hide a new one
    assert set(PENDING) <= set(_shared_helpers())
