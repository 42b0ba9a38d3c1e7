"""The result of compiling a batch range: one :class:`~.compile.CompiledModel` per batch
bucket, saved as one artifact (:mod:`mxc.runtime.buckets` runs it).

The compile driver (:mod:`.compile`, through :mod:`.buckets`) builds this model, so
this module never imports it: the bucket models come in as arguments, and the few
properties read like a single model's are spelled out here (no import cycle)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...runtime.buckets import bucket_members, params_equal
from .manifest import ManifestTensors


class BucketedModel(ManifestTensors):
    """A model compiled for a batch range: ``buckets[b]`` is the
    :class:`~.compile.CompiledModel` of batch ``b``.  Everything a single model
    has (``regions``, ``host_nodes``, ``target``, ...) is the top bucket's; the
    manifest adds a ``dynamic_batch`` section (range, ranged axes, buckets,
    output batch axes, each bucket's members)."""

    def __init__(self, rng: Any, buckets: list[int], output_axes: dict[str, int],
                 models: dict[int, Any]):
        self.range = rng
        self.bucket_sizes = list(buckets)
        self.output_axes = dict(output_axes)
        self.buckets = dict(models)
        self.top = models[buckets[-1]]
        self.sign = None
        self._session = None
        shared = all(params_equal(m.params, self.top.params) for m in models.values())
        self._shared_params = shared
        span = [rng.lo, rng.hi]   # the ranged dimension, as Triton's export reads it
        members = {str(b): bucket_members(b, b == buckets[-1], m.executable is not None,
                                          bool(m.params), shared) for b, m in models.items()}
        self.manifest = {
            **self.top.manifest,
            "inputs": _ranged(self.top.manifest.get("inputs"), rng.axes, span),
            "outputs": _ranged(self.top.manifest.get("outputs"), output_axes, span),
            "dynamic_batch": {"range": span, "axes": dict(rng.axes), "buckets": list(buckets),
                              "output_axes": dict(output_axes), "members": members}}

    def __getattr__(self, name: str) -> Any:   # graph, plan, params, regions, host_nodes ...
        if name in ("top", "buckets"):
            raise AttributeError(name)
        return getattr(self.top, name)

    def _members(self) -> dict[str, bytes]:
        """The members of every bucket but the top one, by their path in the artifact."""
        from ...runtime.artifact import GRAPH, LIBRARY, PARAMS
        from ...runtime.bfloat16 import npz_bytes
        import json
        out: dict[str, bytes] = {}
        for b in self.bucket_sizes[:-1]:
            m, names = self.buckets[b], self.manifest["dynamic_batch"]["members"][str(b)]
            out[names[GRAPH]] = json.dumps(m.plan.to_json(), indent=1).encode()
            if m.executable is not None:
                out[names[LIBRARY]] = m.library_bytes()
            if m.params and names[PARAMS] != PARAMS:
                out[names[PARAMS]] = npz_bytes(m.params)
        return out

    def save(self, path: str | os.PathLike, *, sign: Any = None) -> Path:
        """Write the one artifact holding every bucket (atomically); returns the path."""
        from ...runtime.artifact import write_artifact
        write_artifact(path, self.manifest, self.top.plan, self.top.params,
                       self.top.library_bytes(), sign=sign if sign is not None else self.sign,
                       extra=self._members())
        return Path(path)

    def session(self):
        """A :class:`mxc.runtime.buckets.BucketSession` running the buckets in memory."""
        if self._session is None:
            from ...runtime.artifact import check_target_runnable
            from ...runtime.buckets import BucketSession
            from ...runtime.session import session_from_parts
            check_target_runnable(self.manifest["target"], "compiled model")
            parts = {b: (m.plan, m.params, m.library_bytes()) for b, m in self.buckets.items()}
            self._session = BucketSession(self.manifest, parts, source="<compiled model>",
                                          make_session=session_from_parts)
        return self._session

    def run(self, feeds: Mapping[str, Any], **kwargs) -> list[np.ndarray]:
        return self.session().run(feeds, **kwargs)

    def summary(self) -> str:
        return (f"batch range {self.range.text()} on "
                f"{', '.join(f'{n}[{a}]' for n, a in self.range.axes.items())}, buckets "
                f"{', '.join(map(str, self.bucket_sizes))}\n" + self.top.summary())


def _ranged(entries: Any, axes: Mapping[str, int], span: list[int]) -> list[dict]:
    """Manifest tensor entries with the batch dimension of those in *axes* as ``[LO, HI]``."""
    out = []
    for e in entries or []:
        shape = list(e["shape"])
        if e["name"] in axes:
            shape[axes[e["name"]]] = list(span)
        out.append({**e, "shape": shape})
    return out
