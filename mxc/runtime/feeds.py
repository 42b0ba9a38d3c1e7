"""Feeds checked once: a session's input signature, its check, and the proof of it.

A served request used to be checked three times on its way to the compiled
code: by the server against the V2 metadata, by the model's ``predict``, and by
``Session.run``; the batch range was checked once more by the bucket runner.
The runtime now owns the one check.  :meth:`FeedSignature.check` (what
:meth:`mxc.runtime.Session.check_feeds` calls) checks names, dtypes and shapes
-- on a dynamic-batch artifact, the batch axis against its range and the
batch shared by every ranged input -- converts array-likes, and returns
:class:`CheckedFeeds`: a read-only mapping that remembers the signature that
checked it.  ``run``/``submit`` take such feeds without checking them again;
feeds checked by another signature are checked as any dict is.

A caller that knows its tensors' dtypes and shapes before it reads their
values (a server reading a request's header) checks :class:`Declared` tensors,
so a refusal costs no conversion, then :meth:`CheckedFeeds.fill` s in the
values, which are converted to the declared (checked) dtype and shape.

Refusals are :class:`FeedError` (an :class:`~mxc.errors.ExecutionError`) with
a ``reason`` and the ``names`` of the inputs concerned, so a caller speaking
another vocabulary (the V2 protocol's ``FP32`` and ``-1``) can word them its
own way without checking anything itself.
"""

from __future__ import annotations

import collections.abc
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import ExecutionError

_MISSING = object()


class FeedError(ExecutionError):
    """Feeds refused by :meth:`FeedSignature.check`.

    ``reason`` is one of ``"type"`` (not a mapping), ``"unknown"``, ``"missing"``,
    ``"convert"``, ``"dtype"``, ``"shape"``, ``"batch"`` (outside the range, or
    inputs of different batches) and ``"values"`` (a :meth:`CheckedFeeds.fill`
    whose values do not make the declared tensors); ``names`` the inputs concerned.
    """

    def __init__(self, message: str, reason: str, names: Sequence[str] = ()):
        super().__init__(message)
        self.reason = reason
        self.names = tuple(names)


@dataclass(frozen=True)
class Declared:
    """A feed known by its dtype and shape before its values are read."""

    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class InputSpec:
    """One input a signature checks: the compiled shape (on a ranged input the
    ``batch_axis`` dimension is a placeholder) and dtype."""

    name: str
    shape: tuple
    dtype: np.dtype
    optional: bool = False
    batch_axis: int | None = None
    batch_range: tuple[int, int] | None = None


_set = object.__setattr__


class CheckedFeeds(collections.abc.Mapping):
    """Feeds a :class:`FeedSignature` checked: ``{name: array}`` (read-only), their
    ``batch`` (the size of the ranged dimension; None without one) and the
    ``signature`` that checked them.  Made by :meth:`FeedSignature.check`; a
    session whose signature it is runs it without checking it again."""

    __slots__ = ("_arrays", "batch", "signature")

    def __init__(self, arrays: dict[str, Any], batch: int | None, signature: FeedSignature):
        # a Mapping of collections.abc, not typing's generic one, and the dict taken as
        # it is (each maker passes a fresh one): made once per call of run()
        _set(self, "_arrays", arrays)
        _set(self, "batch", batch)
        _set(self, "signature", signature)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("CheckedFeeds are read-only")

    def __getitem__(self, name: str) -> Any:
        return self._arrays[name]

    def get(self, name: str, default: Any = None) -> Any:   # Mapping's goes through a raise
        return self._arrays.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self._arrays.items())
        return f"CheckedFeeds({shapes}; batch={self.batch})"

    @property
    def declared(self) -> bool:
        """Whether some value is still a :class:`Declared` tensor (see :meth:`fill`)."""
        return any(isinstance(v, Declared) for v in self._arrays.values())

    def fill(self, values: Mapping[str, Any]) -> CheckedFeeds:
        """These feeds with their :class:`Declared` tensors given *values*, each
        converted to its declared dtype and shape (the ones checked); a
        :class:`FeedError` (``"values"``) when a value does not make its tensor."""
        out = dict(self._arrays)
        for name, d in self._arrays.items():
            if not isinstance(d, Declared):
                continue
            if name not in values:
                raise FeedError(f"input {name!r}: no values given for the declared tensor",
                                "values", (name,))
            try:
                out[name] = np.asarray(values[name], dtype=d.dtype).reshape(d.shape)
            except (TypeError, ValueError) as exc:
                raise FeedError(f"input {name!r}: the values do not make a {d.dtype.name} "
                                f"tensor of shape {list(d.shape)} ({exc})", "values",
                                (name,)) from None
        return CheckedFeeds(out, self.batch, self.signature)


def takes_shape(compiled: Sequence[Any], shape: Sequence[Any], batch_axis: int | None = None,
                batch_range: tuple[int, int] | None = None) -> bool:
    """Whether an input compiled for *compiled* takes an array of *shape*: the same
    rank and dimensions, but on *batch_axis* any batch in *batch_range* (any
    batch at all when the range is None: the caller checks it apart)."""
    if batch_axis is None:
        return tuple(shape) == tuple(compiled)
    return len(shape) == len(compiled) and all(
        (batch_range is None or in_range(int(d), batch_range)) if k == batch_axis
        else d == want for k, (d, want) in enumerate(zip(shape, compiled)))


def in_range(batch: int, batch_range: tuple[int, int]) -> bool:
    """Whether *batch* lies in the inclusive range *batch_range*: the one test of it."""
    return batch_range[0] <= batch <= batch_range[1]


def _shape_text(spec: InputSpec) -> str:
    if spec.batch_axis is None:
        return str(tuple(spec.shape))
    lo, hi = spec.batch_range
    dims = [f"{lo}..{hi}" if k == spec.batch_axis else str(d) for k, d in enumerate(spec.shape)]
    return f"({', '.join(dims)})"


class FeedSignature:
    """The inputs a session takes, and the one check of feeds against them.

    *specs*: the inputs (optional ones may be left out of feeds); *ignored*:
    names accepted and dropped (labels inference ignores).  *device_tensor(spec,
    x)* takes a DLPack tensor: it returns a host numpy array (checked as any
    array) or a device tensor (its ``dtype``/``shape`` checked), or raises.
    """

    def __init__(self, specs: Iterable[InputSpec], ignored: Iterable[str] = (), *,
                 device_tensor: Callable[[InputSpec, Any], Any] | None = None):
        self.specs: tuple[InputSpec, ...] = tuple(specs)
        self.names: frozenset[str] = frozenset([s.name for s in self.specs] + list(ignored))
        self._required = [s.name for s in self.specs if not s.optional]
        self._required_set = frozenset(self._required)
        self._fast = [(s.name, tuple(s.shape), s.dtype, s.batch_axis, s) for s in self.specs]
        self._listed = ", ".join(self._required)
        self._device_tensor = device_tensor
        ranges = {s.batch_range for s in self.specs if s.batch_axis is not None}
        #: ``(lo, hi)`` the ranged inputs' batch takes (None: no ranged input)
        self.batch_range: tuple[int, int] | None = ranges.pop() if len(ranges) == 1 else None
        self.batch_axes: dict[str, int] = {s.name: s.batch_axis for s in self.specs
                                           if s.batch_axis is not None}

    def check(self, feeds: Any) -> CheckedFeeds:
        """*feeds* (``{name: array, array-like, DLPack tensor or Declared}``) checked
        against the signature; a :class:`FeedError` naming the input otherwise.
        Feeds this signature already checked are returned as they are."""
        if type(feeds) is CheckedFeeds and feeds.signature is self:
            return feeds
        arrays, batch = self.check_values(feeds)
        return CheckedFeeds(arrays, batch, self)

    def check_values(self, feeds: Any) -> tuple[dict[str, Any], int | None]:
        """:meth:`check` without the :class:`CheckedFeeds` around its answer:
        ``({name: value}, batch)``, for a session checking the feeds of its own
        call (``run`` with a plain dict), which needs no proof to hand on."""
        if type(feeds) is not dict and not isinstance(feeds, Mapping):
            raise FeedError(f"run() takes a dict of input name -> array, got "
                            f"{type(feeds).__name__}", "type")
        keys = feeds.keys()
        if not keys <= self.names:
            unknown = sorted(set(feeds) - self.names)
            raise FeedError(f"unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                            f"inputs are {self._listed}", "unknown", unknown)
        if not keys >= self._required_set:
            missing = [n for n in self._required if n not in feeds]
            raise FeedError(f"missing input(s) {', '.join(map(repr, missing))}", "missing",
                            missing)
        out = {}
        batches: dict[str, int] = {}
        for name, shape, dtype, axis, spec in self._fast:
            x = feeds.get(name, _MISSING)
            if x is _MISSING:
                continue   # optional: the session feeds zeros
            # the common case, a numpy array of the compiled dtype and fixed shape, in
            # line: run() on a small model spends microseconds here
            if type(x) is np.ndarray and axis is None and x.shape == shape and x.dtype == dtype:
                out[name] = x
                continue
            x = out[name] = self._value(spec, x)
            if axis is not None:
                batches[name] = int(x.shape[axis])
        return out, (self._batch(batches) if batches else None)

    def assume_checked(self, arrays: Mapping[str, Any], batch: int | None = None
                       ) -> CheckedFeeds:
        """*arrays* as feeds of this signature, **without checking them**: for runtime
        code that derived them from feeds already checked (a bucket session pads a
        checked batch to its bucket; the batcher concatenates checked requests)."""
        return CheckedFeeds(dict(arrays), batch, self)

    def check_batch(self, batch: int, name: str | None = None) -> int:
        """*batch* when the ranged inputs take it; a :class:`FeedError` naming the range."""
        lo, hi = self.batch_range or (batch, batch)
        if not in_range(batch, (lo, hi)):
            name = name or next(iter(self.batch_axes), "?")
            raise FeedError(f"input {name!r}: batch {batch} (dimension "
                            f"{self.batch_axes.get(name, 0)}) is outside the artifact's batch "
                            f"range {lo}..{hi}; split the batch or compile a wider range",
                            "batch", (name,))
        return batch

    def _batch(self, batches: dict[str, int]) -> int | None:
        if not batches:
            return None
        if len(set(batches.values())) > 1:
            lo, hi = self.batch_range
            listing = ", ".join(f"{n}: {b}" for n, b in batches.items())
            raise FeedError(f"inputs have different batch sizes ({listing}); they share "
                            f"one batch in {lo}..{hi}", "batch", list(batches))
        name, batch = next(iter(batches.items()))
        return self.check_batch(batch, name)

    def _value(self, spec: InputSpec, x: Any) -> Any:
        name, dtype = spec.name, spec.dtype
        if type(x) is not np.ndarray and not isinstance(x, Declared):
            if hasattr(x, "__dlpack__") and not isinstance(x, np.generic) \
                    and self._device_tensor is not None:
                x = self._device_tensor(spec, x)
                if type(x) is not np.ndarray:   # a device tensor, used in place
                    if str(x.dtype) != dtype.name or not self._shape_ok(spec, tuple(x.shape)):
                        raise FeedError(f"input {name!r}: expected {dtype.name}"
                                        f"{_shape_text(spec)}, got {x.dtype}{list(x.shape)}",
                                        "dtype" if str(x.dtype) != dtype.name else "shape",
                                        (name,))
                    return x
            else:
                try:
                    x = np.asarray(x, dtype=dtype)
                except (TypeError, ValueError) as exc:
                    raise FeedError(f"input {name!r}: cannot convert to {dtype.name} ({exc})",
                                    "convert", (name,)) from None
        if x.dtype != dtype:
            raise FeedError(f"input {name!r}: expected dtype {dtype.name}, got "
                            f"{np.dtype(x.dtype).name} (cast it with .astype({dtype.name!r}))",
                            "dtype", (name,))
        shape = tuple(x.shape)
        if not self._shape_ok(spec, shape):
            if spec.batch_axis is None:
                raise FeedError(f"input {name!r}: expected shape {spec.shape}, got {shape}; the "
                                f"model was compiled for fixed shapes (recompile with --shape "
                                f"{name}={','.join(map(str, shape))})", "shape", (name,))
            raise FeedError(f"input {name!r}: expected shape {_shape_text(spec)} (the batch "
                            f"in dimension {spec.batch_axis}), got {shape}", "shape", (name,))
        return x

    @staticmethod
    def _shape_ok(spec: InputSpec, shape: tuple) -> bool:
        """The dimensions besides the batch (its range is :meth:`check_batch`'s)."""
        return takes_shape(spec.shape, shape, spec.batch_axis)
