"""Control flow (``mxc/compiler/ops/control_flow.py``): host loop, compiled bodies.

``_foreach``/``_while_loop``/``_cond`` nodes stay host steps, but each of
their bodies is lowered into a function of the model's one library
(``body<n>_<k>``), specialised to the body's static input shapes, and the
runtime's host step calls those functions (:class:`mxc.runtime.host.HostKernel`).
The loop logic itself is the op definition's :meth:`run`, shared with the
reference backend, so both backends follow the same ``*_locs`` wiring.

Why a host loop and not Relax control flow (``relax.If`` and a recursive
function): the deployment graphs loop a few to a few hundred times over
small bodies, the per-step cost of a host step is one VM call (measured in
docs/deployment-formats.md), and a host loop supports what Relax's
shape-specialised functions cannot express simply: a ``_foreach`` whose
sequence length is only known from the data, ``_while_loop``'s
data-dependent trip count with MXNet's stacked outputs, and bodies that
themselves need host ops (then the body runs on the reference backend).

A body is compiled only when every node in it lowers with static shapes;
otherwise it runs on the reference backend (``None`` in the step's
``bodies``) and the manifest says which bodies were compiled.
"""

from __future__ import annotations

import logging

from ....compiler.ops.control_flow import ControlFlowOp
from ..converter import _static, register_host_only, unsupported_nodes

log = logging.getLogger(__name__)

register_host_only("_foreach", "_while_loop", "_cond",
                   reason="control flow: the loop/branch runs as a host step that calls its "
                          "bodies, each compiled into the library when it lowers")


def lower_bodies(mb, host_nodes, shapes, dtypes, params=None,
                 bind_params: bool = True) -> dict[int, list]:
    """Lower the bodies of control-flow *host_nodes* into *mb*.

    Body inputs that are the same on every call (:meth:`invariant_inputs`)
    and come from a model parameter are bound as constants (weights of an
    RNN cell), so TVM folds their layout changes out of the loop.

    Returns ``{id(node): [body spec or None per body]}``; a spec is
    ``{"function": name, "inputs": [body input position per function parameter]}``.
    """
    out: dict[int, list] = {}
    for n, node in enumerate(host_nodes):
        opdef = node.opdef
        if not isinstance(opdef, ControlFlowOp):
            continue
        p = node.params
        in_shapes = [shapes.get(e.key) for e in node.inputs]
        in_dtypes = [dtypes.get(e.key) for e in node.inputs]
        specs = []
        for k, body in enumerate(opdef.bodies(p)):
            bound = {}
            if bind_params:
                feeds = opdef.body_feeds(p)[k]
                for loc in opdef.invariant_inputs(p, k):
                    src = node.inputs[feeds[loc]].node
                    if src.op is None and src.name in (params or {}):
                        bound[body.input_nodes()[loc].name] = params[src.name]
            specs.append(_lower_body(mb, f"body{n}_{k}", node, opdef, p, k, body, in_shapes,
                                     in_dtypes, bound))
        out[id(node)] = specs
    return out


def _lower_body(mb, fname, node, opdef, p, k, body, in_shapes, in_dtypes, bound):
    b_shapes, b_dtypes = opdef.body_signature(p, k, in_shapes, in_dtypes)
    names = [v.name for v in body.input_nodes()]
    why = None
    if len(set(names)) != len(names):
        why = "two body inputs share a name"
    elif not all(_static(s) for s in b_shapes) or None in b_dtypes:
        why = f"input shapes/dtypes not static ({b_shapes}, {b_dtypes})"
    else:
        bad = unsupported_nodes(body, dict(zip(names, b_shapes)), dict(zip(names, b_dtypes)))
        if bad:
            why = "; ".join(f"{k2}: {v}" for k2, v in bad.items())
    if why is not None:
        log.info("control flow %s body %d runs on the host: %s", node.name, k, why)
        return None
    info = mb.add(fname, body, shapes=dict(zip(names, b_shapes)),
                  dtypes=dict(zip(names, b_dtypes)), params=bound)
    return {"function": fname, "inputs": [names.index(x) for x in info.input_names]}
