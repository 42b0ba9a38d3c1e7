"""The ingress side of ``mxc serve --ray`` without a cluster: what ``RemoteModel``
does with a replica that died and with a replica's typed error, and the
deployment options Ray Serve gets.  Each check runs in a fresh interpreter (it
imports kserve, whose gRPC protos clash with tritonclient's in the test process).
Skipped, with the reason, without Ray Serve."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

for _module, _extra in (("kserve", "serve"), ("ray", "ray")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"mxc serve --ray needs {_module} (pip install 'mxc[{_extra}]')",
                    allow_module_level=True)

from serve_helpers import run_isolated  # noqa: E402


class FakeHandle:
    """A DeploymentHandle whose calls raise the queued exceptions, then answer."""

    def __init__(self, *failures):
        self.failures, self.calls = list(failures), 0

    def remote(self, body, headers=None):
        self.calls += 1

        async def answer():
            if self.failures:
                raise self.failures.pop(0)
            return ("response to", body), {}
        return answer()


def _call(model, body="req"):
    return asyncio.run(model(body, headers={}))


def _remote_model(handle, retry_seconds=30.0):
    from mxc.serving.ray_serve import RemoteModel
    return RemoteModel("mlp", handle, "mxc:mlp", retry_seconds=retry_seconds)


def check_resent_after_replica_death():
    from ray.exceptions import ActorDiedError, ActorUnavailableError
    handle = FakeHandle(ActorDiedError(), ActorUnavailableError("gone", None))
    model = _remote_model(handle)
    assert _call(model) == (("response to", "req"), {})
    assert handle.calls == 3 and model.retries == 2


def check_retries_end_with_a_503():
    from kserve.errors import ModelNotReady
    from ray.exceptions import ActorDiedError
    handle = FakeHandle(*[ActorDiedError() for _ in range(100)])
    try:
        _call(_remote_model(handle, retry_seconds=0.3))
    except ModelNotReady as exc:
        assert "no replica answered within 0.3s" in str(exc), exc
    else:
        raise AssertionError("no ModelNotReady (503) after the retry window")
    assert 1 < handle.calls < 100, handle.calls


def check_request_errors_keep_type_status_and_message():
    from ray.exceptions import RayTaskError

    from mxc.serving.errors import UnknownModel
    cause = UnknownModel("model 'mlp' has no version 9", 404)
    wrapped = RayTaskError("__call__", "Traceback (most recent call last): ...", cause)
    handle = FakeHandle(wrapped.as_instanceof_cause())
    try:
        _call(_remote_model(handle))
    except UnknownModel as exc:
        assert exc.status == 404 and str(exc) == "model 'mlp' has no version 9", exc
    else:
        raise AssertionError("the replica's UnknownModel did not come back")
    assert handle.calls == 1


def check_other_errors_are_not_retried():
    from ray.exceptions import RayTaskError
    handle = FakeHandle(RayTaskError("__call__", "tb", ZeroDivisionError("x")).as_instanceof_cause())
    try:
        _call(_remote_model(handle))
    except ZeroDivisionError:
        pass
    assert handle.calls == 1


def check_fixed_replicas_or_autoscaling_on_queue_length():
    from mxc.serving.ray_serve import RayOptions
    fixed = RayOptions(min_replicas=2, max_replicas=2, max_replicas_per_node=1).deployment_options(8)
    assert fixed["num_replicas"] == 2 and "autoscaling_config" not in fixed, fixed
    assert fixed["max_replicas_per_node"] == 1 and fixed["max_ongoing_requests"] == 16, fixed
    scaled = RayOptions(min_replicas=1, max_replicas=4, target_ongoing_requests=3).deployment_options(1)
    assert "num_replicas" not in scaled and "max_replicas_per_node" not in scaled, scaled
    assert scaled["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 1,
                                            "target_ongoing_requests": 3}, scaled


def check_exit_does_not_wait_forever_on_a_gone_cluster():
    import logging
    import threading

    from ray import serve

    from mxc.serving import ray_serve
    never, seen = threading.Event(), []
    serve.delete = lambda app, _blocking=True: never.wait()  # a cluster that never answers

    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    logging.getLogger("mxc.serving.ray_serve").addHandler(Collect())
    ray_serve._delete_apps(["mxc:mlp"], timeout=0.2)  # returns: the call is abandoned
    assert any("not deleted within 0.2s" in m for m in seen), seen


@pytest.mark.parametrize("check", [
    "check_exit_does_not_wait_forever_on_a_gone_cluster",
    "check_resent_after_replica_death",
    "check_retries_end_with_a_503",
    "check_request_errors_keep_type_status_and_message",
    "check_other_errors_are_not_retried",
    "check_fixed_replicas_or_autoscaling_on_queue_length",
])
def test_remote_model(check):
    run_isolated("test_ray_remote_model", check)
