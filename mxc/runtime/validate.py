"""Typed validation of an artifact's ``manifest.json`` and ``graph.json``.

Checksums prove a member is what the manifest lists, not that it is sane:
anyone can rewrite a manifest to match a modified member (only a signature,
:mod:`mxc.runtime.signing`, prevents that).  So both JSON members are
validated field by field before anything uses them, and every problem is an
:class:`~mxc.errors.ArtifactError` naming the member and the field
(``graph.json: steps[3].inputs[1]: expected a slot in [0, 5), got 9``) instead
of a ``KeyError`` or ``TypeError`` from deep inside the runtime.

Sizes are bounded by what the artifact itself declares: ``num_slots`` cannot
exceed the number of slots the steps, inputs and parameters name; every slot
a step reads must have been produced before; shapes are non-negative and
their byte sizes are checked against what this process may allocate.

The ``dynamic_batch`` section of a version-2 manifest (batch buckets, run by
:mod:`mxc.runtime.buckets`) is checked here too, by :func:`validate_dynamic`:
the artifact reader needs it before any session exists, and keeping it beside
the other manifest checks means the reader never imports the bucket runner
(which builds on the reader; no import cycle).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ..errors import ArtifactError

#: dtypes an artifact may declare for inputs and outputs
DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "uint8", "int8", "int16",
                    "uint16", "int32", "uint32", "int64", "uint64", "bool"})
#: largest single dimension accepted in a declared shape
MAX_DIM = 1 << 40
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


class Fields:
    """Checks fields of one JSON member; errors name the member and the field path."""

    def __init__(self, path: Any, member: str):
        self.path = path
        self.member = member

    def fail(self, where: str, message: str) -> ArtifactError:
        return ArtifactError(f"{self.path}: {self.member}: {where}: {message}; the artifact is "
                             f"corrupt or was modified")

    def get(self, obj: dict, key: str, where: str, kinds: tuple, *, required: bool = True,
            default: Any = None) -> Any:
        field = f"{where}.{key}" if where else key
        if key not in obj:
            if required:
                raise self.fail(field, "missing")
            return default
        v = obj[key]
        if not _is(v, kinds):
            raise self.fail(field, f"expected {_names(kinds)}, got {type(v).__name__}")
        return v

    def obj(self, v: Any, where: str) -> dict:
        if not isinstance(v, dict):
            raise self.fail(where, f"expected an object, got {type(v).__name__}")
        return v

    def items(self, obj: dict, key: str, where: str, check: Callable[[Any, str], Any],
              *, required: bool = True) -> list:
        values = self.get(obj, key, where, (list,), required=required, default=[])
        field = f"{where}.{key}" if where else key
        return [check(v, f"{field}[{i}]") for i, v in enumerate(values)]

    def shape(self, v: Any, where: str, *, unknown_ok: bool = False,
              range_ok: bool = False) -> tuple:
        if not isinstance(v, list):
            raise self.fail(where, f"expected a shape (a list of integers), got "
                                   f"{type(v).__name__}")
        for d in v:
            if d is None and unknown_ok:
                continue
            if range_ok and isinstance(d, list) and len(d) == 2 and all(
                    _is(x, (int,)) and 1 <= x <= MAX_DIM for x in d) and d[0] < d[1]:
                continue   # a dynamic batch [LO, HI]
            if not _is(d, (int,)) or not 0 <= d <= MAX_DIM:
                raise self.fail(where, f"expected dimensions in [0, {MAX_DIM}], got {d!r}")
        return tuple(v)

    def dtype(self, v: Any, where: str) -> str:
        if v not in DTYPES:
            raise self.fail(where, f"expected a dtype ({', '.join(sorted(DTYPES))}), got {v!r}")
        return v


def _is(v: Any, kinds: tuple) -> bool:
    if isinstance(v, bool) and bool not in kinds:
        return False  # JSON true is not an integer here
    return isinstance(v, kinds)


def _names(kinds: tuple) -> str:
    words = {str: "a string", int: "an integer", bool: "a boolean", list: "a list",
             dict: "an object", float: "a number", type(None): "null"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


# ---------------------------------------------------------------------------------------
# manifest.json
# ---------------------------------------------------------------------------------------
def validate_manifest(man: Any, path: Any, *, max_member: int) -> None:
    """Check every manifest field the runtime and ``mxc inspect`` read."""
    f = Fields(path, "manifest.json")
    man = f.obj(man, "manifest")
    members = f.get(man, "members", "", (dict,))
    for name, meta in members.items():
        where = f"members[{name!r}]"
        meta = f.obj(meta, where)
        size = f.get(meta, "size", where, (int,))
        if not 0 <= size <= max_member:
            raise f.fail(f"{where}.size", f"expected at most {max_member:,} bytes, got {size:,}")
        digest = f.get(meta, "sha256", where, (str,))
        if not _SHA256.match(digest):
            raise f.fail(f"{where}.sha256", "expected 64 lowercase hex digits")
    target = f.obj(f.get(man, "target", "", (dict,)), "target")
    f.get(target, "kind", "target", (str,))
    f.get(target, "string", "target", (str,), required=False)
    f.get(target, "arch", "target", (str,), required=False)
    host = f.get(target, "host", "target", (dict, type(None)), required=False)
    if host:
        for key in ("arch", "cpu", "triple"):
            f.get(host, key, "target.host", (str,), required=False)
        for key in ("features", "emulated"):
            f.items(host, key, "target.host",
                    lambda v, w: f.get({"feature": v}, "feature", w, (str,)), required=False)
    for key in ("mxc_version", "tvm_version", "created", "pipeline", "name"):
        f.get(man, key, "", (str, type(None)), required=False)
    f.get(man, "bind_params", "", (bool,), required=False)
    env = f.get(man, "environment", "", (dict,), required=False, default={})
    for key in env:
        f.get(env, key, "environment", (str,))

    def tensor(v: Any, where: str) -> None:
        v = f.obj(v, where)
        f.get(v, "name", where, (str,))
        f.shape(f.get(v, "shape", where, (list,)), f"{where}.shape", unknown_ok=True,
                range_ok="dynamic_batch" in man)
        f.dtype(f.get(v, "dtype", where, (str,)), f"{where}.dtype")
        f.get(v, "optional", where, (bool,), required=False)

    f.items(man, "inputs", "", tensor, required=False)
    f.items(man, "outputs", "", tensor, required=False)

    def region(v: Any, where: str) -> None:
        v = f.obj(v, where)
        for key in ("name", "function"):
            f.get(v, key, where, (str,))
        f.get(v, "num_nodes", where, (int,))
        ops = f.get(v, "ops", where, (dict,))
        for op, n in ops.items():
            f.get(ops, op, f"{where}.ops", (int,))

    def host_node(v: Any, where: str) -> None:
        v = f.obj(v, where)
        for key in ("name", "op", "reason"):
            f.get(v, key, where, (str,))

    def library(v: Any, where: str) -> None:
        v = f.obj(v, where)
        f.get(v, "name", where, (str,))
        if not _SHA256.match(f.get(v, "sha256", where, (str,))):
            raise f.fail(f"{where}.sha256", "expected 64 lowercase hex digits")
        f.get(v, "lib_api_version", where, (int,), required=False)
        f.items(v, "operators", where, text)

    def text(v: Any, where: str) -> str:
        if not isinstance(v, str):
            raise f.fail(where, f"expected a string, got {type(v).__name__}")
        return v

    f.items(man, "regions", "", region, required=False)
    f.items(man, "host_nodes", "", host_node, required=False)
    f.items(man, "libraries", "", library, required=False)


# ---------------------------------------------------------------------------------------
# graph.json
# ---------------------------------------------------------------------------------------
def validate_graph(g: Any, path: Any, *, check_bytes: Callable[[tuple, str, str], None]
                   ) -> None:
    """Check the runtime graph: types, slot bounds, data flow, declared shapes.

    *check_bytes(shape, dtype, what)* refuses shapes the process cannot allocate.
    """
    f = Fields(path, "graph.json")
    g = f.obj(g, "graph")
    f.get(g, "format", "", (str,))
    f.get(g, "version", "", (int,))
    n = f.get(g, "num_slots", "", (int,))
    inputs = f.get(g, "inputs", "", (list,))
    params = f.get(g, "params", "", (list,), required=False, default=[])
    steps = f.get(g, "steps", "", (list,))
    outputs = f.get(g, "outputs", "", (list,))
    f.items(g, "ignored_inputs", "", lambda v, w: f.get({"name": v}, "name", w, (str,)),
            required=False)
    declared = len(inputs) + len(params) + sum(
        len(s["outputs"]) if isinstance(s, dict) and isinstance(s.get("outputs"), list) else 0
        for s in steps)
    if not 0 <= n <= declared + 1:
        raise f.fail("num_slots", f"expected at most {declared + 1} (the slots the inputs, "
                                  f"parameters and steps produce), got {n}")
    produced = [False] * n

    def slot(v: Any, where: str, *, may_skip: bool = False) -> int:
        if not _is(v, (int,)) or not (0 <= v < n or (may_skip and v == -1)):
            raise f.fail(where, f"expected a slot in [0, {n}){' or -1' if may_skip else ''}, "
                                f"got {v!r}")
        return v

    for i, spec in enumerate(inputs):
        where = f"inputs[{i}]"
        spec = f.obj(spec, where)
        f.get(spec, "name", where, (str,))
        s = slot(f.get(spec, "slot", where, (int,)), f"{where}.slot")
        shape = f.shape(f.get(spec, "shape", where, (list,)), f"{where}.shape")
        dtype = f.dtype(f.get(spec, "dtype", where, (str,)), f"{where}.dtype")
        f.get(spec, "optional", where, (bool,), required=False)
        check_bytes(shape, dtype, f"graph.json: {where}")
        produced[s] = True
    param_slots = set()
    for i, spec in enumerate(params):
        where = f"params[{i}]"
        spec = f.obj(spec, where)
        f.get(spec, "name", where, (str,))
        param_slots.add(slot(f.get(spec, "slot", where, (int,)), f"{where}.slot"))
        produced[spec["slot"]] = True
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        step = f.obj(step, where)
        kind = f.get(step, "kind", where, (str,))
        f.get(step, "name", where, (str,))
        if kind == "region":
            f.get(step, "function", where, (str,))
            f.get(step, "num_nodes", where, (int,), required=False)
            ops = f.get(step, "ops", where, (dict,), required=False, default={})
            for op in ops:
                f.get(ops, op, f"{where}.ops", (int,))
        elif kind == "host":
            _host_step_fields(f, step, where)
        elif kind == "load":     # run once at load time, on stored parameters only
            f.get(step, "function", where, (str,))
            for k, s in enumerate(f.get(step, "inputs", where, (list,))):
                if s not in param_slots:
                    raise f.fail(f"{where}.inputs[{k}]", f"expected the slot of a stored "
                                                         f"parameter, got {s!r}")
        else:
            raise f.fail(f"{where}.kind", f"expected 'region', 'host' or 'load', got {kind!r}")
        for k, s in enumerate(f.get(step, "inputs", where, (list,))):
            s = slot(s, f"{where}.inputs[{k}]")
            if not produced[s]:
                raise f.fail(f"{where}.inputs[{k}]", f"slot {s} is read before any input, "
                                                     f"parameter or step produces it")
        for k, s in enumerate(f.get(step, "outputs", where, (list,))):
            s = slot(s, f"{where}.outputs[{k}]", may_skip=True)
            if s >= 0:
                produced[s] = True
    for i, spec in enumerate(outputs):
        where = f"outputs[{i}]"
        spec = f.obj(spec, where)
        f.get(spec, "name", where, (str,))
        s = slot(f.get(spec, "slot", where, (int,)), f"{where}.slot")
        if not produced[s]:
            raise f.fail(f"{where}.slot", f"slot {s} is never produced")
        # an output after a data-dependent op (boolean_mask) has extents known only at run time
        f.shape(f.get(spec, "shape", where, (list,)), f"{where}.shape", unknown_ok=True)
        f.dtype(f.get(spec, "dtype", where, (str,)), f"{where}.dtype")


def _host_step_fields(f: Fields, step: dict, where: str) -> None:
    """The fields of a host step besides its slots (types only: the op checks the rest)."""
    f.get(step, "op", where, (str,))
    attrs = f.get(step, "attrs", where, (dict,), required=False, default={})
    for key in attrs:
        f.get(attrs, key, f"{where}.attrs", (str,))
    f.get(step, "params", where, (dict, type(None)), required=False)
    f.items(step, "subgraphs", where, lambda v, w: f.obj(v, w), required=False)
    f.get(step, "reason", where, (str,), required=False)
    for key in ("in_shapes", "out_shapes"):
        f.items(step, key, where, lambda v, w: None if v is None else f.shape(
            v, w, unknown_ok=True), required=False)
    for key in ("in_dtypes", "out_dtypes"):
        f.items(step, key, where, lambda v, w: f.get({"dtype": v}, "dtype", w,
                                                     (str, type(None))), required=False)

    def body(v: Any, w: str) -> None:
        if v is None:  # a body left to the reference kernels
            return
        v = f.obj(v, w)
        f.get(v, "function", w, (str,))
        f.items(v, "inputs", w, lambda x, wx: f.get({"input": x}, "input", wx, (int,)))

    f.items(step, "bodies", where, body, required=False)


def validate_dynamic(man: Mapping[str, Any], path: Any) -> None:
    """Check the ``dynamic_batch`` section of a version-2 manifest (see the module docs)."""
    def fail(what: str) -> ArtifactError:
        return ArtifactError(f"{path}: manifest.json: dynamic_batch: {what}; the artifact is "
                             f"corrupt or was modified")
    dyn = man.get("dynamic_batch")
    if not isinstance(dyn, dict):
        raise fail("missing (a format version 2 artifact has a batch range)")
    rng, buckets = dyn.get("range"), dyn.get("buckets")
    if not (isinstance(rng, list) and len(rng) == 2 and all(type(x) is int for x in rng)
            and 1 <= rng[0] < rng[1]):
        raise fail(f"range: expected [LO, HI] with 1 <= LO < HI, got {rng!r}")
    if not (isinstance(buckets, list) and buckets and all(type(b) is int for b in buckets)
            and buckets == sorted(set(buckets)) and rng[0] <= buckets[0]
            and buckets[-1] == rng[1]):
        raise fail(f"buckets: expected increasing sizes in {rng[0]}..{rng[1]} ending at "
                   f"{rng[1]}, got {buckets!r}")
    for key, entries, every in (("axes", "inputs", False), ("output_axes", "outputs", True)):
        axes = dyn.get(key)
        ranks = {t.get("name"): len(t.get("shape") or ()) for t in man.get(entries) or []
                 if isinstance(t, dict)}
        if not (isinstance(axes, dict) and axes and all(
                isinstance(k, str) and type(v) is int and 0 <= v < ranks.get(k, 0)
                for k, v in axes.items())) or (every and set(axes) != set(ranks)):
            raise fail(f"{key}: expected {{name: axis}} for {'every one' if every else 'some'} "
                       f"of the manifest's {entries}, got {axes!r}")
    members, listed = dyn.get("members"), man.get("members") or {}
    if not isinstance(members, dict) or sorted(members) != sorted(map(str, buckets)):
        raise fail("members: expected the members of every bucket")
    for b, names in members.items():
        if not isinstance(names, dict) or any(n not in listed for n in names.values()) \
                or "graph.json" not in names:
            raise fail(f"members[{b!r}]: names a member the artifact does not list")
