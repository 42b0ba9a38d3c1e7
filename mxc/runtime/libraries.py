"""Compiled extension libraries an artifact needs, recorded and checked by sha256.

A model whose graph uses operators of a compiled MXNet extension library
(``mxc.library.load("libgemm_lib.so")``) compiles with those operators as host
nodes that call into the library.  The artifact cannot carry the library
(it is the user's binary), so the manifest names it -- file name, sha256,
lib_api version, operators used -- and loading the artifact requires the
caller to hand over *the same file* explicitly::

    session = mxc.runtime.load("model.mxc", libraries=["/opt/libs/libgemm_lib.so"])

Nothing is looked up or loaded implicitly: a library that is missing from
``libraries`` or whose sha256 differs is an :class:`~mxc.errors.ArtifactError`
naming the library and the sha256 the artifact wants.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import ArtifactError

__all__ = ["manifest_entries", "attach_libraries"]


def manifest_entries(ops: Iterable[str]) -> list[dict]:
    """The manifest's ``libraries``: one entry per compiled library the *ops* come from."""
    from ..compiler.ops.registry import get_op, has_op
    found: dict[str, dict] = {}
    for op in ops:
        entry = getattr(getattr(get_op(op), "impl", None), "native", None) if has_op(op) else None
        if entry is None:
            continue
        lib = entry.lib
        rec = found.setdefault(lib.sha256, {"name": lib.name, "sha256": lib.sha256,
                                            "lib_api_version": lib.version, "operators": []})
        if op not in rec["operators"]:
            rec["operators"].append(op)
    return list(found.values())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def attach_libraries(manifest: Mapping, libraries: Sequence[str | os.PathLike] | None,
                     source: str) -> None:
    """Load the libraries *manifest* needs from *libraries*, or raise :class:`ArtifactError`."""
    needed = list(manifest.get("libraries") or [])
    given = []
    for item in libraries or ():
        p = Path(os.path.expanduser(os.fspath(item)))
        if not p.is_file():
            raise ArtifactError(f"{source}: extension library {os.fspath(item)} does not exist")
        given.append((p.resolve(), _sha256(p)))
    hint = "pass it with mxc.runtime.load(..., libraries=[PATH]) or `mxc run --load PATH`"
    for want in needed:
        match = [p for p, digest in given if digest == want["sha256"]]
        if match:
            from ..library import load
            load(match[0], verbose=False)
            continue
        same_name = [(p, d) for p, d in given if p.name == want["name"]]
        if same_name:
            p, digest = same_name[0]
            raise ArtifactError(
                f"{source}: extension library {want['name']} given as {p} has sha256 {digest}, "
                f"but the artifact was compiled with sha256 {want['sha256']} (operators "
                f"{', '.join(want['operators'])}); give the same library file")
        raise ArtifactError(
            f"{source}: the artifact needs extension library {want['name']} (sha256 "
            f"{want['sha256']}, lib_api v{want.get('lib_api_version')}) for operators "
            f"{', '.join(want['operators'])}; {hint}")
