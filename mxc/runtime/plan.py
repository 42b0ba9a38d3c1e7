"""The runtime plan: what a compiled model executes (an artifact's ``graph.json``).

The compiler (:mod:`mxc.backends.tvm.runtime_plan`) writes a :class:`Plan`
and the runtime (:class:`mxc.runtime.Session`) executes one; both sides use
these dataclasses, so the schema lives in one place and neither side indexes
dicts or lists by position.

A plan is a list of steps over numbered *value slots*:

* :class:`InputSlot` / :class:`ParamSlot` -- the slots fed by the caller or
  filled from the artifact's stored parameters;
* :class:`RegionStep` -- one function of the compiled library (Relax VM);
* :class:`HostStep` -- a node run by its reference kernel on the host, with
  its parsed parameters and inferred types (and, for control-flow nodes, the
  compiled :class:`BodyCall` of each body);
* :class:`LoadStep` -- a function of the library run once when a session is
  made, on stored parameters only (Winograd's weight transform): the artifact
  stores the weights as given, memory holds them transformed
  (:mod:`mxc.runtime.load_steps`);
* :class:`OutputSlot` -- the slots returned, in order.

On disk it stays the readable JSON of format :data:`GRAPH_FORMAT` version
:data:`GRAPH_VERSION`: :meth:`Plan.to_json` writes it, :meth:`Plan.from_json`
validates it field by field (:func:`mxc.runtime.validate.validate_graph`) and
raises :class:`~mxc.errors.ArtifactError` naming the field for bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, Union

from ..errors import ArtifactError
from .validate import validate_graph

#: the runtime graph format (``graph.json``) this runtime reads and the compiler writes
GRAPH_FORMAT, GRAPH_VERSION = "mxc-runtime-graph", 1
#: the version of plans with :class:`LoadStep` s (a runtime that predates them refuses
#: them instead of running regions without their transformed weights); 1 has none
GRAPH_VERSION_LOAD_STEPS = 2

Shape = tuple  # of int (None: an extent known only at run time)


@dataclass(frozen=True)
class InputSlot:
    """A model input the caller feeds (optional: read only where inference ignores it)."""

    name: str
    slot: int
    shape: tuple[int, ...]
    dtype: str
    optional: bool = False


@dataclass(frozen=True)
class ParamSlot:
    """A parameter stored in the artifact (``params.npz``) and placed in *slot* at load."""

    name: str
    slot: int


@dataclass(frozen=True)
class OutputSlot:
    """A model output: the value of *slot* after the last step."""

    name: str
    slot: int
    shape: tuple[Optional[int], ...]   # None extents: data-dependent (boolean_mask)
    dtype: str


@dataclass(frozen=True)
class BodyCall:
    """A compiled body of a control-flow host node: a library function and, per
    function parameter, the position of the body input that feeds it."""

    function: str
    inputs: tuple[int, ...]


@dataclass(frozen=True)
class RegionStep:
    """A compiled region: call library function *function* on the *inputs* slots."""

    kind: ClassVar[str] = "region"
    name: str
    function: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]          # -1: an output nothing reads
    num_nodes: int = 0
    ops: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class HostStep:
    """A node run on the host by its operator's reference kernel.

    *params* are the node's parsed parameters as JSON (None: the operator
    parses its own string attributes at load); *subgraphs* the nested graphs
    of a subgraph operator (:func:`mxc.runtime.host.encode_graph`)."""

    kind: ClassVar[str] = "host"
    name: str
    op: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: dict[str, str] = field(default_factory=dict)
    params: Optional[dict[str, Any]] = None
    in_shapes: tuple[Optional[Shape], ...] = ()
    in_dtypes: tuple[Optional[str], ...] = ()
    out_shapes: tuple[Optional[Shape], ...] = ()
    out_dtypes: tuple[Optional[str], ...] = ()
    reason: str = ""
    subgraphs: tuple[dict, ...] = ()
    bodies: tuple[Optional[BodyCall], ...] = ()


@dataclass(frozen=True)
class LoadStep:
    """Library function *function* run once when a session is made, on the *inputs*
    slots (stored parameters only); its *outputs* are kept like stored parameters."""

    kind: ClassVar[str] = "load"
    name: str
    function: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


Step = Union[RegionStep, HostStep, LoadStep]


@dataclass(frozen=True)
class Plan:
    """Everything the runtime executes, in the order it executes it."""

    num_slots: int
    inputs: tuple[InputSlot, ...]
    params: tuple[ParamSlot, ...]
    steps: tuple[Step, ...]
    outputs: tuple[OutputSlot, ...]
    ignored_inputs: tuple[str, ...] = ()   # inputs nothing reads (labels inference ignores)

    @property
    def regions(self) -> list[RegionStep]:
        return [s for s in self.steps if isinstance(s, RegionStep)]

    @property
    def host_steps(self) -> list[HostStep]:
        return [s for s in self.steps if isinstance(s, HostStep)]

    @property
    def load_steps(self) -> list[LoadStep]:
        return [s for s in self.steps if isinstance(s, LoadStep)]

    @property
    def version(self) -> int:
        """The format version this plan needs: the oldest one that has its step kinds."""
        return GRAPH_VERSION_LOAD_STEPS if self.load_steps else GRAPH_VERSION

    def functions(self) -> list[str]:
        """Every library function the plan calls (regions and control-flow bodies), sorted."""
        names = {s.function for s in self.regions}
        names.update(b.function for s in self.host_steps for b in s.bodies if b is not None)
        return sorted(names)

    # ---------------------------------------------------------------------------------
    # JSON
    # ---------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The ``graph.json`` object (plain JSON types)."""
        return {"format": GRAPH_FORMAT, "version": self.version, "num_slots": self.num_slots,
                "inputs": [{"name": i.name, "slot": i.slot, "shape": list(i.shape),
                            "dtype": i.dtype, "optional": i.optional} for i in self.inputs],
                "ignored_inputs": list(self.ignored_inputs),
                "params": [{"name": p.name, "slot": p.slot} for p in self.params],
                "steps": [_step_json(s) for s in self.steps],
                "outputs": [{"name": o.name, "slot": o.slot, "shape": list(o.shape),
                             "dtype": o.dtype} for o in self.outputs]}

    @classmethod
    def from_json(cls, data: Any, source: Any = "<memory>", *,
                  check_bytes: Callable[[tuple, str, str], None] | None = None) -> "Plan":
        """A plan from ``graph.json``'s object; :class:`~mxc.errors.ArtifactError` when
        it is not a valid plan of this format (naming *source* and the field).

        *check_bytes(shape, dtype, what)* may refuse declared shapes the process
        cannot allocate (``mxc.runtime.artifact`` passes its limit)."""
        validate_graph(data, source, check_bytes=check_bytes or _no_limit)
        if data["format"] != GRAPH_FORMAT \
                or data["version"] not in (GRAPH_VERSION, GRAPH_VERSION_LOAD_STEPS):
            raise ArtifactError(f"{source}: unsupported runtime graph {data['format']!r} "
                                f"version {data['version']!r} (this mxc reads {GRAPH_FORMAT!r} "
                                f"versions {GRAPH_VERSION}-{GRAPH_VERSION_LOAD_STEPS}); "
                                f"compile the model again")
        plan = cls(
            num_slots=data["num_slots"],
            inputs=tuple(InputSlot(i["name"], i["slot"], tuple(i["shape"]), i["dtype"],
                                   bool(i.get("optional", False))) for i in data["inputs"]),
            params=tuple(ParamSlot(p["name"], p["slot"]) for p in data.get("params", ())),
            steps=tuple(_step_of(s) for s in data["steps"]),
            outputs=tuple(OutputSlot(o["name"], o["slot"], tuple(o["shape"]), o["dtype"])
                          for o in data["outputs"]),
            ignored_inputs=tuple(data.get("ignored_inputs", ())))
        if plan.version != data["version"]:
            raise ArtifactError(f"{source}: unsupported runtime graph {data['format']!r} "
                                f"version {data['version']!r} for its steps (graphs with "
                                f"load steps are version {GRAPH_VERSION_LOAD_STEPS}, others "
                                f"{GRAPH_VERSION})")
        return plan


def _no_limit(shape: tuple, dtype: str, what: str) -> None:
    return None


def _shape_json(shape) -> list | None:
    return None if shape is None else list(shape)


def _shape_of(shape) -> tuple | None:
    return None if shape is None else tuple(shape)


def _step_json(s: Step) -> dict:
    if isinstance(s, LoadStep):
        return {"kind": s.kind, "name": s.name, "function": s.function,
                "inputs": list(s.inputs), "outputs": list(s.outputs)}
    if isinstance(s, RegionStep):
        return {"kind": s.kind, "name": s.name, "function": s.function,
                "inputs": list(s.inputs), "outputs": list(s.outputs),
                "num_nodes": s.num_nodes, "ops": dict(s.ops)}
    out = {"kind": s.kind, "name": s.name, "op": s.op, "attrs": dict(s.attrs),
           "params": s.params, "inputs": list(s.inputs), "outputs": list(s.outputs),
           "in_shapes": [_shape_json(x) for x in s.in_shapes], "in_dtypes": list(s.in_dtypes),
           "out_shapes": [_shape_json(x) for x in s.out_shapes],
           "out_dtypes": list(s.out_dtypes), "reason": s.reason}
    if s.subgraphs:
        out["subgraphs"] = list(s.subgraphs)
    if any(b is not None for b in s.bodies):
        out["bodies"] = [None if b is None else {"function": b.function, "inputs": list(b.inputs)}
                         for b in s.bodies]
    return out


def _step_of(s: dict) -> Step:
    if s["kind"] == LoadStep.kind:
        return LoadStep(s["name"], s["function"], tuple(s["inputs"]), tuple(s["outputs"]))
    if s["kind"] == "region":
        return RegionStep(s["name"], s["function"], tuple(s["inputs"]), tuple(s["outputs"]),
                          int(s.get("num_nodes", 0)), dict(s.get("ops") or {}))
    return HostStep(
        s["name"], s["op"], tuple(s["inputs"]), tuple(s["outputs"]),
        attrs=dict(s.get("attrs") or {}), params=s.get("params"),
        in_shapes=tuple(_shape_of(x) for x in s.get("in_shapes", ())),
        in_dtypes=tuple(s.get("in_dtypes", ())),
        out_shapes=tuple(_shape_of(x) for x in s.get("out_shapes", ())),
        out_dtypes=tuple(s.get("out_dtypes", ())), reason=s.get("reason", ""),
        subgraphs=tuple(s.get("subgraphs", ())),
        bodies=tuple(None if b is None else BodyCall(b["function"], tuple(b["inputs"]))
                     for b in s.get("bodies") or ()))
