"""Every ```python block in docs/*.md and README.md runs, in order, per file.

Blocks of one file share a namespace (a tutorial builds on its earlier
steps) and run with the repository root as the working directory, so the
examples a reader copies are exactly the ones that are tested.  A block whose
first line is ``# not-tested`` is skipped (for shell-like fragments).  A block
whose first line is ``# requires: corpus, g++`` runs only where those are found;
otherwise it is not run and the file's test ends *skipped*, naming what was
missing, after the other blocks ran: an example never passes by running nothing.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("**/*.md")) + [REPO / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


REQUIRES = re.compile(r"\A# requires: (.*)\n")


def _blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if not b.startswith("# not-tested")]


def _corpus_found() -> bool:
    return Path(os.environ.get("MXC_CORPUS", REPO.parent / "shared" / "corpus")).is_dir()


def _found(module: str) -> bool:
    from importlib.util import find_spec
    return find_spec(module) is not None


def _serve_extra_found() -> bool:
    """The ``[serve]`` extra's server and client (looked up, not imported: kserve's and
    tritonclient's gRPC protos cannot share one process)."""
    from importlib.util import find_spec
    return find_spec("kserve") is not None and find_spec("tritonclient") is not None


#: what a block may require, and how to tell it is here
NEEDS = {"corpus": _corpus_found, "g++": lambda: shutil.which("g++") is not None,
         "aarch64-linux-gnu-g++": lambda: shutil.which("aarch64-linux-gnu-g++") is not None,
         "serve": _serve_extra_found, "ray": lambda: _found("ray")}


def _missing(block: str) -> list[str]:
    """The requirements a block's ``# requires:`` line names that this machine lacks."""
    match = REQUIRES.match(block)
    if match is None:
        return []
    names = [n.strip() for n in match.group(1).split(",") if n.strip()]
    unknown = [n for n in names if n not in NEEDS]
    assert not unknown, f"unknown requirement(s) {unknown}; known: {sorted(NEEDS)}"
    return [n for n in names if not NEEDS[n]()]


@pytest.mark.parametrize("doc", [d for d in DOCS if d.exists() and _blocks(d)],
                         ids=lambda d: str(d.relative_to(REPO)))
def test_doc_examples_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MXC_DOC_TMP", str(tmp_path))
    namespace: dict = {"__name__": f"doc_{doc.stem}"}
    import mxc.library
    before = {id(rec) for rec in mxc.library.loaded()}
    not_run: dict[int, list[str]] = {}
    try:
        for i, block in enumerate(_blocks(doc)):
            missing = _missing(block)
            if missing:
                not_run[i] = missing
                continue
            code = compile(block, f"{doc.relative_to(REPO)}[block {i}]", "exec")
            exec(code, namespace)  # noqa: S102 - documentation examples are our own code
    finally:  # a guide's libraries (gemm_lib's my_gemm ...) must not shadow later tests' ops
        namespace.clear()
        import gc
        gc.collect()
        for rec in reversed(mxc.library.loaded()):
            if id(rec) not in before:
                mxc.library.unload(rec)
    if not_run:
        needs = sorted({n for names in not_run.values() for n in names})
        pytest.skip(f"{len(not_run)} example block(s) of {doc.name} not run: this machine lacks "
                    f"{', '.join(needs)}")


def test_requires_lines_are_honoured(monkeypatch):
    """A block requiring what is missing is reported, not silently run or passed."""
    monkeypatch.setenv("MXC_CORPUS", "/nonexistent/corpus")
    assert _missing("# requires: corpus, g++\nprint(1)\n")[:1] == ["corpus"]
    assert _missing("print(1)\n") == []
    with pytest.raises(AssertionError, match="unknown requirement"):
        _missing("# requires: a-gpu\n")
