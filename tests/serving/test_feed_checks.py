"""One feed check per served request (issue 36): ``feed_check_counts.py``, run in a
process of its own (kserve's gRPC protos and tritonclient's cannot share one)."""

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

_SCRIPT = Path(__file__).with_name("feed_check_counts.py")
_NAMES = ["json", "binary", "data-plane", "refused", "batched"]


@pytest.fixture(scope="module")
def results() -> dict:
    out = subprocess.run([sys.executable, str(_SCRIPT)], capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_check_ran(results):
    assert sorted(results) == sorted(_NAMES)


@pytest.mark.parametrize("name", _NAMES)
def test_check(results, name):
    assert results[name] == "ok", results[name]
