"""Every ```python block in docs/*.md and README.md runs, in order, per file.

Blocks of one file share a namespace (a tutorial builds on its earlier
steps) and run with the repository root as the working directory, so the
examples a reader copies are exactly the ones that are tested.  A block whose
first line is ``# not-tested`` is skipped (for shell-like fragments).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("**/*.md")) + [REPO / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if not b.startswith("# not-tested")]


@pytest.mark.parametrize("doc", [d for d in DOCS if d.exists() and _blocks(d)],
                         ids=lambda d: str(d.relative_to(REPO)))
def test_doc_examples_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MXC_DOC_TMP", str(tmp_path))
    namespace: dict = {"__name__": f"doc_{doc.stem}"}
    import mxc.library
    before = {id(rec) for rec in mxc.library.loaded()}
    try:
        for i, block in enumerate(_blocks(doc)):
            code = compile(block, f"{doc.relative_to(REPO)}[block {i}]", "exec")
            exec(code, namespace)  # noqa: S102 - documentation examples are our own code
    finally:  # a guide's libraries (gemm_lib's my_gemm ...) must not shadow later tests' ops
        namespace.clear()
        import gc
        gc.collect()
        for rec in reversed(mxc.library.loaded()):
            if id(rec) not in before:
                mxc.library.unload(rec)
