"""``mxc serve --ray`` on a real two-node Ray cluster (separate processes, loopback).

The cluster is a head and a second node started with ``ray start``; the server
deploys the MLP with one replica per node; tritonclient queries the V2 ingress
and the answers equal ``Session.run``'s.  Then the second node's processes are
killed: requests retried within the health-check window all get their correct
answer.  Everything is torn down and checked gone at the end.  Skipped, with the
reason, without Ray Serve (``pip install 'mxc[serve,ray]'``).
"""

from __future__ import annotations

import importlib.util
import re
import threading
import time

import numpy as np
import pytest

for _module, _extra in (("kserve", "serve"), ("ray", "ray"), ("psutil", "test")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"mxc serve --ray needs {_module} (pip install 'mxc[{_extra}]')",
                    allow_module_level=True)

import mxc.runtime as rt  # noqa: E402
from ray_cluster import Cluster  # noqa: E402
from serve_helpers import Server, compiled_mlp, infer_json  # noqa: E402

pytestmark = pytest.mark.slow

HEALTH_WINDOW_S = 30.0  # the server's --retry-seconds: how long a lost request is sent again
X = np.random.default_rng(11).standard_normal((1, 784)).astype("float32")


@pytest.fixture(scope="module")
def cluster():
    # every Ray process of the test (nodes, drivers, the server) inherits these: no usage
    # reports, and no token authentication (a loopback cluster of our own; with a token
    # in ~/.ray the nodes would require it and the test's drivers could not connect)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        env.setenv("RAY_AUTH_MODE", "disabled")
        c = Cluster()
        try:
            c.start_second()
            yield c
        finally:
            c.stop()
    left = [p for node in (c.head, c.second) if node for p in node.processes()]
    assert not left, f"Ray processes left behind: {[p.pid for p in left]}"


@pytest.fixture(scope="module")
def served(cluster, tmp_path_factory):
    path = compiled_mlp(tmp_path_factory)
    s = Server(path, "--ray", cluster.head.address, "--min-replicas", "2",
               "--max-replicas-per-node", "1", "--replica-cpus", "0.5", "--poll-seconds", "0",
               "--retry-seconds", str(HEALTH_WINDOW_S))
    try:
        yield s.wait_ready(), path
    finally:
        code = s.stop()
        assert code == 0, s.output()


def replica_nodes(cluster, model: str = "mlp") -> dict[str, list[int]]:
    """Node id -> pids of *model*'s Serve replicas running there (by process title)."""
    found: dict[str, list[int]] = {}
    for node_id, node in cluster.nodes().items():
        for p in node.processes():
            try:
                title = " ".join(p.cmdline())
            except Exception:  # noqa: BLE001 - it exited meanwhile
                continue
            if "ServeReplica" in title and re.search(rf":mxc-{re.escape(model)}(\s|$)", title):
                found.setdefault(node_id, []).append(p.pid)
    return found


def test_replicas_run_on_both_nodes_and_answer_like_session_run(cluster, served):
    import tritonclient.http as httpclient
    server, path = served
    nodes = cluster.nodes()
    assert len(nodes) == 2
    on = replica_nodes(cluster)
    assert set(on) == set(nodes), f"replicas on {on}, nodes {list(nodes)}"

    want = rt.load(path).run({"data": X})[0]
    client = httpclient.InferenceServerClient(server.base.removeprefix("http://"))
    meta = client.get_model_metadata("mlp")
    assert [i["name"] for i in meta["inputs"]] == ["data"]
    for _ in range(8):  # both replicas answer (Ray's router spreads the requests)
        inp = httpclient.InferInput("data", [1, 784], "FP32")
        inp.set_data_from_numpy(X, binary_data=True)
        np.testing.assert_array_equal(client.infer("mlp", [inp]).as_numpy("softmax_output"), want)

    # a bad request raised inside a replica keeps its 4xx and message through Ray
    code, answer = infer_json(server.base, "mlp", X, name="nodata")
    assert code == 400 and "has no input 'nodata'" in answer["error"], answer
    assert "Traceback" not in answer["error"]
    assert infer_json(server.base, "mlp", X)[0] == 200


def test_replicas_scale_up_on_queue_length(cluster, tmp_path_factory):
    """min 1, max 2 replicas, target 1 ongoing request: 8 clients in a loop make Ray Serve
    add the second replica (the upscale delay is shortened to keep the test short)."""
    import shutil
    path = tmp_path_factory.mktemp("auto") / "auto.mxc"
    shutil.copy(compiled_mlp(tmp_path_factory), path)
    s = Server(path, "--ray", cluster.head.address, "--min-replicas", "1", "--max-replicas", "2",
               "--target-ongoing-requests", "1", "--upscale-delay-s", "1",
               "--downscale-delay-s", "600", "--replica-cpus", "0.25", "--poll-seconds", "0")
    stop, threads = threading.Event(), []
    try:
        s.wait_ready()
        assert sum(len(p) for p in replica_nodes(cluster, "auto").values()) == 1

        def client():
            while not stop.is_set():
                infer_json(s.base, "auto", X)

        threads += [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        deadline, count = time.monotonic() + 120, 1
        while count < 2 and time.monotonic() < deadline:
            time.sleep(1)
            count = sum(len(p) for p in replica_nodes(cluster, "auto").values())
        assert count == 2, f"still {count} replica(s) after 120 s of load: {s.output()}"
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        assert s.stop() == 0, s.output()


def _wait_for(condition, what: str, server, timeout: float = 120) -> None:
    """Poll *condition* (instead of a fixed sleep) until it holds, or fail saying *what*."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout} s: {server.output()}"
        time.sleep(0.2)


def test_losing_a_node_loses_no_request_retried_within_the_health_window(cluster, served):
    server, path = served
    want = rt.load(path).run({"data": X})[0].ravel()
    results: list[tuple[bool, int]] = []  # (answered correctly, client-side attempts)
    stop = threading.Event()

    def client():
        while not stop.is_set():
            attempts, deadline = 0, time.monotonic() + HEALTH_WINDOW_S
            ok = False
            while not ok and time.monotonic() < deadline:
                attempts += 1
                try:
                    code, answer = infer_json(server.base, "mlp", X)
                    ok = code == 200 and np.array_equal(
                        np.array(answer["outputs"][0]["data"], "float32"), want)
                except OSError:
                    ok = False
                if not ok:
                    time.sleep(0.5)
            results.append((ok, attempts))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: len(results) >= 2 * len(threads), "answers before the kill", server)
        before = len(results)
        t_kill = time.monotonic()
        cluster.second.kill()  # the node's raylet, agents, workers and its replica: gone at once
        assert not cluster.second.processes()
        # the clients keep sending until the head has declared the node dead (the window in
        # which requests still reach its replica) and some requests were answered after that
        cluster.wait_nodes(1)
        noticed = len(results)
        _wait_for(lambda: len(results) - noticed >= len(threads) and len(results) - before > 4,
                  "answers after the loss", server)
        print(f"the head noticed the loss after {time.monotonic() - t_kill:.1f} s")
    finally:
        stop.set()
        for t in threads:
            t.join(HEALTH_WINDOW_S + 30)
    after = results[before:]
    assert before > 0 and len(after) > 4, (before, len(after), server.output())
    lost = [r for r in results if not r[0]]
    assert not lost, f"{len(lost)} of {len(results)} requests lost: {server.output()}"
    retried = sum(1 for _, attempts in results if attempts > 1)
    server.log.seek(0)
    resent = server.log.read().decode(errors="replace").count("replica lost")
    print(f"node lost: {len(results)} requests, all answered; {retried} needed a client retry, "
          f"{resent} were resent by the server; {len(after)} after the kill")
    # the cluster knows the node is gone, and the survivor still serves
    assert list(cluster.wait_nodes(1).values()) == [cluster.head]
    assert infer_json(server.base, "mlp", X)[0] == 200
