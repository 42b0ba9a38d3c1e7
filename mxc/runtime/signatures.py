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

Shapes and dtypes of the arguments are checked by the compiled functions
themselves on every call.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Iterable

from ..errors import ArtifactError
from .plan import HostStep, LoadStep, Plan, RegionStep

__all__ = ["result_counts", "check_call_sites", "check_session_functions"]

log = logging.getLogger(__name__)

_HEADER = re.compile(r"@([^\s:]+):\s*$")
_TUPLE = re.compile(r"call\s+vm\.builtin\.make_tuple\s+in:(.*?)dst:\s*(%\w+)")
_RET = re.compile(r"ret\s+(%\w+)")


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


def check_session_functions(plan: Plan, module: Any, vm: Any, source: str) -> None:
    """:func:`check_call_sites` with the VM's arity and the executable's listing."""
    try:
        listing = module["as_text"]()
    except Exception:  # noqa: BLE001 - an executable without a listing: arity only
        listing = None
    check_call_sites(plan, vm["get_function_arity"], listing, source)
