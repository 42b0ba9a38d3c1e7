"""Exit codes: one per error family, all listed by ``mxc --help`` and the README.

A family is a class that sets ``exit_code`` in its own body.  They are found by
reading every module of ``mxc`` with :mod:`ast` (not by importing: a family in
a module nothing imported would otherwise escape), so a new error class that
reuses a code fails here.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from mxc import errors

REPO = Path(__file__).resolve().parents[2]
#: codes that belong to no error family: success, argparse's usage error, Ctrl-C, a closed pipe
NOT_FAMILIES = {0, errors.USAGE_EXIT_CODE, 130, errors.BROKEN_PIPE_EXIT_CODE}


def _declared_exit_codes() -> list[tuple[str, int]]:
    """(``module:Class``, code) for every class body under mxc/ that sets ``exit_code``."""
    found = []
    for path in sorted((REPO / "mxc").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "exit_code" for t in stmt.targets):
                    assert isinstance(stmt.value, ast.Constant), (path, node.name)
                    found.append((f"{path.relative_to(REPO)}:{node.name}", stmt.value.value))
    return found


def test_every_error_family_has_its_own_exit_code():
    declared = _declared_exit_codes()
    assert len(declared) >= 10, declared   # the scan sees the families of mxc/errors.py
    by_code: dict[int, list[str]] = {}
    for where, code in declared:
        by_code.setdefault(code, []).append(where)
    shared = {code: where for code, where in by_code.items() if len(where) > 1}
    assert not shared, f"exit codes shared by several error families: {shared}"
    assert not set(by_code) & NOT_FAMILIES, by_code


def test_the_imported_hierarchy_agrees_with_the_scan():
    import mxc.runtime.signing  # noqa: F401 - re-exports SigningError
    families = errors.exit_code_families()
    assert all(len(classes) == 1 for classes in families.values()), families
    assert set(families) == {code for _, code in _declared_exit_codes()}
    assert mxc.runtime.signing.SigningError is errors.SigningError


def test_exit_code_table_lists_exactly_the_families():
    families = {code for _, code in _declared_exit_codes()}
    assert set(errors.EXIT_CODES) == families | NOT_FAMILIES


def test_help_lists_every_exit_code():
    r = subprocess.run([sys.executable, "-m", "mxc.cli", "--help"], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())           # argparse wraps the epilog
    text = text.replace("- ", "-")              # ... sometimes after a hyphen
    for code, meaning in errors.EXIT_CODES.items():
        assert f" {code} {meaning}" in text, (code, meaning)


def test_readme_table_names_each_family_on_its_own_row():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| exit code |"):].split("\n\n", 1)[0]
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \|(.*)$", table, re.M)}
    assert set(rows) == set(errors.EXIT_CODES), sorted(rows)
    for code, classes in errors.exit_code_families().items():
        for cls in classes:
            assert f"`{cls.__name__}`" in rows[code], (code, cls)
