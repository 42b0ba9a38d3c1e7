"""Small modules: no module under ``mxc/`` is longer than ``tools/code_sizes.MODULE_LIMIT``.

A module past the limit mixes jobs (``backends/tvm/compile.py`` held a progress
widget, the orchestration, the runtime-graph schema and the manifest at 789
lines); the limit makes the split happen when the module grows, not later.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from code_sizes import MODULE_LIMIT, measure  # noqa: E402


def test_no_module_is_over_the_limit():
    modules, _ = measure(REPO)
    over = [f"{name} ({n} lines)" for n, name in modules if n > MODULE_LIMIT]
    assert not over, f"split these modules (limit {MODULE_LIMIT} lines): {over}"


def test_the_measure_counts_lines_and_functions(tmp_path):
    pkg = tmp_path / "mxc"
    pkg.mkdir()
    (pkg / "big.py").write_text("def f():\n" + "    x = 1\n" * (MODULE_LIMIT + 1))
    (pkg / "small.py").write_text("def g():\n    return 1\n")
    modules, functions = measure(tmp_path)
    assert modules == [(MODULE_LIMIT + 2, "mxc/big.py"), (2, "mxc/small.py")]
    assert functions[0] == (MODULE_LIMIT + 2, "mxc/big.py:f")
