"""The runtime plan (``graph.json``) as typed dataclasses: JSON round trip, typed rejection
of bad plans, and a hand-written plan executed by a Session.

Oracles: hand-written plans (the JSON schema as documented in mxc/runtime/plan.py),
numpy for the executed values.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from mxc.errors import ArtifactError
from mxc.runtime.plan import (GRAPH_FORMAT, GRAPH_VERSION, GRAPH_VERSION_LOAD_STEPS, BodyCall,
                              HostStep, InputSlot, LoadStep, OutputSlot, ParamSlot, Plan,
                              RegionStep)


def _plan() -> Plan:
    """Every kind of entry: data and optional inputs, a stored parameter, a region with
    an unread output, a host step with parsed params and a compiled body."""
    return Plan(
        num_slots=6,
        inputs=(InputSlot("data", 0, (2, 3), "float32"),
                InputSlot("label", 1, (2,), "float32", optional=True)),
        params=(ParamSlot("w", 2),),
        steps=(RegionStep("tvm_subgraph0", "region0", (0, 2), (3, -1), num_nodes=2,
                          ops={"FullyConnected": 1, "relu": 1}),
               HostStep("loop", "_foreach", (3, 1), (4, 5), attrs={"num_args": "2"},
                        params={"num_outputs": 1, "in_data_locs": {"__tuple__": [0]}},
                        in_shapes=((2, 3), (2,)), in_dtypes=("float32", None),
                        out_shapes=((2, 3), None), out_dtypes=("float32", "float32"),
                        reason="control flow", bodies=(BodyCall("body0_0", (0, 1)), None))),
        outputs=(OutputSlot("out", 4, (2, 3), "float32"), OutputSlot("mask", 5, (None,),
                                                                      "float32")),
        ignored_inputs=("extra_label",))


def test_json_round_trip_is_exact():
    plan = _plan()
    data = json.loads(json.dumps(plan.to_json()))     # through real JSON text
    assert data["format"] == GRAPH_FORMAT and data["version"] == GRAPH_VERSION
    assert Plan.from_json(data) == plan
    assert Plan.from_json(data).to_json() == data


def _with_load_step() -> Plan:
    """The region reads the weight ``w`` transformed by a load step into slot 6."""
    import dataclasses
    plan = _plan()
    region, host = plan.steps
    return dataclasses.replace(plan, num_slots=7, steps=(
        LoadStep("tvm_subgraph0_transform_params", "region0_transform_params", (2,), (6,)),
        dataclasses.replace(region, inputs=(0, 2, 6)), host))


def test_a_plan_with_load_steps_round_trips_as_the_version_that_has_them():
    plan = _with_load_step()
    data = json.loads(json.dumps(plan.to_json()))
    assert data["version"] == GRAPH_VERSION_LOAD_STEPS == GRAPH_VERSION + 1
    assert data["steps"][0] == {"kind": "load", "name": "tvm_subgraph0_transform_params",
                                "function": "region0_transform_params", "inputs": [2],
                                "outputs": [6]}
    assert Plan.from_json(data) == plan and plan.load_steps == [plan.steps[0]]
    data["version"] = GRAPH_VERSION     # a version-1 reader would skip the transform
    with pytest.raises(ArtifactError, match="unsupported runtime graph"):
        Plan.from_json(data)


def test_a_load_step_reads_stored_parameters_only():
    data = _with_load_step().to_json()
    data["steps"][0]["inputs"] = [0]     # the data input: not known at load time
    with pytest.raises(ArtifactError, match=r"steps\[0\]\.inputs\[0\].*stored parameter"):
        Plan.from_json(data)


def test_json_keeps_the_documented_layout():
    data = _plan().to_json()
    region, host = data["steps"]
    assert region == {"kind": "region", "name": "tvm_subgraph0", "function": "region0",
                      "inputs": [0, 2], "outputs": [3, -1], "num_nodes": 2,
                      "ops": {"FullyConnected": 1, "relu": 1}}
    assert host["kind"] == "host" and host["bodies"] == [
        {"function": "body0_0", "inputs": [0, 1]}, None]
    assert host["out_shapes"] == [[2, 3], None] and "subgraphs" not in host
    assert data["inputs"][1] == {"name": "label", "slot": 1, "shape": [2],
                                 "dtype": "float32", "optional": True}
    assert _plan().functions() == ["body0_0", "region0"]


def _broken(change) -> dict:
    data = copy.deepcopy(_plan().to_json())
    change(data)
    return data


@pytest.mark.parametrize("change, where", [
    (lambda d: d.pop("steps"), "steps: missing"),
    (lambda d: d["steps"][0].update(inputs=[0, 9]), "steps[0].inputs[1]"),
    (lambda d: d["steps"][1].update(kind="gpu"), "steps[1].kind"),
    (lambda d: d["steps"][1].update(bodies=[{"function": 3, "inputs": []}]),
     "steps[1].bodies[0].function"),
    (lambda d: d["steps"][1].update(in_shapes=[[2, -3], None]), "steps[1].in_shapes[0]"),
    (lambda d: d["steps"][0].update(ops={"relu": "one"}), "steps[0].ops.relu"),
    (lambda d: d["outputs"][0].update(slot=1.5), "outputs[0].slot"),
    (lambda d: d.update(version=GRAPH_VERSION + 1), "unsupported runtime graph"),
    (lambda d: d.update(format="onnx"), "unsupported runtime graph"),
])
def test_a_bad_plan_is_a_typed_error_naming_the_field(change, where):
    with pytest.raises(ArtifactError) as err:
        Plan.from_json(_broken(change), "model.mxc")
    assert "model.mxc" in str(err.value) and where in str(err.value)


def test_a_plan_that_is_not_an_object_is_a_typed_error():
    with pytest.raises(ArtifactError, match="expected an object"):
        Plan.from_json([1, 2, 3])


def test_a_session_executes_a_hand_written_plan():
    """No compiler involved: one host step (relu) between an input and an output."""
    from mxc.runtime import Session
    plan = Plan(num_slots=3,
                inputs=(InputSlot("x", 0, (4,), "float32"),),
                params=(ParamSlot("bias", 1),),
                steps=(HostStep("add", "elemwise_add", (0, 1), (2,), in_shapes=((4,), (4,)),
                                in_dtypes=("float32", "float32"), out_shapes=((4,),),
                                out_dtypes=("float32",)),),
                outputs=(OutputSlot("y", 2, (4,), "float32"),))
    bias = np.array([1, -1, 2, 0], np.float32)
    x = np.array([0.5, 0.25, -3, 7], np.float32)
    for graph in (plan, plan.to_json()):              # typed or as read from graph.json
        sess = Session(graph, {"target": {"kind": "llvm"}}, {"bias": bias})
        assert sess.host_nodes == ["add"] and sess.regions == []
        np.testing.assert_array_equal(sess.run({"x": x})[0], x + bias)
    with pytest.raises(ArtifactError, match="parameter 'bias' is missing"):
        Session(plan, {"target": {"kind": "llvm"}}, {})
