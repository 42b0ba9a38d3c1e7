"""The runtime uses every core the process may use, by default, and honours explicit limits.

Oracles: the process's own affinity mask (``os.sched_getaffinity``), TVM's
``runtime.NumThreads`` queried in a fresh process, and hand-written cgroup
files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mxc.errors import ExecutionError
from mxc.runtime import threads

pytest.importorskip("tvm")

from runtime_helpers import REPO, compiled_mlp, mlp_input  # noqa: E402

_PROBE = """
import json, sys
import numpy as np
import tvm_ffi
import mxc.runtime
from mxc.runtime.executors import EXECUTORS
kwargs = json.loads(sys.argv[2])
s = mxc.runtime.load(sys.argv[1], **kwargs)
s.run({"data": np.zeros((4, 784), "float32")})
# compiled code runs on an executor thread: ask TVM there
tvm = EXECUTORS.call(s.threads, tvm_ffi.get_global_func("runtime.NumThreads"))
print(json.dumps({"session": s.threads, "tvm": tvm}))
"""


def _probe(path, env_extra: dict, **kwargs) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in threads.POOL_VARIABLES}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", _PROBE, str(path), json.dumps(kwargs)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    return compiled_mlp(tmp_path_factory)[1]


def test_default_uses_every_allowed_core(mlp_path):
    cores = threads.allowed_cores()
    if cores < 2:
        pytest.skip("this process may use only one core: the default cannot be told apart")
    got = _probe(mlp_path, {})
    assert got == {"session": cores, "tvm": cores}


def test_explicit_environment_wins(mlp_path):
    assert _probe(mlp_path, {"TVM_NUM_THREADS": "1"}) == {"session": 1, "tvm": 1}


def test_session_threads_limits_the_pool(mlp_path):
    got = _probe(mlp_path, {"TVM_NUM_THREADS": "2"}, threads=1)
    assert got == {"session": 1, "tvm": 1}


def test_session_threads_are_validated(tmp_path_factory):
    model, path = compiled_mlp(tmp_path_factory)
    import mxc.runtime
    with pytest.raises(ExecutionError, match="positive integer"):
        mxc.runtime.load(path, threads=0)
    s = mxc.runtime.load(path, threads=1)
    assert s.threads == 1
    outs, prof = s.run({"data": mlp_input()}, profile=True)
    assert prof.threads == 1 and "threads: 1" in str(prof)
    np.testing.assert_array_equal(outs[0], model.run({"data": mlp_input()})[0])


@pytest.mark.parametrize("text, want", [("150000 100000", 1.5), ("max 100000", None),
                                        ("100000 100000", 1.0)])
def test_cgroup_v2_quota(tmp_path, text, want):
    (tmp_path / "cpu.max").write_text(text + "\n")
    assert threads.cgroup_cpu_limit(tmp_path) == want


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpu_limit(tmp_path) == 2.5
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_cpu_limit(tmp_path) is None


def test_allowed_cores_within_affinity():
    assert 1 <= threads.allowed_cores() <= len(os.sched_getaffinity(0))


_COUNT = """
import json, os, sys
import numpy as np
import mxc.runtime
before = len(os.listdir("/proc/self/task"))
s = mxc.runtime.load(sys.argv[1], **json.loads(sys.argv[2]))
s.run({"data": np.zeros((4, 784), "float32")})
print(json.dumps({"added": len(os.listdir("/proc/self/task")) - before}))
"""


@pytest.mark.parametrize("session_threads, added", [(1, 1), (2, 2)])
def test_a_pool_holds_the_threads_its_session_uses(mlp_path, session_threads, added):
    """An executor's TVM pool is sized to the session's threads (the executor is its
    worker 0), not to the process's TVM_NUM_THREADS."""
    env = {k: v for k, v in os.environ.items() if k not in threads.POOL_VARIABLES}
    env.update(TVM_NUM_THREADS="2", PYTHONPATH=os.pathsep.join([str(REPO),
                                                                env.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _COUNT, str(mlp_path),
                          json.dumps({"threads": session_threads})],
                         env=env, capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"added": added}
