"""A session pickles as its artifact path and load options: a process pool can ship
it, and the receiving process loads (and verifies, when a key was given) the file.

Oracles: the sending process's own outputs; a file signed with another key is
refused on the receiving side.
"""

from __future__ import annotations

import multiprocessing
import pickle
import shutil
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime  # noqa: E402
from mxc.errors import ArtifactError  # noqa: E402
from mxc.runtime.signing import generate_key  # noqa: E402

from runtime_helpers import compiled_mlp, mlp_input  # noqa: E402

TIMEOUT = 120


def _run(sess, x):
    return sess.run({"data": x})[0], sess.threads


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    model, _ = compiled_mlp(tmp_path_factory)
    d = tmp_path_factory.mktemp("pickle")
    private, public = generate_key(d / "a.key")
    other_private, _ = generate_key(d / "b.key")
    path = model.save(d / "mlp-signed.mxc", sign=private)
    forged = model.save(d / "mlp-other.mxc", sign=other_private)
    return path, public, forged


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_session_crosses_a_process_pool(tmp_path_factory, method):
    _, path = compiled_mlp(tmp_path_factory)
    sess = mxc.runtime.load(path, threads=1)
    x = mlp_input()
    want = sess.run({"data": x})[0]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
        got = [f.result(TIMEOUT) for f in [pool.submit(_run, sess, x) for _ in range(2)]]
    for out, threads in got:
        np.testing.assert_array_equal(out, want)
        assert threads == 1


def test_signed_session_is_verified_again_by_the_receiver(signed):
    path, public, forged = signed
    from cryptography.hazmat.primitives import serialization
    key_object = serialization.load_pem_public_key(public.read_bytes())
    for key in (public, key_object):          # a path and a key object both pickle
        sess = mxc.runtime.load(path, verify_key=key)
        data = pickle.dumps(sess)
        x = mlp_input()
        np.testing.assert_array_equal(pickle.loads(data).run({"data": x})[0],
                                      sess.run({"data": x})[0])
    shutil.copyfile(forged, path)             # the file changed hands meanwhile
    with pytest.raises(ArtifactError, match="does not verify with the given key"):
        pickle.loads(data)


def test_a_session_made_in_memory_refuses_to_pickle(tmp_path_factory):
    model, _ = compiled_mlp(tmp_path_factory)
    from mxc.runtime.session import session_from_parts
    sess = session_from_parts(model.plan, model.manifest, model.params, model.library_bytes(),
                              source="<memory>")
    with pytest.raises(ArtifactError, match="save the model"):
        pickle.dumps(sess)
