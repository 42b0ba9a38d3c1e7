"""The binary request decoder, JSON response encoder and fast infer route that
replace KServe's per-element loops and FastAPI's routing answer as KServe's own (``dataplane_checks.py``, run in a process
of its own: kserve and tritonclient cannot be imported into one process).
"""

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

_SCRIPT = Path(__file__).with_name("dataplane_checks.py")
_NAMES = ([f"decode-{d}" for d in ("float32", "int64", "uint8", "int8", "float64", "bool")]
          + ["data-plane", "fast-route", "rest-app", "argv"]
          + [f"raw-input-{d}" for d in ("float32", "int64", "uint8", "bool")]
          + [f"malformed-{i}" for i in range(6)]
          + [f"encode-{d}-{k}" for d in ("float32", "float64", "int64", "int32", "uint8", "int8",
                                         "bool", "float16") for k in ("json", "binary")])


@pytest.fixture(scope="module")
def results() -> dict:
    out = subprocess.run([sys.executable, str(_SCRIPT)], capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_check_ran(results):
    assert sorted(results) == sorted(_NAMES)


@pytest.mark.parametrize("name", _NAMES)
def test_check(results, name):
    assert results[name] == "ok", results[name]
