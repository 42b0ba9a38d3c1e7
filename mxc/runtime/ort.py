"""ONNX Runtime's way in: ``mxc.runtime.InferenceSession(path, providers=[...])``.

Users porting ORT code keep their lines::

    sess = mxc.runtime.InferenceSession("model.mxc", providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name            # .shape, .type == "tensor(float)"
    probs = sess.run(None, {name: x})[0]

An artifact is compiled for one device, so *providers* does not choose a
kernel library as in ORT: it states where the caller expects the model to
run, and a list that does not include the artifact's device is an error
saying which device the artifact was compiled for (rather than a silent
surprise).  The result is an ordinary :class:`~mxc.runtime.Session`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ..errors import ArtifactError
from .session import Session, load

#: ORT execution provider names -> the artifact target kind that runs on it
PROVIDERS = {"CPUExecutionProvider": "llvm", "CUDAExecutionProvider": "cuda"}


def _provider_name(entry: Any) -> str:
    name = entry[0] if isinstance(entry, (tuple, list)) else entry
    if name not in PROVIDERS:
        raise ArtifactError(f"unknown execution provider {name!r}; mxc artifacts run on "
                            f"{', '.join(PROVIDERS)}")
    return name


def InferenceSession(path_or_bytes: str | os.PathLike, sess_options: Any = None,  # noqa: N802
                     providers: Sequence[Any] | None = None,
                     provider_options: Sequence[Any] | None = None, **_ignored: Any) -> Session:
    """Load an ``.mxc`` artifact as ORT's ``InferenceSession`` would load a model.

    providers:
        ORT provider names (or ``(name, options)`` pairs); None accepts the
        artifact's own device.  *sess_options* and *provider_options* are
        accepted and ignored (threads and devices are fixed at compile time).
    """
    if isinstance(path_or_bytes, (bytes, bytearray)):
        raise ArtifactError("InferenceSession takes the path of an .mxc artifact, not bytes")
    names = [_provider_name(p) for p in providers] if providers else None
    from .artifact import read_manifest
    kind = (read_manifest(path_or_bytes).get("target") or {}).get("kind", "llvm")
    if names is not None and kind not in {PROVIDERS[n] for n in names}:
        wanted = next(n for n, k in PROVIDERS.items() if k == kind)
        raise ArtifactError(f"{path_or_bytes} was compiled for {kind} and runs with "
                            f"{wanted}, which providers={list(names)} does not include "
                            f"(compile it with --target for the device you want)")
    return load(path_or_bytes)
