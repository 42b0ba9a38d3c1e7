"""Control flow: ``_foreach``, ``_while_loop`` and ``_cond`` (``mx.sym.contrib``), MXNet 1.9.1.

Each node carries its bodies in ``node.subgraphs`` (full graphs, as MXNet
serialises them) and integer ``*_locs`` attributes that wire node inputs to
body inputs:

* ``_foreach`` -- one body.  Node inputs are the sequences (sliced along
  axis 0, ``in_data_locs`` say which body inputs receive the slices), then
  the initial states (``in_state_locs``), then the loop-invariant inputs
  (``remain_locs``).  Body outputs: ``num_out_data`` per-step outputs, then
  the new states.  Node outputs: the per-step outputs stacked on a new axis
  0, then the final states.
* ``_while_loop`` -- bodies ``[cond, func]``.  ``cond_input_locs`` and
  ``func_input_locs`` pick node inputs for each body; ``func_var_locs`` say
  which func inputs are loop variables (in loop-variable order).  func
  returns ``num_out_data`` per-step outputs, then the new loop variables.
  The loop runs while cond's (1,) value is non-zero and fewer than
  ``max_iterations`` steps ran.  Node outputs: the per-step outputs stacked
  to ``max_iterations`` rows, then the final loop variables.
* ``_cond`` -- bodies ``[cond, then, else]`` fed by ``cond_input_locs``,
  ``then_input_locs``, ``else_input_locs``; the branch's outputs are the
  node's.

Where mxc differs from MXNet (docs/deployment-formats.md):

* ``_while_loop`` rows past the last executed step are ZEROS in mxc (MXNet
  leaves them uninitialised, so they hold garbage);
* shape and dtype inference sees through all three (MXNet's ``infer_shape``
  returns nothing for ``_cond``/``_while_loop`` outputs): the bodies are
  inferred from the node's inputs, loop-carried values keep their shape, and
  both ``_cond`` branches must agree.

The semantics live in one place, :meth:`ControlFlowOp.run`, which takes a
``call(k, inputs)`` that runs body *k*: the reference backend passes the
nested graph's numpy executor, a compiled artifact its compiled body
functions (:mod:`mxc.runtime.host`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...errors import DTypeError, OpError, ShapeError
from .common import fmt_shape, merge_shape
from .registry import Attr, OpDef, Params, register_op, shape_error, to_int, to_shape

#: ``call(k, inputs) -> outputs``: run body *k* on numpy arrays
BodyCall = Callable[[int, Sequence[np.ndarray]], Sequence[np.ndarray]]


def _merge(p: Params, kind: str, a, b, what: str):
    if kind == "dtype":
        if a is None or b is None or a == b:
            return a if a is not None else b
        raise DTypeError(f"operator {p.node.op} (node {p.node_ref}): {what}: {a} vs {b}")
    try:
        return merge_shape(a, b)
    except ValueError as exc:
        raise shape_error(p, f"{what}: {exc}") from None


def _stacked(kind: str, rows: int | None, step):
    """The value of a stack of *rows* step values (shape ``(rows,) + step``)."""
    if kind == "dtype" or step is None:
        return step
    return (rows,) + tuple(step)


def _step_of(kind: str, stacked):
    if kind == "dtype" or stacked is None:
        return stacked
    return tuple(stacked[1:])


def _truthy(p: Params, pred) -> bool:
    pred = np.asarray(pred)
    if pred.size != 1:
        raise OpError(f"operator {p.node.op} (node {p.node_ref}): the condition must be a "
                      f"single value, got shape {fmt_shape(pred.shape)}")
    return bool(pred.reshape(()) != 0)


class ControlFlowOp(OpDef):
    """Common machinery: attributes, body access, inference and execution through bodies.

    Not a subgraph operator in the partitioning sense (``is_subgraph_op`` is
    False): its bodies are not regions to inline but code it runs.
    """

    num_bodies = 1
    arguments = ()

    # -- bodies -------------------------------------------------------------------
    def bodies(self, p: Params) -> list:
        node = p.node
        subs = list(getattr(node, "subgraphs", None) or ())
        if len(subs) != self.num_bodies:
            raise OpError(f"operator {self.name} (node {p.node_ref}) needs "
                          f"{self.num_bodies} subgraph(s) in 'subgraphs', got {len(subs)}")
        return subs

    def body_feeds(self, p: Params) -> list[list[int]]:
        """For each body, the node input feeding each of its inputs (foreach: the
        sequence inputs, which feed slices)."""
        raise NotImplementedError

    def validate_bodies(self, p: Params) -> None:
        for k, (body, feeds) in enumerate(zip(self.bodies(p), self.body_feeds(p))):
            n = len(body.input_nodes())
            if n != len(feeds):
                raise OpError(f"operator {self.name} (node {p.node_ref}): subgraph {k} has "
                              f"{n} inputs but the *_locs attributes feed {len(feeds)}")

    # -- arity --------------------------------------------------------------------
    def num_inputs(self, p):
        return p.num_args - self.num_bodies

    def input_names(self, p):
        names = [f"arg{i}" for i in range(self.num_inputs(p))]
        for body, feeds in zip(self.bodies(p), self.body_feeds(p)):
            for var, i in zip(body.input_nodes(), feeds):
                if names[i] == f"arg{i}":
                    names[i] = var.name
        return names

    def num_outputs(self, p):
        return p.num_outputs

    # -- inference ----------------------------------------------------------------
    def infer_shape(self, p, in_shapes, out_shapes):
        return self._infer(p, "shape", list(in_shapes), list(out_shapes))

    def infer_type(self, p, in_types, out_types):
        return self._infer(p, "dtype", list(in_types), list(out_types))

    def _infer(self, p, kind, ins, outs):
        raise NotImplementedError

    def infer_body(self, p: Params, k: int, kind: str, ins: list, outs: list):
        """Bidirectional inference inside body *k* from its inputs and outputs."""
        from .subgraph import infer_nested
        body = self.bodies(p)[k]
        try:
            return infer_nested(body, kind, ins, outs)
        except (ShapeError, DTypeError) as exc:
            raise type(exc)(f"operator {self.name} (node {p.node_ref}), subgraph {k}: "
                            f"{exc}") from None

    def invariant_inputs(self, p: Params, k: int) -> set[int]:
        """Positions of body *k*'s inputs that get the same value on every call
        (a compiler may bind them as constants when the node input is a parameter)."""
        return set(range(len(self.body_feeds(p)[k])))

    def body_args(self, p: Params, k: int, kind: str, ins: list) -> list:
        """The shapes/dtypes (*kind*) body *k*'s inputs get from the node's inputs *ins*."""
        return [ins[i] for i in self.body_feeds(p)[k]]

    def body_signature(self, p: Params, k: int, in_shapes: list, in_dtypes: list
                       ) -> tuple[list, list]:
        """Shapes and dtypes of body *k*'s inputs given the node's (to compile the body)."""
        nout = len(self.bodies(p)[k].outputs)
        return (self.infer_body(p, k, "shape", self.body_args(p, k, "shape", in_shapes),
                                [None] * nout)[0],
                self.infer_body(p, k, "dtype", self.body_args(p, k, "dtype", in_dtypes),
                                [None] * nout)[0])

    # -- semantics ----------------------------------------------------------------
    def run(self, p: Params, inputs: Sequence[np.ndarray], call: BodyCall,
            out_shapes: Sequence, out_dtypes: Sequence) -> list[np.ndarray]:
        """The node's outputs, running body *k* with ``call(k, inputs)``."""
        raise NotImplementedError

    def forward(self, p, inputs, ctx):
        runners = [BodyRunner(body) for body in self.bodies(p)]
        return self.run(p, inputs, lambda k, xs: runners[k](xs), ctx.out_shapes, ctx.out_dtypes)


class BodyRunner:
    """Runs one body on numpy arrays (reference kernels), inferring its shapes and
    dtypes once per input signature rather than at every step of a loop."""

    def __init__(self, graph):
        self.graph = graph
        self._types: dict[tuple, tuple[dict, dict]] = {}

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        from .subgraph import evaluate_nested, infer_nested_values
        inputs = [np.asarray(x) for x in inputs]
        n = len(self.graph.input_nodes())
        if len(inputs) != n:
            raise OpError(f"a body with {n} inputs was called with {len(inputs)}")
        sig = tuple((x.shape, x.dtype.name) for x in inputs)
        types = self._types.get(sig)
        if types is None:
            types = self._types[sig] = infer_nested_values(self.graph, inputs)
        return evaluate_nested(self.graph, inputs, *types)


def _locs_attrs(*names: str) -> dict:
    return {n: Attr(to_shape, ()) for n in names}


# ---------------------------------------------------------------------------
# _foreach
# ---------------------------------------------------------------------------
@register_op("_foreach")
class Foreach(ControlFlowOp):
    """Scan a body over axis 0 of the sequence inputs, carrying states."""

    attrs = {"num_args": Attr(to_int), "num_outputs": Attr(to_int),
             "num_out_data": Attr(to_int), **_locs_attrs("in_data_locs", "in_state_locs",
                                                         "remain_locs")}
    num_bodies = 1

    def body_feeds(self, p):
        locs = list(p.in_data_locs) + list(p.in_state_locs) + list(p.remain_locs)
        feeds = [0] * len(locs)
        for i, loc in enumerate(locs):
            feeds[loc] = i
        return [feeds]

    def invariant_inputs(self, p, k):
        return set(p.remain_locs)

    def body_args(self, p, k, kind, ins):
        nd = len(p.in_data_locs)
        return [_step_of(kind, ins[i]) if i < nd else ins[i] for i in self.body_feeds(p)[0]]

    def _layout(self, p):
        nd, ns = len(p.in_data_locs), len(p.in_state_locs)
        return nd, ns, p.num_out_data

    def _infer(self, p, kind, ins, outs):
        self.validate_bodies(p)
        nd, ns, no = self._layout(p)
        feeds = self.body_feeds(p)[0]
        steps = None
        for x in ins[:nd]:
            if kind == "shape" and x is not None:
                steps = _merge(p, kind, (steps,), (x[0],), "sequence lengths")[0]
        for o in outs[:no]:
            if kind == "shape" and o is not None:
                steps = _merge(p, kind, (steps,), (o[0],), "sequence length of the outputs")[0]
        for _ in range(3):
            body_in = self.body_args(p, 0, kind, ins)
            body_out = [_step_of(kind, o) for o in outs[:no]]
            # a state's new value has the state's shape/dtype
            body_out += [_merge(p, kind, ins[nd + j], outs[no + j], f"state {j}")
                         for j in range(ns)]
            b_in, b_out = self.infer_body(p, 0, kind, body_in, body_out)
            for loc, i in enumerate(feeds):
                v = _stacked(kind, steps, b_in[loc]) if i < nd else b_in[loc]
                ins[i] = _merge(p, kind, ins[i], v, f"input {i}")
            for j in range(no):
                outs[j] = _merge(p, kind, outs[j], _stacked(kind, steps, b_out[j]),
                                 f"output {j}")
            for j in range(ns):
                v = _merge(p, kind, b_out[no + j], ins[nd + j], f"state {j}")
                ins[nd + j] = v
                outs[no + j] = _merge(p, kind, outs[no + j], v, f"state output {j}")
        return ins, outs

    def run(self, p, inputs, call, out_shapes, out_dtypes):
        nd, ns, no = self._layout(p)
        feeds = self.body_feeds(p)[0]
        seqs = [np.asarray(x) for x in inputs[:nd]]
        steps = seqs[0].shape[0] if seqs else 0
        states = list(inputs[nd:nd + ns])
        per_step: list[list[np.ndarray]] = [[] for _ in range(no)]
        for t in range(steps):
            args = [seqs[i][t] if i < nd else (states[i - nd] if i < nd + ns else inputs[i])
                    for i in feeds]
            res = list(call(0, args))
            for j in range(no):
                per_step[j].append(np.asarray(res[j]))
            states = [np.asarray(s) for s in res[no:no + ns]]
        stacked = [np.stack(rows) if rows else np.zeros(out_shapes[j], out_dtypes[j])
                   for j, rows in enumerate(per_step)]
        return stacked + states


# ---------------------------------------------------------------------------
# _while_loop
# ---------------------------------------------------------------------------
@register_op("_while_loop")
class WhileLoop(ControlFlowOp):
    """``while cond(vars) and step < max_iterations: outs, vars = func(vars)``."""

    attrs = {"num_args": Attr(to_int), "num_outputs": Attr(to_int),
             "num_out_data": Attr(to_int), "max_iterations": Attr(to_int),
             **_locs_attrs("cond_input_locs", "func_input_locs", "func_var_locs")}
    num_bodies = 2

    def validate(self, p):
        if p.max_iterations < 0:
            raise OpError(f"operator _while_loop (node {p.node_ref}): max_iterations must "
                          f"be >= 0, got {p.max_iterations}")

    def body_feeds(self, p):
        return [list(p.cond_input_locs), list(p.func_input_locs)]

    def invariant_inputs(self, p, k):
        carried = set(self.var_inputs(p))
        return {loc for loc, i in enumerate(self.body_feeds(p)[k]) if i not in carried}

    def var_inputs(self, p) -> list[int]:
        """The node input holding each loop variable (loop-variable order)."""
        return [p.func_input_locs[loc] for loc in p.func_var_locs]

    def _infer(self, p, kind, ins, outs):
        self.validate_bodies(p)
        no = p.num_out_data
        var_in = self.var_inputs(p)
        for _ in range(3):
            # loop variables keep their shape and dtype from step to step
            for j, i in enumerate(var_in):
                ins[i] = outs[no + j] = _merge(p, kind, ins[i], outs[no + j],
                                               f"loop variable {j}")
            func_feeds = self.body_feeds(p)[1]
            body_out = [_step_of(kind, o) for o in outs[:no]] + [ins[i] for i in var_in]
            b_in, b_out = self.infer_body(p, 1, kind, [ins[i] for i in func_feeds], body_out)
            for loc, i in enumerate(func_feeds):
                ins[i] = _merge(p, kind, ins[i], b_in[loc], f"input {i}")
            for j in range(no):
                outs[j] = _merge(p, kind, outs[j], _stacked(kind, p.max_iterations, b_out[j]),
                                 f"output {j}")
            for j, i in enumerate(var_in):
                ins[i] = outs[no + j] = _merge(p, kind, ins[i], b_out[no + j],
                                               f"loop variable {j}")
            cond_feeds = self.body_feeds(p)[0]
            c_in, _ = self.infer_body(p, 0, kind, [ins[i] for i in cond_feeds], [None])
            for loc, i in enumerate(cond_feeds):
                ins[i] = _merge(p, kind, ins[i], c_in[loc], f"input {i}")
        return ins, outs

    def run(self, p, inputs, call, out_shapes, out_dtypes):
        no = p.num_out_data
        cond_feeds, func_feeds = self.body_feeds(p)
        var_in = self.var_inputs(p)
        vals = list(inputs)
        rows: list[list[np.ndarray]] = [[] for _ in range(no)]
        for _ in range(p.max_iterations):
            if not _truthy(p, call(0, [vals[i] for i in cond_feeds])[0]):
                break
            res = list(call(1, [vals[i] for i in func_feeds]))
            for j in range(no):
                rows[j].append(np.asarray(res[j]))
            for j, i in enumerate(var_in):
                vals[i] = np.asarray(res[no + j])
        stacked = []
        for j in range(no):
            # rows past the last step: zeros (MXNet leaves them uninitialised)
            out = np.zeros(out_shapes[j], out_dtypes[j] or (rows[j][0].dtype if rows[j]
                                                            else np.float32))
            if rows[j]:
                out[:len(rows[j])] = np.stack(rows[j])
            stacked.append(out)
        return stacked + [vals[i] for i in var_in]


# ---------------------------------------------------------------------------
# _cond
# ---------------------------------------------------------------------------
@register_op("_cond")
class Cond(ControlFlowOp):
    """``then(...) if cond(...) else else(...)``; both branches give the same outputs."""

    attrs = {"num_args": Attr(to_int), "num_outputs": Attr(to_int),
             **_locs_attrs("cond_input_locs", "then_input_locs", "else_input_locs")}
    num_bodies = 3

    def body_feeds(self, p):
        return [list(p.cond_input_locs), list(p.then_input_locs), list(p.else_input_locs)]

    def _infer(self, p, kind, ins, outs):
        self.validate_bodies(p)
        feeds = self.body_feeds(p)
        for _ in range(2):
            for k in (1, 2):
                b_in, b_out = self.infer_body(p, k, kind, [ins[i] for i in feeds[k]], outs)
                for loc, i in enumerate(feeds[k]):
                    ins[i] = _merge(p, kind, ins[i], b_in[loc], f"input {i}")
                what = "then" if k == 1 else "else"
                outs = [_merge(p, kind, o, b, f"output {j} of the {what} branch")
                        for j, (o, b) in enumerate(zip(outs, b_out))]
            c_in, _ = self.infer_body(p, 0, kind, [ins[i] for i in feeds[0]], [None])
            for loc, i in enumerate(feeds[0]):
                ins[i] = _merge(p, kind, ins[i], c_in[loc], f"input {i}")
        return ins, outs

    def run(self, p, inputs, call, out_shapes, out_dtypes):
        feeds = self.body_feeds(p)
        branch = 1 if _truthy(p, call(0, [inputs[i] for i in feeds[0]])[0]) else 2
        return [np.asarray(x) for x in call(branch, [inputs[i] for i in feeds[branch]])]
