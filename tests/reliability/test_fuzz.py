"""Issue 14 item 7 (and 28): property and mutation fuzzing of the input readers and surfaces.

Every input must either be accepted or rejected with an :class:`~mxc.errors.MxcError`;
anything else (a bare exception, RecursionError, a hang) fails the test with the input.
The budget is small by default (seconds); ``MXC_FUZZ_INPUTS=N`` raises the mutation
budget per target and ``MXC_FUZZ_EXAMPLES=N`` the hypothesis examples.  Long campaigns:
``nice python -m bench.fuzz --inputs 200000`` (see bench/fuzz.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import fuzz  # noqa: E402
from mxc.errors import MxcError  # noqa: E402

INPUTS = int(os.environ.get("MXC_FUZZ_INPUTS", "400"))
EXAMPLES = int(os.environ.get("MXC_FUZZ_EXAMPLES", "150"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One folder per module: the seed artifacts are compiled once."""
    return tmp_path_factory.mktemp("fuzz")


def _typed_or_ok(run, data: bytes) -> None:
    try:
        run(data)
    except MxcError:
        pass


# ---------------------------------------------------------------------------------------
# mutation fuzzing (the campaign's engine, small budget)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", fuzz.TARGETS)
def test_mutation_fuzzing_finds_no_unexpected_exception(target, workdir):
    if target == "artifact":
        pytest.importorskip("tvm")
    if target == "native_library" and shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("the native_library target builds its library with g++")
    if target == "serving":
        # looked up, never imported here: kserve's gRPC protos and tritonclient's (imported
        # by other tests of this process) register the same names in protobuf's one pool
        if importlib.util.find_spec("kserve") is None:
            pytest.skip("the serving target needs KServe (mxc[serve])")
        pytest.importorskip("tvm")
        return _serving_campaign(workdir)
    budget = max(INPUTS // 4, 50) if target in ("artifact", "symbol_json") else INPUTS
    res = fuzz.fuzz(target, inputs=budget, seed=int(os.environ.get("MXC_FUZZ_SEED", "0")),
                    per_input_s=30, workdir=workdir)
    assert res["inputs"] == budget
    assert res["unexpected"] == 0, json.dumps(res["distinct_unexpected"], indent=1)[:4000]
    import logging
    silenced = [name for name in ("mxc.library", "mxc.signing") if logging.getLogger(name).disabled]
    assert not silenced, f"the {target} target left logger(s) {silenced} disabled"


def _serving_campaign(workdir: Path) -> None:
    """The ``serving`` target in a child process: KServe's gRPC protos, which it imports,
    and tritonclient's (tests/serving) cannot share one process."""
    import subprocess
    out = workdir / "serving-out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "bench.fuzz", "--worker", "serving",
                           "--inputs", str(INPUTS), "--seed", os.environ.get("MXC_FUZZ_SEED", "0"),
                           "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    res = json.loads((out / "serving.json").read_text())
    assert res["inputs"] == INPUTS
    found = "\n".join(f"{u['count']:4d}  {sig}" for sig, u in res["distinct_unexpected"].items())
    assert res["unexpected"] == 0, f"answers outside the contract (requests in {out}):\n{found}"
    # the server shares the campaign's process: its memory stays flat over the inputs
    assert res["server_rss_end_mib"] - res["server_rss_start_mib"] < 64, res


# ---------------------------------------------------------------------------------------
# property tests (hypothesis): arbitrary and structured inputs
# ---------------------------------------------------------------------------------------
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                          st.floats(allow_nan=False, allow_infinity=False),
                          st.text(max_size=8))
_json = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=30)


@PROPERTY
@given(st.binary(max_size=400))
def test_symbol_json_reader_is_total_on_bytes(data):
    _typed_or_ok(fuzz.run_symbol_json, data)


@PROPERTY
@given(st.fixed_dictionaries({"nodes": st.lists(st.fixed_dictionaries(
    {"op": st.sampled_from(["null", "relu", "elemwise_add", "_CachedOp", "FullyConnected",
                            "bogus"]),
     "name": st.sampled_from(["x", "y", "data", "fc"]),
     "inputs": st.lists(st.lists(st.integers(-2, 4), min_size=0, max_size=3), max_size=3),
     "attrs": st.dictionaries(st.sampled_from(["__shape__", "num_hidden", "act_type"]),
                              st.sampled_from(["(2, 3)", "(-1, 3)", "(0, 2)", "4", "relu",
                                               "(1e9, 1e9)", "x"]), max_size=2)}),
    max_size=5),
    "arg_nodes": st.lists(st.integers(-1, 5), max_size=3),
    "heads": st.lists(st.lists(st.integers(-1, 5), min_size=3, max_size=3), max_size=2),
    "attrs": _json}))
def test_symbol_json_reader_is_total_on_structured_documents(doc):
    _typed_or_ok(fuzz.run_symbol_json, json.dumps(doc).encode())


@PROPERTY
@given(st.binary(max_size=600))
def test_params_reader_is_total(data):
    _typed_or_ok(fuzz.run_params, b"\x12\x01\x00\x00\x00\x00\x00\x00" + data)


@PROPERTY
@given(st.lists(st.sampled_from(list("%=(){}[],#@~\"\\ \n:xyz019")
                                + ["graph ", "var", "return", "attributes", "@main", "relu",
                                   "%x", "%y~1", " = ", "{\n"]), max_size=60))
def test_text_ir_parser_is_total(pieces):
    _typed_or_ok(fuzz.run_text_ir, "".join(pieces).encode())


@PROPERTY
@given(st.lists(st.sampled_from(list("abcdeilnoprstu-,{}=;\" \t'")
                                + ["dce", "fold-batchnorm", "partition", "backend=",
                                   "op_names=", "remove-dropout"]), max_size=30))
def test_pipeline_parser_is_total(pieces):
    _typed_or_ok(fuzz.run_pipeline, "".join(pieces).encode())


def test_artifact_reader_is_total_on_forged_members(workdir):
    pytest.importorskip("tvm")
    import random
    target = fuzz.ArtifactTarget(fuzz.artifact_seeds(workdir), workdir / "x.mxc",
                                 random.Random(3))

    @PROPERTY
    @given(st.sampled_from(["manifest.json", "graph.json"]), _json)
    def check(name, value):
        members = dict(target.members[0])
        doc = json.loads(members[name])
        if isinstance(doc, dict) and isinstance(value, dict):
            doc.update(value)  # replace whole fields with arbitrary JSON
        else:
            doc = value
        members[name] = json.dumps(doc).encode()
        _typed_or_ok(target, fuzz.forge(members, keep_manifest=(name == "manifest.json")))
    check()
