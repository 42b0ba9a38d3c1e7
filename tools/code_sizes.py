"""The largest modules and functions under ``mxc/`` (read with :mod:`ast`, nothing imported).

    python tools/code_sizes.py [root] [--top N]

*root* is the folder holding ``mxc/`` (default: this checkout), so an older
revision can be measured the same way (``git archive REV mxc | tar -x -C DIR``).
The project keeps every module at or under :data:`MODULE_LIMIT` lines
(``tests/compiler/test_module_sizes.py``); this report shows how close the largest ones are,
and which functions are the longest (the next candidates for a split).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

#: the most lines a module under mxc/ may have
MODULE_LIMIT = 600


def measure(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(modules, functions)``: (lines, name) pairs, largest first."""
    modules, functions = [], []
    for path in sorted((root / "mxc").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        modules.append((text.count("\n"), rel))
        for node in ast.walk(ast.parse(text, filename=rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args(argv)
    modules, functions = measure(args.root)
    over = [m for m in modules if m[0] > MODULE_LIMIT]
    print(f"{len(modules)} modules; over {MODULE_LIMIT} lines: {len(over)}; "
          f"over 500: {sum(1 for n, _ in modules if n > 500)}")
    print("largest modules:   " + "; ".join(f"{name} {n}" for n, name in modules[:args.top]))
    print("largest functions: " + "; ".join(f"{name} {n}" for n, name in functions[:args.top]))
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
