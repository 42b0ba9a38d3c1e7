"""Every single-operator case of the wave-2 corpus (``corpus/wave2/ops``), computed by MXNet 1.9.1.

The same checks as ``test_corpus_ops.py`` (list_*, shape inference from the
data inputs alone, dtypes, reference outputs within the case tolerance), plus
the wave-2 rules from the corpus README:

* ``np_shape`` cases are read under NumPy shape semantics (the symbol carries
  ``is_np_shape``; ``[]`` is a real 0-d shape, not "unknown");
* ``random`` cases are checked by their ``random_check`` (shape, dtype,
  finiteness, support, mean within ``mean_tol`` of the analytical mean, and
  the exact invariants), never against the stored draw.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import op_cases, require_corpus
from oracle import assert_close
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.frontend.symbol_json import load_json

SPLIT = "wave2/ops"
CASES = {c["id"]: c for c in op_cases(SPLIT)}
IDS = list(CASES) or ["no-corpus"]


def _case(case_id):
    if case_id == "no-corpus":
        require_corpus(SPLIT)
    return CASES[case_id]


def _shape(value):
    return list(value) if value is not None else None


def _arg_shape_matches(got, want, given) -> bool:
    """MXNet's recorded argument shape, with two NumPy-mode quirks of its inference.

    ``null``: MXNet could not infer it (``hstack``/``dstack`` leave their
    inputs unknown) -- mxc may know more.  A shape other than the one MXNet was
    *given*, with the same element count: its shape function wrote its
    internal view of the input back (``concatenate(axis=None)`` records the
    inputs flattened, ``insert`` the values padded to the array's rank) --
    the given shape is the input's real shape.
    """
    if want is None or got == want:
        return True
    return given is not None and got == given and want != given and \
        int(np.prod(want)) == int(np.prod(given))


def _check_inference(graph, case):
    inf = case["infer"]
    shapes = infer_shapes(graph, {k: tuple(v) for k, v in inf["given"].items()})
    for n in graph.argument_nodes():
        got = _shape(shapes.get((n, 0)))
        assert _arg_shape_matches(got, inf["arg_shapes"].get(n.name), inf["given"].get(n.name)), \
            f"arg {n.name}: {got} vs MXNet's {inf['arg_shapes'].get(n.name)}"
    for n in graph.aux_nodes():
        assert _shape(shapes.get((n, 0))) == inf["aux_shapes"].get(n.name), f"aux {n.name}"
    for e, want, spec in zip(graph.outputs, inf["out_shapes"], case["outputs"]):
        got = _shape(shapes.get(e.key))
        if want is None and not inf.get("complete", True):
            # MXNet could not infer it (control flow, data-dependent shapes): mxc may know
            # more, but never something the computed output contradicts
            assert got is None or _compatible(got, spec["shape"]), \
                f"output shape {got} vs computed {spec['shape']}"
        else:
            assert got == want, "output shape"
    dtypes = infer_types(graph, {i["name"]: i["dtype"] for i in case["inputs"]})
    for e, want in zip(graph.outputs, case["outputs"]):
        assert dtypes.get(e.key) == want["dtype"], "output dtype"


def _compatible(partial, shape) -> bool:
    """A partially known shape (None extents) that *shape* fills in."""
    return len(partial) == len(shape) and all(p is None or p == d for p, d in zip(partial, shape))


# Cases whose stored output MXNet 1.9.1 got wrong: checked against an independent
# oracle instead (docs/deployment-formats.md says what mxc does there and why).
MXNET_WRONG = {
    # under NumPy shape semantics MXNet's symbolic executor hands back the dynamic-shape
    # output as an empty (0,) array; x[m] with m = [T, F, T, T] has 3 rows
    "_contrib_boolean_mask__3": lambda f: [f["x"][f["m"]]],
}


def _rows_sorted(a):
    flat = a.reshape(a.shape[0], -1)
    return flat[np.lexsort(flat.T[::-1])]


def _check_exact(rule: str, got: np.ndarray, feeds: dict, case: dict):
    """The exact invariants a random case states in ``random_check.exact``."""
    data = next(iter(feeds.values())) if feeds else None
    if rule == "permutation_of_input_axis0":
        np.testing.assert_array_equal(_rows_sorted(got), _rows_sorted(data))
    elif rule.startswith("output equals the input or the input flipped along"):
        axis = {"W": -2, "H": -3}[rule.rsplit(" ", 1)[1]]
        assert np.array_equal(got, data) or np.array_equal(got, np.flip(data, axis)), rule
    elif rule.startswith("every row sums to n="):
        n = int(rule.rsplit("=", 1)[1])
        assert (got.sum(axis=-1) == n).all(), rule
    elif rule.startswith("output = input * f for one f in [min_factor, max_factor]"):
        lo, hi = float(case["attrs"]["min_factor"]), float(case["attrs"]["max_factor"])
        x = data.astype(np.float64)
        nz = x != 0
        assert nz.any(), "input has no non-zero value to recover the factor from"
        f = got.astype(np.float64)[nz] / x[nz]
        if got.dtype == np.uint8:  # rounded and clipped codes: recover f from the largest value
            i = np.argmax(x)
            f0 = float(got.reshape(-1)[i]) / float(x.reshape(-1)[i])
            want = np.clip(np.round(x * f0), 0, 255)
            assert np.abs(want - got).max() <= 1 and lo - 0.02 <= f0 <= hi + 0.02, rule
        else:
            assert np.allclose(f, f[0], rtol=1e-5) and lo - 1e-6 <= f[0] <= hi + 1e-6, rule
    else:
        raise AssertionError(f"unknown exact invariant {rule!r}: teach the test to check it")


def _check_row_means(values: np.ndarray, spec: dict):
    """``_sample_*`` cases give one expected mean/std per parameter row (no ``mean_tol``):
    each row's sample mean must lie within 6 standard errors of its analytical mean."""
    means, stds = spec["expected_mean"], spec["expected_std"]
    rows = values.reshape(len(means), -1)
    for i, (row, mean, std) in enumerate(zip(rows, means, stds)):
        tol = 6 * std / np.sqrt(row.size) + 1e-6
        assert abs(row.mean() - mean) <= tol, f"row {i}: mean {row.mean()} vs {mean} ± {tol}"


def _check_random(outs, feeds, case):
    check = case["random_check"]
    assert len(outs) == len(check["outputs"])
    for got, spec in zip(outs, check["outputs"]):
        assert list(got.shape) == spec["shape"] and str(got.dtype) == spec["dtype"]
        values = got.astype(np.float64)
        assert np.isfinite(values).all(), "non-finite sample"
        if "support" in spec:
            lo, hi = spec["support"]
            assert values.min() >= lo and values.max() <= hi, f"sample outside {spec['support']}"
        if isinstance(spec.get("expected_mean"), list):
            _check_row_means(values, spec)
        elif spec.get("expected_mean") is not None and spec.get("mean_tol") is not None:
            assert abs(values.mean() - spec["expected_mean"]) <= spec["mean_tol"], \
                f"mean {values.mean()} vs expected {spec['expected_mean']} ± {spec['mean_tol']}"
        kind = spec.get("kind")
        if kind == "integer_valued":
            assert np.array_equal(values, np.round(values)), "sample is not integer valued"
        elif kind == "unique_per_row_int64":
            assert got.dtype == np.int64
            rows = got.reshape(-1, got.shape[-1]) if got.ndim > 1 else got[None]
            assert all(len(set(r.tolist())) == len(r) for r in rows), "repeated values in a row"
    if check.get("exact"):
        _check_exact(check["exact"], outs[0], feeds, case)


def _numpy_dynamic(case, feeds):
    """NumPy's own answer for a data-dependent output (the independent oracle)."""
    a = case["attrs"]
    x = next(iter(feeds.values()))
    op = case["op"]
    if op == "_npi_delete":
        axis = None if a.get("axis", "None") == "None" else int(a["axis"])
        return np.delete(x, int(a["int_ind"]), axis=axis)
    if op == "_npi_bincount":
        return np.bincount(x, minlength=int(a.get("minlength", 0))).astype(np.int64)
    if op == "_npi_unique":
        return np.unique(x)
    if op == "_npx_nonzero":
        return np.transpose(np.nonzero(x)).astype(np.int64)
    if op == "_contrib_boolean_mask":
        data, mask = feeds.values()
        return data[mask != 0]
    raise AssertionError(f"no NumPy oracle for the data-dependent output of {op}")


def _mxnet_left_dynamic_output_empty(case, i, want) -> bool:
    """MXNet 1.9.1's symbolic executor does not write a data-dependent output under
    NumPy shape semantics: it returns an empty array (the shape inference it
    records for that output is null, the inputs are not empty)."""
    return bool(case.get("np_shape")) and case["infer"]["out_shapes"][i] is None and \
        want.size == 0 and all(np.prod(i_["shape"]) > 0 for i_ in case["inputs"])


@pytest.mark.parametrize("case_id", IDS)
def test_wave2_op_case(case_id):
    case = _case(case_id)
    root = require_corpus(SPLIT)
    graph = load_json(case["symbol"], source=f"{case_id}.json")
    assert graph.list_arguments() == case["list_arguments"]
    assert graph.list_auxiliary_states() == case["list_auxiliary_states"]
    assert graph.list_outputs() == case["list_outputs"]

    data = np.load(root / "data" / f"{case_id}.npz")
    feeds = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]}
    if case_id in MXNET_WRONG:
        want = MXNET_WRONG[case_id](feeds)
        case = {**case, "outputs": [{"shape": list(w.shape), "dtype": w.dtype.name}
                                    for w in want]}
        data = {**{k: data[k] for k in data.files},
                **{f"out__{i}": w for i, w in enumerate(want)}}
    _check_inference(graph, case)
    outs = run_graph(graph, feeds)
    assert len(outs) == len(case["outputs"])
    if case.get("random"):
        _check_random(outs, feeds, case)
        return
    tols = case.get("output_tols")
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        if spec.get("ignore"):
            continue
        rtol, atol = tols[i] if tols else (case["rtol"], case["atol"])
        want = data[f"out__{i}"]
        if _mxnet_left_dynamic_output_empty(case, i, want):
            want = _numpy_dynamic(case, feeds)
        assert_close(np.asarray(got), want, rtol, atol, f"{case_id} output {i}")
