"""Upgrade symbol graphs written by older MXNet versions to the 1.9.1 dialect.

MXNet 1.x loads every older symbol file by running a list of upgrade steps
after parsing, each gated on the file's ``attrs.mxnet_version`` (a file
without it is taken to be from MXNet 0.8.0).  A step runs when its version is
*greater* than the file's.  This module does the same, in the same order, on
an mxc :class:`~mxc.compiler.ir.Graph` (``symbol_json`` calls
:func:`upgrade_graph` on the top-level graph only: MXNet never upgrades nested
subgraphs, which only exist in files far newer than any upgrade).

=============  =========================================================
gate (<)       step
=============  =========================================================
1.9.1 (10901)  :func:`fix_hidden_keys`: ``lr_mult``, ``wd_mult``,
               ``ctx_group``, ``force_mirroring``, ``mirror_stage`` become
               ``__lr_mult__`` ...; ``<arg>_lr_mult`` on an operator moves to
               its input variable ``<arg>`` as ``__lr_mult__``.
0.9.0 (900)    :func:`add_missing_inputs`: auxiliary states were not stored
               before 0.9 (BatchNorm had 3 inputs); append variables
               ``<node>_<input name>`` carrying a copy of the node's
               attributes.
0.9.4 (904)    :func:`set_input_initializers`: ``__init__`` defaults on input
               variables of ops that declare them (BatchNorm moving mean and
               variance, PReLU slope, bilinear UpSampling weight).
0.9.5 (905)    :func:`fix_argminmax_axis`: ``argmin``/``argmax`` with
               ``axis="-1"`` meant "flatten" before ``axis`` became optional;
               the attribute is dropped.
=============  =========================================================

The JSON-level differences of old files (``attr``/``param`` instead of
``attrs``, ``[nid, index]`` entry pairs, ``backward_source_id``) are absorbed
by the reader in ``symbol_json`` and need no version gate.

Input names come from the op registry; for a few ops that appear in old
models a built-in table answers while those ops are not registered.
"""

from __future__ import annotations

from typing import Callable

from ..compiler.ir.graph import Graph
from ..compiler.ir.node import Entry, Node

__all__ = ["MXNET_VERSION", "LEGACY_VERSION", "HIDDEN_KEYS", "make_version", "version_string",
           "upgrade_graph", "fix_hidden_keys", "add_missing_inputs", "set_input_initializers",
           "fix_argminmax_axis", "input_names"]


def make_version(major: int, minor: int, patch: int) -> int:
    """MXNet's integer version (``MXNET_MAKE_VERSION``): 1.9.1 -> 10901."""
    return major * 10000 + minor * 100 + patch


def version_string(version: int) -> str:
    return f"{version // 10000}.{(version // 100) % 100}.{version % 100}"


MXNET_VERSION = make_version(1, 9, 1)
"""The dialect mxc reads into and writes."""

LEGACY_VERSION = make_version(0, 8, 0)
"""The version MXNet assumes for a file without ``mxnet_version``."""

HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")
"""Attribute names MXNet turns into ``__name__`` when upgrading (its kHiddenKeys)."""


# ---------------------------------------------------------------------------
# input names: registry first, then a small table for ops of old models
# ---------------------------------------------------------------------------
def _flag(attrs: dict[str, str], key: str, default: bool) -> bool:
    v = attrs.get(key)
    if v is None:
        return default
    return v.strip().strip("'\"").lower() in ("true", "1")


def _with_bias(no_bias_default: bool) -> Callable[[dict[str, str]], list[str]]:
    def names(attrs: dict[str, str]) -> list[str]:
        return ["data", "weight"] + ([] if _flag(attrs, "no_bias", no_bias_default) else ["bias"])
    return names


def _batch_norm(attrs: dict[str, str]) -> list[str]:
    return ["data", "gamma", "beta", "moving_mean", "moving_var"]


def _leaky_relu(attrs: dict[str, str]) -> list[str]:
    act = attrs.get("act_type", "leaky").strip().strip("'\"")
    return ["data", "gamma"] if act == "prelu" else ["data"]


# Only consulted for ops the registry does not (yet) define.  MXNet lists
# auxiliary states after the arguments, as here.
_FALLBACK_INPUT_NAMES: dict[str, Callable[[dict[str, str]], list[str]]] = {
    "BatchNorm": _batch_norm,
    "BatchNorm_v1": _batch_norm,
    "CuDNNBatchNorm": _batch_norm,
    "_contrib_SyncBatchNorm": _batch_norm,
    "Convolution": _with_bias(False),
    "Convolution_v1": _with_bias(False),
    "FullyConnected": _with_bias(False),
    "Deconvolution": _with_bias(True),
    "Embedding": lambda attrs: ["data", "weight"],
    "LeakyReLU": _leaky_relu,
}


def _opdef(op: str):
    from ..compiler.ops.registry import get_op, has_op
    try:
        return get_op(op) if has_op(op) else None
    except Exception:  # registry not importable / broken op module: use the table
        return None


def input_names(node: Node) -> list[str] | None:
    """Names of all of *node*'s inputs (arguments then aux), or None if unknown.

    Uses the registered op definition (with the node's current attributes);
    falls back to a built-in table for a few ops of old models.
    """
    if node.op is None:
        return None
    opdef = _opdef(node.op)
    if opdef is not None:
        try:
            return list(opdef.input_names(node.params))
        except Exception:  # attributes that do not parse: MXNet would fail here too
            return None
    table = _FALLBACK_INPUT_NAMES.get(node.op)
    return table(node.attrs) if table is not None else None


def _num_inputs(node: Node, names: list[str]) -> int | None:
    opdef = _opdef(node.op) if node.op is not None else None
    if opdef is not None:
        try:
            return opdef.num_inputs(node.params)
        except Exception:
            return None
    return len(names)


# ---------------------------------------------------------------------------
# the steps
# ---------------------------------------------------------------------------
def _hidden_key_match(key: str, hidden: str) -> int:
    """Position of *hidden* in *key* as MXNet tests it (-1: no match).

    MXNet looks at the *last* occurrence: a key matches when that occurrence
    is at the start or at the very end of the key.
    """
    pos = key.rfind(hidden)
    if pos == 0 or (pos != -1 and pos == len(key) - len(hidden)):
        return pos
    return -1


def fix_hidden_keys(graph: Graph) -> None:
    """Rename hidden keys (``lr_mult`` -> ``__lr_mult__``), as UpgradeJSON_FixParsing."""
    for node in graph.topo_order():
        held: list[tuple[str, str]] = []
        for key in list(node.attrs):
            for hidden in HIDDEN_KEYS:
                if _hidden_key_match(key, hidden) != -1:
                    held.append((key, node.attrs.pop(key)))
                    break
        if not held:
            continue
        # MXNet parses the op's parameters with the held keys removed; the
        # input names must come from that state (before anything is put back)
        names: list[str] | None = None
        if node.op is not None and any(_hidden_key_match(k, h) > 1
                                       for k, _ in held for h in HIDDEN_KEYS):
            names = input_names(node)
        for key, value in held:
            placed = False
            for hidden in HIDDEN_KEYS:
                pos = key.rfind(hidden)
                if pos == 0 and len(key) == len(hidden):
                    node.attrs[f"__{hidden}__"] = value
                    placed = True
                    break
                if pos > 1 and pos == len(key) - len(hidden):
                    # "<arg>_lr_mult" on an operator: give it to input variable <arg>
                    if node.op is None or names is None:
                        break
                    arg = key[:pos - 1]
                    if arg in names:
                        idx = names.index(arg)
                        if idx < len(node.inputs) and node.inputs[idx].node.op is None:
                            node.inputs[idx].node.attrs[f"__{hidden}__"] = value
                            placed = True
                    break
            if not placed:
                node.attrs[key] = value


def add_missing_inputs(graph: Graph) -> None:
    """Append variables for inputs old files left out (pre-0.9 aux states).

    Each new variable is named ``<node name>_<input name>`` (just the input
    name for an unnamed node), gets a copy of the node's attributes (as
    MXNet's upgrade does) and is placed in :attr:`Graph.nodes` right before
    the node, so the list stays topologically sorted and MXNet's DFS order
    (inputs in order) is unchanged for everything else.
    """
    inserted: dict[int, list[Node]] = {}
    for node in graph.topo_order():
        if node.op is None:
            continue
        names = input_names(node)
        if names is None:
            continue
        want = _num_inputs(node, names)
        have = len(node.inputs)
        if want is None or have >= want or want > len(names):
            continue
        new_vars = []
        for i in range(have, want):
            var_name = f"{node.name}_{names[i]}" if node.name else names[i]
            new_vars.append(Node(None, var_name, dict(node.attrs)))
        node.inputs = list(node.inputs) + [Entry(v, 0, 0) for v in new_vars]
        inserted[id(node)] = new_vars
    if inserted:
        nodes: list[Node] = []
        for n in graph.nodes:
            nodes.extend(inserted.get(id(n), ()))
            nodes.append(n)
        graph.nodes = nodes


_ZERO = '["zero", {}]'
_ONE = '["one", {}]'
_BN_INIT = {3: _ZERO, 4: _ONE}

# MXNet's FSetInputVarAttrOnCompose hooks (1.x): input index -> __init__ value.
INPUT_INITIALIZERS: dict[str, dict[int, str]] = {
    "BatchNorm": _BN_INIT,
    "BatchNorm_v1": _BN_INIT,
    "CuDNNBatchNorm": _BN_INIT,
    "_contrib_SyncBatchNorm": _BN_INIT,
    "_contrib_BatchNormWithReLU": _BN_INIT,
    "LeakyReLU": {1: '["Constant", {"value": 0.25}]'},
    "UpSampling": {1: '["bilinear", {}]'},
}


def set_input_initializers(graph: Graph) -> None:
    """Give input variables their op's default ``__init__`` (UpgradeJSON_000903_000904)."""
    for node in graph.topo_order():
        table = INPUT_INITIALIZERS.get(node.op) if node.op is not None else None
        if not table:
            continue
        for i, e in enumerate(node.inputs):
            init = table.get(i)
            if init is not None and e.node.op is None and "__init__" not in e.node.attrs:
                e.node.attrs["__init__"] = init


def fix_argminmax_axis(graph: Graph) -> None:
    """Drop ``axis="-1"`` from argmin/argmax (UpgradeJSON_000904_000905)."""
    for node in graph.topo_order():
        if node.op in ("argmin", "argmax") and node.attrs.get("axis") == "-1":
            del node.attrs["axis"]


UPGRADES: list[tuple[int, Callable[[Graph], None]]] = [
    (MXNET_VERSION, fix_hidden_keys),
    (make_version(0, 9, 0), add_missing_inputs),
    (make_version(0, 9, 4), set_input_initializers),
    (make_version(0, 9, 5), fix_argminmax_axis),
]
"""(gate, step) in MXNet's order; a step runs when gate > the file's version."""


def upgrade_graph(graph: Graph, version: int) -> list[str]:
    """Run every step newer than *version* on *graph* (in place).

    Returns the names of the steps that ran.  Nothing runs for a file written
    by MXNet 1.9.1 or later (MXNet only warns about newer files).
    """
    ran = []
    for gate, step in UPGRADES:
        if gate > version:
            step(graph)
            ran.append(step.__name__)
    return ran
