"""The last compile stage: the :class:`~mxc.runtime.plan.Plan` the runtime executes.

It numbers the values of the partitioned graph (slots), turns every region
into a :class:`~mxc.runtime.plan.RegionStep` and every host node into a
:class:`~mxc.runtime.plan.HostStep` (its parsed parameters and inferred
types stored so nothing is parsed at load), and decides which inputs a call
must feed, which are optional (read only where inference ignores them) and
which parameters the artifact stores.  The schema itself lives in
:mod:`mxc.runtime.plan`, shared with the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...compiler.ir import Node
from ...errors import MxcError
from ...runtime.plan import (BodyCall, HostStep, InputSlot, OutputSlot, ParamSlot, Plan,
                             RegionStep)

if TYPE_CHECKING:
    from .lower import LoweredModel


def plan_model(lowered: "LoweredModel") -> tuple[Plan, dict[str, np.ndarray]]:
    """``(plan, parameters the runtime needs that are not compiled into the library)``."""
    pg, params = lowered.graph, lowered.params
    shapes, dtypes = lowered.shapes, lowered.dtypes
    slots: dict[tuple[int, int], int] = {}

    def slot(key) -> int:
        s = slots.get(key)
        if s is None:
            s = slots[key] = len(slots)
        return s

    region_ids = {id(n) for n in lowered.regions}
    needed_inputs: set[str] = set()      # data inputs some step really reads
    optional_inputs: set[str] = set()    # read only in slots inference ignores
    used_params: set[str] = set()
    # (step without its output slots, output entries): slots are numbered once all
    # reads are known, so an output nothing reads gets -1
    pending: list[tuple[dict, list]] = []
    for node in pg.topo_order():
        if node.op is None:
            continue
        if id(node) in region_ids:
            info, entries = lowered.functions[node.name]
            ins = []
            for e in entries:
                _note_var(e, params, needed_inputs, used_params)
                ins.append(slot(e.key))
            nested = node.subgraphs[0]
            pending.append(({"kind": RegionStep, "name": node.name, "function": info.name,
                             "inputs": tuple(ins), "num_nodes": len(nested.op_nodes()),
                             "ops": nested.op_counts()},
                            [(node, i) for i in range(len(nested.outputs))]))
        else:
            unused = set(node.opdef.unused_inputs(node.params))
            ins = []
            for i, e in enumerate(node.inputs):
                if e.node.op is None and e.node.name not in params and i in unused:
                    optional_inputs.add(e.node.name)
                else:
                    _note_var(e, params, needed_inputs, used_params)
                ins.append(slot(e.key))
            pending.append(_host_step(node, tuple(ins), lowered))
    outputs = []
    for e, name in zip(pg.outputs, lowered.output_names):
        _note_var(e, params, needed_inputs, used_params)
        outputs.append(OutputSlot(name, slot(e.key), _shape(shapes[e.key]), dtypes[e.key]))
    steps = []
    for fields, keys in pending:
        kind = fields.pop("kind")
        steps.append(kind(**fields, outputs=tuple(slots.get(k, -1) for k in keys)))
    optional_inputs -= needed_inputs
    inputs, ignored = [], []
    for var in pg.input_nodes():
        key = (var, 0)
        if var.name in params:
            continue
        if var.name in needed_inputs or var.name in optional_inputs:
            inputs.append(InputSlot(var.name, slot(key), tuple(shapes[key]), dtypes[key],
                                    var.name in optional_inputs))
        else:
            ignored.append(var.name)  # read by nothing (a label inference ignores)
    rt_params = {}
    param_slots = []
    for var in pg.input_nodes():
        if var.name in used_params:
            rt_params[var.name] = np.ascontiguousarray(
                np.asarray(params[var.name]).astype(dtypes[(var, 0)], copy=False))
            param_slots.append(ParamSlot(var.name, slot((var, 0))))
    plan = Plan(num_slots=len(slots), inputs=tuple(inputs), params=tuple(param_slots),
                steps=tuple(steps), outputs=tuple(outputs), ignored_inputs=tuple(ignored))
    return plan, rt_params


def _note_var(e, params, needed_inputs: set, used_params: set) -> None:
    if e.node.op is not None:
        return
    (used_params if e.node.name in params else needed_inputs).add(e.node.name)


def _host_step(node: Node, ins: tuple, lowered: "LoweredModel") -> tuple[dict, list]:
    from ...runtime.host import encode_graph
    shapes, dtypes = lowered.shapes, lowered.dtypes
    keys = [(node, i) for i in range(node.num_outputs())]
    bodies = lowered.bodies.get(id(node)) or ()
    fields = {"kind": HostStep, "name": node.name, "op": node.op, "inputs": ins,
              "attrs": dict(node.attrs), "params": _encode_params(node),
              "in_shapes": tuple(_shape(shapes.get(e.key)) for e in node.inputs),
              "in_dtypes": tuple(dtypes.get(e.key) for e in node.inputs),
              "out_shapes": tuple(_shape(shapes.get(k)) for k in keys),
              "out_dtypes": tuple(dtypes.get(k) for k in keys),
              "reason": lowered.host_reasons.get(node.label, ""),
              "subgraphs": tuple(encode_graph(g) for g in node.subgraphs),
              "bodies": (tuple(None if b is None else BodyCall(b["function"], tuple(b["inputs"]))
                               for b in bodies)
                         if any(b is not None for b in bodies) else ())}
    return fields, keys


def _shape(shape) -> tuple | None:
    return None if shape is None else tuple(None if d is None else int(d) for d in shape)


def _encode_params(node: Node) -> dict | None:
    """The node's parsed parameters as JSON, or None (parsed again at load) if not plain."""
    from ...compiler.ops.registry import Params
    from ...runtime.host import encode_value
    try:
        p = node.params
        if type(p) is not Params or node.opdef.is_subgraph_op:
            return None
        return {k: encode_value(v) for k, v in p.items()}
    except (TypeError, MxcError):
        return None
