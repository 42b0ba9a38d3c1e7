"""The hardened server's parts, case by case (issue 35): ``request_checks.py``, run in
a process of its own (kserve's gRPC protos and tritonclient's cannot share one)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("kserve") is None:
    pytest.skip("mxc serve needs the [serve] extra (pip install 'mxc[serve]')",
                allow_module_level=True)

_SCRIPT = Path(__file__).with_name("request_checks.py")
sys.path.insert(0, str(_SCRIPT.parent))


def _names() -> list[str]:
    """The checks' names, read from the script without importing kserve here."""
    import ast
    tree = ast.parse(_SCRIPT.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in (
                "JSON_CASES", "BINARY_CASES"):
            prefix = "json-" if node.targets[0].id == "JSON_CASES" else "binary-"
            names += [prefix + k.value for k in node.value.keys]
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CHECKS":
            names += [k.value for k in node.value.keys if k is not None]
    return names


NAMES = _names()


@pytest.fixture(scope="module")
def results() -> dict:
    out = subprocess.run([sys.executable, str(_SCRIPT)], capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_check_ran(results):
    assert len(NAMES) > 40 and sorted(results) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_check(results, name):
    assert results[name] == "ok", results[name]
