"""The :class:`CustomOp` base class: the hooks a Python custom operator overrides.

Split from :mod:`mxc.compiler.custom_op` (which re-exports everything here) so
the OpDef adapter (:mod:`.custom_opdef`) and the registration API can both
build on it without importing each other.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .ops.subgraph import run_nested

__all__ = ["CustomOp", "HOOKS"]

#: Every hook a :class:`CustomOp` may override (and ``register_custom_op`` accepts).
HOOKS = ("parse_attrs", "input_names", "infer_shape", "infer_type", "infer_storage_type",
         "mutate_inputs", "forward", "backward", "create_op_state")

_STYPE_FLAGS = {-1: "default", 0: "default", 1: "row_sparse", 2: "csr"}


# ---------------------------------------------------------------------------
# the user-facing base class
# ---------------------------------------------------------------------------
class CustomOp:
    """Base class of a custom operator; override the hooks your operator needs.

    Every hook receives ``attrs``, the node's attributes as a fresh
    ``dict[str, str]`` (custom operators have no schema: a builder keyword
    ``scale=2.5`` arrives as ``"2.5"``).  Shapes are tuples of ints, dtypes
    numpy dtype names (``"float32"``), arrays numpy arrays.

    *Subgraph operators* (``is_subgraph_op = True``, the operators custom
    partitioners turn regions into) get the node's nested
    :class:`~mxc.compiler.ir.Graph` as one more, last, argument of every hook
    (``forward(attrs, inputs, outputs, subgraph)``); their inputs, outputs
    and auxiliary states follow from the nested graph, so they need no
    ``parse_attrs``/``infer_shape``, and without ``forward`` or
    ``create_op_state`` they run the nested graph.

    Attributes
    ----------
    name:
        The registered operator name (set by :func:`register_custom_op`).
    extension:
        Who registered it: the extension library's name or the Python module
        of the class; error messages use it.
    is_subgraph_op:
        True for an operator whose nodes carry a nested graph.
    """

    name: str = ""
    extension: str = ""
    is_subgraph_op: bool = False
    #: True: every hook with a node (all but parse_attrs/mutate_inputs/input_names) also
    #: gets the node's parsed Params, last (``p.node.attrs`` has the hidden attributes).
    wants_params: bool = False

    # -- arity ---------------------------------------------------------------------
    def parse_attrs(self, attrs: dict[str, str]) -> tuple[int, int]:
        """Validate the attributes; return ``(num_inputs, num_outputs)``.

        Raise (``ValueError`` with a short reason) to reject an attribute
        value.  The counts may depend on attributes (``num_args``).
        """
        raise NotImplementedError

    def input_names(self, attrs: dict[str, str], num_inputs: int) -> list[str]:
        """Names of the inputs, used for auto-created variables (``<node>_<name>``).

        Default: ``["data"]`` for one input, ``data0, data1, ...`` otherwise.
        """
        return ["data"] if num_inputs == 1 else [f"data{i}" for i in range(num_inputs)]

    def mutate_inputs(self, attrs: dict[str, str]) -> list[int]:
        """Indices of inputs the operator writes to; they become auxiliary states.

        A graph lists the variables feeding them in
        ``list_auxiliary_states()`` instead of ``list_arguments()``, and
        ``forward`` receives them writable (every other input is read-only).
        """
        return []

    # -- inference -----------------------------------------------------------------
    def infer_shape(self, attrs: dict[str, str],
                    in_shapes: list[tuple[int, ...]]) -> tuple[list, list]:
        """Return ``(in_shapes, out_shapes)``: one shape per input and per output.

        Called once every input shape is known.  Return the input shapes
        unchanged unless the operator constrains them; an output shape may be
        None when it cannot be known yet.
        """
        raise NotImplementedError

    def infer_type(self, attrs: dict[str, str], in_types: list[str]) -> tuple[list, list]:
        """Return ``(in_types, out_types)`` as dtype names (or numpy dtypes).

        Called once every input dtype is known.  Not overriding it means
        what most operators want: every input and output has one dtype
        (inferred in both directions, as MXNet's ``ElemwiseType``).
        """
        num_outputs = self.parse_attrs(attrs)[1]
        first = in_types[0] if in_types else None
        return list(in_types), [first] * num_outputs

    def infer_storage_type(self, attrs: dict[str, str],
                           in_stypes: list[str]) -> tuple[list, list]:
        """Return ``(in_stypes, out_stypes)``; every entry must be ``"default"``.

        MXNet operators may declare sparse (``"row_sparse"``, ``"csr"``)
        inputs or outputs.  mxc compiles dense tensors only: the inputs are
        always ``"default"`` and any other storage type an operator asks for
        is reported as an :class:`~mxc.errors.ExtensionError` when the graph
        is inferred or run.
        """
        num_outputs = self.parse_attrs(attrs)[1]
        return list(in_stypes), ["default"] * num_outputs

    # -- semantics -----------------------------------------------------------------
    def forward(self, attrs: dict[str, str], inputs: list[np.ndarray],
                outputs: list[np.ndarray | None]):
        """Compute the outputs (inference).

        Parameters
        ----------
        inputs:
            One array per input; read-only except the ``mutate_inputs`` ones.
        outputs:
            Zero-filled arrays of the inferred output shapes and dtypes
            (None where inference could not tell).

        Returns
        -------
        list of arrays, one array, or None
            Either return the outputs, or fill *outputs* in place and return
            None (the C++ style).  Results are cast to the inferred dtypes.
        """
        raise NotImplementedError

    def backward(self, attrs: dict[str, str], out_grads: list[np.ndarray],
                 inputs: list[np.ndarray], outputs: list[np.ndarray]) -> list:
        """Return the gradient of each input (None for a non-differentiable one).

        mxc never calls it while running a graph (it executes inference);
        :func:`run_backward` does, for tests and custom training code.
        """
        raise NotImplementedError

    def create_op_state(self, attrs: dict[str, str]) -> Any:
        """Create the state of a *stateful* operator (MXNet ``createOpState``).

        Return an object with ``forward(inputs, outputs)`` (same contract as
        :meth:`forward`, without ``attrs``: keep what you need) and optionally
        ``backward(out_grads, inputs, outputs)``.  mxc creates one state per
        graph node, on its first run, and reuses it for every later run of
        that node (a new one if the node's attributes change); when this hook
        is overridden, ``forward`` is not used.
        """
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------
    @staticmethod
    def run_subgraph(subgraph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run a subgraph operator's nested graph on *inputs* (its ``list_inputs()`` order)."""
        return run_nested(subgraph, list(inputs))

    def __repr__(self) -> str:
        return f"<CustomOp {self.name or type(self).__name__!r} from {self.extension or '?'}>"


def _overrides(impl: CustomOp, hook: str) -> bool:
    if hook in getattr(impl, "__dict__", {}):
        return True
    return getattr(type(impl), hook, None) is not getattr(CustomOp, hook)
