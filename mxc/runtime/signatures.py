"""The runtime graph checked against the compiled functions it calls, at load time.

``graph.json`` says which library function each region (and load step, and
control-flow body) calls, with which slots, and where its results go; the
library says what each function really takes and returns.  Validation of
``graph.json`` alone (:mod:`.validate`) cannot see a step that passes the
wrong number of arguments or lists more -- or fewer -- results than its
function returns: the first makes every run fail deep inside TVM, the second
an ``IndexError`` after the model ran, the third silently drops results.  So
when a session is made, every call site is compared with the function's
signature as the Relax VM executable records it:

* the number of parameters: the VM's ``get_function_arity``;
* the number of results: the ``make_tuple`` the function returns, read from
  the executable's bytecode listing (``as_text``).  A function whose listing
  does not show it (another bytecode form) is not checked for results.

* the shapes of its parameters: the ``match_shape`` checks at the top of the
  function (dimensions it asserts equal to a constant), compared with the
  shapes ``graph.json`` declares for the model inputs and with the stored
  parameters a call passes (a graph rewritten to feed another shape is refused
  at load, not by the first run).

Dtypes of the arguments are checked by the compiled functions on every call.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Iterable, Mapping

from ..errors import ArtifactError
from .plan import HostStep, LoadStep, Plan, RegionStep

__all__ = ["result_counts", "param_shapes", "check_call_sites", "check_shapes",
           "check_session_functions"]

log = logging.getLogger(__name__)

_HEADER = re.compile(r"@([^\s:]+):\s*$")
_TUPLE = re.compile(r"call\s+vm\.builtin\.make_tuple\s+in:(.*?)dst:\s*(%\w+)")
_RET = re.compile(r"ret\s+(%\w+)")
_MATCH = re.compile(r"call\s+vm\.builtin\.match_shape\s+in:\s*%(\d+),\s*%\w+,\s*i(\d+),(.*?)"
                    r"dst:")
#: match_shape's code for "this dimension equals the constant that follows"
_ASSERT_EQUAL_TO_IMM = 0


def param_shapes(listing: str) -> dict[str, dict[int, tuple]]:
    """``{function: {parameter: shape}}`` from the ``match_shape`` checks of *listing*;
    a dimension that is not a constant is None."""
    out: dict[str, dict[int, tuple]] = {}
    current = None
    for line in listing.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(1)
            continue
        m = _MATCH.search(line) if current is not None else None
        if m is None:
            continue
        reg, ndim = int(m.group(1)), int(m.group(2))
        codes = [a.strip() for a in m.group(3).split(",") if a.strip()]
        dims = []
        for k in range(ndim):
            pair = codes[2 * k:2 * k + 2]
            if len(pair) == 2 and pair[0] == f"i{_ASSERT_EQUAL_TO_IMM}" and \
                    pair[1].lstrip("-").lstrip("i").isdigit():
                dims.append(int(pair[1][1:]))
            else:
                dims.append(None)
        out.setdefault(current, {}).setdefault(reg, tuple(dims))
    return out


def result_counts(listing: str) -> dict[str, int]:
    """``{function: number of results}`` for every function of the VM bytecode *listing*
    that returns a tuple it made (the form the Relax VM compiles a tuple return to)."""
    counts: dict[str, int] = {}
    current, tuples = None, {}
    for line in listing.splitlines():
        header = _HEADER.match(line)
        if header:
            current, tuples = header.group(1), {}
            continue
        if current is None:
            continue
        made = _TUPLE.search(line)
        if made:
            args = [a for a in made.group(1).split(",") if a.strip()]
            tuples[made.group(2)] = len(args)
            continue
        ret = _RET.search(line)
        if ret and ret.group(1) in tuples:
            counts[current] = tuples[ret.group(1)]
    return counts


def _call_sites(plan: Plan) -> Iterable[tuple[str, str, int, int | None]]:
    """``(where, function, number of arguments, number of results or None)``."""
    for i, step in enumerate(plan.steps):
        where = f"steps[{i}] ({step.name!r})"
        if isinstance(step, (RegionStep, LoadStep)):
            yield where, step.function, len(step.inputs), len(step.outputs)
        elif isinstance(step, HostStep):
            for k, body in enumerate(step.bodies):
                if body is not None:
                    yield f"{where}.bodies[{k}]", body.function, len(body.inputs), None


def _fits(want: tuple, have: tuple) -> bool:
    return len(want) == len(have) and all(w is None or w == h for w, h in zip(want, have))


def check_shapes(plan: Plan, listing: str | None, slot_shapes: dict[int, tuple],
                 source: str) -> None:
    """Raise :class:`ArtifactError` where a region or load step passes a slot of known
    shape (*slot_shapes*: model inputs, stored parameters) to a parameter whose
    ``match_shape`` asserts another shape."""
    shapes = param_shapes(listing) if listing else {}
    for i, step in enumerate(plan.steps):
        if not isinstance(step, (RegionStep, LoadStep)):
            continue
        expected = shapes.get(step.function, {})
        for k, slot in enumerate(step.inputs):
            want, have = expected.get(k), slot_shapes.get(slot)
            if want is not None and have is not None and not _fits(want, have):
                shown = tuple("?" if d is None else d for d in want)
                raise ArtifactError(f"{source}: graph.json: steps[{i}] ({step.name!r}) passes "
                                    f"slot {slot} of shape {tuple(have)} as argument {k} of "
                                    f"{step.function!r}, which takes shape {shown}; the "
                                    f"artifact is corrupt or was modified")


def check_call_sites(plan: Plan, arity: Callable[[str], int], listing: str | None,
                     source: str) -> None:
    """Raise :class:`ArtifactError` where *plan* calls a function with another number of
    arguments than *arity(name)* says, or expects another number of results than the
    function returns (*listing*: the executable's ``as_text``, None when unavailable)."""
    results = result_counts(listing) if listing else {}
    for where, name, n_args, n_results in _call_sites(plan):
        try:
            want = int(arity(name))
        except Exception as exc:  # noqa: BLE001 - TVM's error for an unknown function
            raise ArtifactError(f"{source}: graph.json: {where} calls {name!r}, which the "
                                f"library does not define ({type(exc).__name__}); the artifact "
                                f"is corrupt or was modified") from None
        if want != n_args:
            raise ArtifactError(f"{source}: graph.json: {where} passes {n_args} argument(s) to "
                                f"{name!r}, which takes {want}; the artifact is corrupt or "
                                f"was modified")
        got = results.get(name)
        if n_results is not None and got is not None and got != n_results:
            raise ArtifactError(f"{source}: graph.json: {where} lists {n_results} result(s) "
                                f"of {name!r}, which returns {got}; the artifact is corrupt "
                                f"or was modified")
        if n_results is not None and got is None:
            log.debug("%s: the result count of %s is not in the listing; unchecked", source,
                      name)


def check_session_functions(plan: Plan, module: Any, vm: Any, source: str,
                            params: Mapping[str, Any] | None = None) -> None:
    """:func:`check_call_sites` and :func:`check_shapes` with the VM's arity, the
    executable's listing and the shapes of the model inputs and stored *params*."""
    try:
        listing = module["as_text"]()
    except Exception:  # noqa: BLE001 - an executable without a listing: arity only
        listing = None
    check_call_sites(plan, vm["get_function_arity"], listing, source)
    slot_shapes = {i.slot: tuple(i.shape) for i in plan.inputs}
    for p in plan.params:
        if params is not None and p.name in params:
            slot_shapes[p.slot] = tuple(getattr(params[p.name], "shape", ()))
    check_shapes(plan, listing, slot_shapes, source)
