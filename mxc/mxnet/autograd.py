"""``mx.autograd``: record imperative operator calls and differentiate them.

Inside ``with mx.autograd.record():`` every ``mx.nd`` call whose inputs need a
gradient (arrays given ``attach_grad()``, or results of recorded calls) is
kept on a tape: the operator's node, its input arrays and its outputs.
``y.backward(head_grad)`` walks the tape backwards with each node's gradient
(:mod:`mxc.mxnet._gradients`) and writes ``x.grad`` of the marked arrays
(``grad_req='write'`` overwrites, ``'add'`` accumulates).  Unless
``retain_graph=True`` the tape is then freed, releasing the nodes and with
them the states of stateful operators, as MXNet does.
"""

from __future__ import annotations

import threading

import numpy as np

from .base import MXNetError, not_supported

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training",
           "set_recording", "set_training", "backward", "mark_variables", "grad"]

_state = threading.local()


def _flag(name: str) -> bool:
    return getattr(_state, name, False)


def is_recording() -> bool:
    return _flag("recording")


def is_training() -> bool:
    return _flag("training")


def set_recording(is_record: bool) -> bool:
    prev = is_recording()
    _state.recording = bool(is_record)
    return prev


def set_training(train: bool) -> bool:
    prev = is_training()
    _state.training = bool(train)
    return prev


class _Scope:
    def __init__(self, recording: bool | None, training: bool | None):
        self._want = (recording, training)
        self._prev: tuple[bool, bool] | None = None

    def __enter__(self):
        self._prev = (is_recording(), is_training())
        rec, train = self._want
        if rec is not None:
            set_recording(rec)
        if train is not None:
            set_training(train)
        return self

    def __exit__(self, *exc):
        set_recording(self._prev[0])
        set_training(self._prev[1])


def record(train_mode: bool = True) -> _Scope:
    return _Scope(True, train_mode)


def pause(train_mode: bool = False) -> _Scope:
    return _Scope(False, train_mode)


def train_mode() -> _Scope:
    return _Scope(None, True)


def predict_mode() -> _Scope:
    return _Scope(None, False)


class _Record:
    """One recorded operator call."""

    __slots__ = ("node", "inputs", "in_values", "out_values", "freed")

    def __init__(self, node, inputs, in_values, out_values):
        self.node = node
        self.inputs = list(inputs)
        self.in_values = list(in_values)
        self.out_values = list(out_values)
        self.freed = False


def _marked(a) -> bool:
    return a._grad is not None and a._grad_req != "null"


def _needs_grad(a) -> bool:
    return _marked(a) or a._ag is not None


def record_op(node, arrays, values, results, outs) -> None:
    """Called by every imperative operator call; keeps it if it must be differentiated."""
    if not is_recording() or not any(_needs_grad(a) for a in arrays):
        return
    rec = _Record(node, arrays, values, outs)
    for i, r in enumerate(results):
        r._ag = (rec, i)


def mark_variables(variables, gradients, grad_reqs="write") -> None:
    """Mark arrays as variables whose gradients go into *gradients*."""
    if not isinstance(variables, (list, tuple)):
        variables, gradients = [variables], [gradients]
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    for v, g, r in zip(variables, gradients, reqs):
        v._grad, v._grad_req, v._ag = g, r, None


def _tape(heads) -> list[_Record]:
    """Records reachable from *heads*, in topological (forward) order."""
    order: list[_Record] = []
    seen: set[int] = set()
    stack = [(h._ag[0], False) for h in heads if h._ag is not None]
    while stack:
        rec, done = stack.pop()
        if done:
            order.append(rec)
            continue
        if id(rec) in seen:
            continue
        seen.add(id(rec))
        if rec.freed:
            raise MXNetError("Check failed: the graph of a recorded operation has been freed by an "
                             "earlier backward(); pass retain_graph=True to backward twice")
        stack.append((rec, True))
        stack.extend((a._ag[0], False) for a in rec.inputs
                     if a._ag is not None and id(a._ag[0]) not in seen)
    return order


def backward(heads, head_grads=None, retain_graph: bool = False,
             train_mode: bool = True) -> None:
    """Differentiate *heads* (NDArrays computed while recording) into the marked arrays."""
    from ._gradients import node_gradients
    heads = list(heads) if isinstance(heads, (list, tuple)) else [heads]
    if head_grads is None:
        head_grads = [None] * len(heads)
    elif not isinstance(head_grads, (list, tuple)):
        head_grads = [head_grads]
    if not any(_needs_grad(h) for h in heads):
        raise MXNetError("Check failed: there are no inputs in computation graph that require "
                         "gradients (call attach_grad() and compute inside autograd.record())")
    pending: dict[int, list] = {}
    var_grads: dict[int, tuple] = {}

    def add(array, grad):
        if array._ag is not None:
            rec, idx = array._ag
            slots = pending.setdefault(id(rec), [None] * len(rec.out_values))
            slots[idx] = grad if slots[idx] is None else slots[idx] + grad
        elif _marked(array):
            prev = var_grads.get(id(array))
            var_grads[id(array)] = (array, grad if prev is None else prev[1] + grad)

    for h, g in zip(heads, head_grads):
        value = np.ones(h.shape, dtype=h._data.dtype) if g is None else np.asarray(g._data)
        add(h, value)
    tape = _tape(heads)
    for rec in reversed(tape):
        slots = pending.pop(id(rec), None)
        if slots is None:
            continue
        outs = [np.zeros(np.shape(o), dtype=o.dtype) if g is None else g
                for g, o in zip(slots, rec.out_values)]
        for a, g in zip(rec.inputs, node_gradients(rec.node, outs, rec.in_values,
                                                   rec.out_values)):
            if g is not None and _needs_grad(a):
                add(a, g)
    for array, g in var_grads.values():
        target = array._grad._data
        if array._grad_req == "add":
            target += g.astype(target.dtype, copy=False)
        else:
            target[...] = g
    if not retain_graph:
        for rec in tape:
            rec.freed = True
            rec.node = None
            rec.in_values = rec.out_values = []
        for h in heads:
            h._ag = None


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    raise not_supported("autograd.grad (use backward() and read .grad)")
