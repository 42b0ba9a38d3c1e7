"""Running a dynamic-batch artifact: one compiled bucket per batch size, chosen per call.

An artifact compiled for a batch range (``mxc compile --shape data=1..64,...``)
holds one runtime plan and library per *bucket* batch size (format version 2,
manifest section ``dynamic_batch``); the top bucket's are the usual
``graph.json``/``lib.so``, the others ``buckets/<b>/...``; ``params.npz`` is
stored once when every bucket's parameters are the same (they do not depend on
the batch).  :class:`BucketSession` runs a batch ``b`` on the smallest bucket
``>= b``: the ranged inputs are padded to the bucket by repeating their last
row (so ops like log or division see real values), the outputs sliced back to
``b`` along their batch axis; a batch equal to a bucket runs unchanged.  The
compiler proved the rows of the batch independent before writing the artifact
(:mod:`mxc.backends.tvm.buckets`).

Feeds are checked once, against the artifact's ranged signature (the batch in
its range, every other dimension the compiled one; :mod:`mxc.runtime.feeds`);
the padded batch goes to its bucket's session as feeds that session's
signature takes without a second check.  Padding and slicing are
:mod:`mxc.runtime.batching`'s.

Each bucket's library is loaded on first use, not at load: every library holds
its own copy of the compiled-in weights, so a server that only ever sees small
batches maps only the small buckets.  Every member is still read and its
checksum (and signature, when verified) checked at load.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import ArtifactError, ExecutionError
from . import batching
from .artifact import GRAPH, LIBRARY, PARAMS, read_npz
from .feeds import CheckedFeeds, FeedSignature, InputSpec
from .info import SessionSpellings, TensorInfo
from .plan import Plan

#: the name of the ranged dimension in ``TensorInfo.shape`` (ONNX Runtime shows a
#: symbolic dimension as its name)
BATCH_SYMBOL = "batch"


def bucket_members(batch: int, top: bool, library: bool, params: bool, shared: bool
                   ) -> dict[str, str]:
    """Where bucket *batch*'s members live in the artifact (keys: the top bucket's names)."""
    prefix = "" if top else f"buckets/{batch}/"
    out = {GRAPH: prefix + GRAPH}
    if library:
        out[LIBRARY] = prefix + LIBRARY
    if params:
        out[PARAMS] = PARAMS if shared else prefix + PARAMS
    return out


def params_equal(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


class BucketSession(SessionSpellings):
    """A session over the buckets of a dynamic-batch artifact (see the module docs).

    *parts*: ``{bucket: (plan, params, library bytes or None)}``.  Has the
    :class:`~mxc.runtime.Session` API; ``inputs``/``get_inputs()`` show the
    ranged dimension as ``'batch'`` (ONNX Runtime's symbolic dimension) and
    :attr:`batch_range` gives the range.

    What this module needs of :mod:`mxc.runtime.session` comes in as arguments,
    so that the session module (whose :func:`~mxc.runtime.load` creates bucket
    sessions) is never imported from here: *make_session* builds one bucket's
    :class:`~mxc.runtime.Session` (``session_from_parts(plan, manifest, params,
    library, source=, threads=)``); *origin* and *reload*, given by
    :func:`~mxc.runtime.load`, are the artifact's path and load options and the
    function that loads it again -- what pickling stores (without them the
    session cannot be pickled).
    """

    def __init__(self, manifest: Mapping, parts: Mapping[int, tuple], *, source: str,
                 make_session: Callable[..., Any], threads: int | None = None,
                 origin: tuple | None = None, reload: Callable[..., Any] | None = None):
        self.manifest = dict(manifest)
        self.source = source
        dyn = self.manifest["dynamic_batch"]
        self.batch_range: tuple[int, int] = (int(dyn["range"][0]), int(dyn["range"][1]))
        self.buckets: list[int] = [int(b) for b in dyn["buckets"]]
        self._axes: dict[str, int] = dict(dyn["axes"])
        self._out_axes: dict[str, int] = dict(dyn["output_axes"])
        self._parts = dict(parts)
        self._threads = threads
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._make_session = make_session
        self._origin = origin if reload is not None else None
        self._reload = reload
        plan = self._parts[self.buckets[-1]][0]
        if not isinstance(plan, Plan):
            plan = Plan.from_json(plan, source)
        self._signature = FeedSignature(
            [InputSpec(i.name, tuple(i.shape), np.dtype(i.dtype), i.optional,
                       self._axes.get(i.name),
                       self.batch_range if i.name in self._axes else None)
             for i in plan.inputs], plan.ignored_inputs)

    # -- metadata ------------------------------------------------------------------
    def _info(self, t: Mapping, axes: Mapping[str, int]) -> TensorInfo:
        axis = axes.get(t["name"])
        shape = tuple(BATCH_SYMBOL if k == axis else d for k, d in enumerate(t["shape"]))
        return TensorInfo(t["name"], shape, t["dtype"],
                          batch_range=self.batch_range if axis is not None else None,
                          batch_axis=axis)

    @property
    def inputs(self) -> list[TensorInfo]:
        return [self._info(t, self._axes) for t in self.manifest.get("inputs") or []
                if not t.get("optional")]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [self._info(t, self._out_axes) for t in self.manifest.get("outputs") or []]

    def range_text(self) -> str:
        return f"{self.batch_range[0]}..{self.batch_range[1]}"

    def __getattr__(self, name: str) -> Any:   # device, threads, regions, host_nodes, ...
        if name.startswith("__") or name in ("_parts", "_sessions", "buckets", "_make_session",
                                             "_origin", "_reload", "_signature"):
            raise AttributeError(name)
        return getattr(self.bucket_session(self.buckets[-1]), name)

    def __reduce__(self):
        if self._origin is None:
            raise ArtifactError(f"{self.source}: a session not loaded from an artifact file "
                                f"cannot be pickled; save the model and pickle "
                                f"mxc.runtime.load(PATH)")
        path, libraries, key, threads = self._origin
        if key is not None:
            from .signing import public_key_bytes
            key = public_key_bytes(key)
        return self._reload, (path, libraries, key, threads)

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in self.inputs)
        return (f"<mxc.runtime.Session {self.source} target={self.target!r} inputs=({ins}) "
                f"batch={self.range_text()} buckets={self.buckets}>")

    # -- buckets -------------------------------------------------------------------
    def bucket_session(self, bucket: int):
        """The :class:`~mxc.runtime.Session` of *bucket*, its library loaded on first use."""
        sess = self._sessions.get(bucket)
        if sess is None:
            with self._lock:
                sess = self._sessions.get(bucket)
                if sess is None:
                    plan, params, library = self._parts[bucket]
                    sess = self._make_session(plan, self.manifest, params, library,
                                              source=f"{self.source} (bucket {bucket})",
                                              threads=self._threads)
                    self._sessions[bucket] = sess
        return sess

    @property
    def input_names(self) -> frozenset[str]:
        """:attr:`mxc.runtime.Session.input_names`."""
        return self._signature.names

    @property
    def feed_signature(self) -> FeedSignature:
        """What :meth:`check_feeds` checks feeds against: the batch axis takes the range."""
        return self._signature

    def check_feeds(self, feeds: Mapping[str, Any]) -> CheckedFeeds:
        """:meth:`mxc.runtime.Session.check_feeds`: the batch of ranged inputs must lie in
        :attr:`batch_range` and be the same for all (``checked.batch``)."""
        return self._signature.check(feeds)

    # -- running -------------------------------------------------------------------
    def submit(self, feeds: Mapping[str, Any]):
        """:meth:`mxc.runtime.Session.submit`: :meth:`run` started on an executor (the
        padding and slicing too), its outputs a future."""
        return self.bucket_session(self.buckets[-1]).submit_call(self.run, feeds)

    def run(self, feeds: Any, input_feed: Mapping[str, Any] | None = None, run_options=None,
            *, profile: bool = False):
        """:meth:`mxc.runtime.Session.run` on the smallest bucket that holds the batch."""
        if input_feed is not None or feeds is None:
            top = self.bucket_session(self.buckets[-1])
            wanted = top.output_indices(feeds)
            result = self.run(input_feed if input_feed is not None else {}, profile=profile)
            outs, prof = result if profile else (result, None)
            picked = [outs[i] for i in wanted]
            return (picked, prof) if profile else picked
        checked = self._signature.check(feeds)
        if checked.declared:
            raise ExecutionError("run() was given declared tensors without values "
                                 "(CheckedFeeds.fill gives them theirs)")
        b = checked.batch
        bucket = next(x for x in self.buckets if x >= b)
        sess = self.bucket_session(bucket)
        # the bucket's fixed shapes are the checked ones with the batch padded to it
        padded = sess.feed_signature.assume_checked(batching.pad(checked, self._axes, b, bucket))
        result = sess.run(padded, profile=profile)
        if bucket == b:
            return result
        outs, prof = result if profile else (result, None)
        sliced = batching.first_rows(outs, [self._out_axes[o.name] for o in self.outputs], b)
        return (sliced, prof) if profile else sliced


def load_buckets(art: Any, source: str, threads: int | None, *, make_session: Callable[..., Any],
                 origin: tuple | None = None, reload: Callable[..., Any] | None = None
                 ) -> BucketSession:
    """A :class:`BucketSession` over the decoded artifact *art* (members checked);
    *make_session*, *origin*, *reload*: see :class:`BucketSession`."""
    dyn = art.manifest["dynamic_batch"]
    parts = {}
    for b in dyn["buckets"]:
        names = dyn["members"][str(b)]
        if names[GRAPH] == GRAPH:
            parts[b] = (art.plan or art.graph, art.params, art.library)
            continue
        import json
        try:
            graph = json.loads(art.members[names[GRAPH]])
        except ValueError as exc:
            raise ArtifactError(f"{source}: {names[GRAPH]} is not valid JSON ({exc})") from None
        plan = Plan.from_json(graph, source)
        pname = names.get(PARAMS)
        params = (art.params if pname == PARAMS else
                  read_npz(art.members[pname], source) if pname else {})
        lib = art.members.get(names[LIBRARY]) if LIBRARY in names else None
        parts[b] = (plan, params, lib)
    return BucketSession(art.manifest, parts, source=source, threads=threads,
                         make_session=make_session, origin=origin, reload=reload)
