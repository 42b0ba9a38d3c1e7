"""mxc.frontend.params: MXNet .params (NDArray list) reader/writer.

Byte fixtures are built here with ``struct`` straight from the layout in the
module docstring (never with the writer under test), so reader and writer are
checked against the spec independently; the corpus checks both against files
MXNet 1.9.1 wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import corpus_path, require_corpus
from mxc.errors import ParamsFormatError
from mxc.frontend.params import dumps_params, load_params, save_params, split_arg_aux

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8,
         6: np.int64, 7: np.bool_}


# --------------------------------------------------------------------------- spec-built fixtures


def listfile(records: list[bytes], names: list[str] | None = None, *, magic: int = 0x112,
             reserved: int = 0, count: int | None = None) -> bytes:
    out = struct.pack("<QQQ", magic, reserved, len(records) if count is None else count)
    out += b"".join(records)
    names = names or []
    out += struct.pack("<Q", len(names))
    for name in names:
        raw = name.encode("utf-8")
        out += struct.pack("<Q", len(raw)) + raw
    return out


def v2(shape, flag: int, data: bytes, *, magic: int = V2, stype: int = 0, ctx=(1, 0)) -> bytes:
    head = struct.pack("<Iii", magic, stype, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return head + struct.pack("<iii", *ctx, flag) + data


def v1(shape, flag: int, data: bytes, ctx=(1, 0)) -> bytes:
    head = struct.pack("<Ii", V1, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return head + struct.pack("<iii", *ctx, flag) + data


def legacy(shape, flag: int, data: bytes, ctx=(1, 0)) -> bytes:
    head = struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}I", *shape)
    return head + struct.pack("<iii", *ctx, flag) + data


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def errmsg(data: bytes, source: str = "t.params") -> str:
    with pytest.raises(ParamsFormatError) as info:
        load_params(data, source=source)
    return str(info.value)


# --------------------------------------------------------------------------- layout and readers


def test_writer_matches_hand_written_v2_bytes():
    expected = bytes.fromhex(
        "1201000000000000" "0000000000000000" "0100000000000000"  # magic, reserved, 1 array
        "c9fa93f9" "00000000" "01000000" "0200000000000000"  # V2, dense, ndim 1, dim 2
        "01000000" "00000000" "00000000"  # cpu(0), float32
        "0000803f" "00000040"  # 1.0, 2.0
        "0100000000000000" "0100000000000000" "77")  # 1 name, len 1, "w"
    arrays = {"w": np.array([1.0, 2.0], dtype=np.float32)}
    assert dumps_params(arrays) == expected
    got = load_params(expected)
    assert list(got) == ["w"] and got["w"].dtype == np.float32
    np.testing.assert_array_equal(got["w"], [1.0, 2.0])


@pytest.mark.parametrize("flag,dtype", sorted(FLAGS.items()))
def test_every_type_flag(flag, dtype):
    values = np.arange(6).reshape(2, 3).astype(dtype)
    data = values.astype(np.dtype(dtype).newbyteorder("<")).tobytes()
    got = load_params(listfile([v2((2, 3), flag, data)], ["x"]))["x"]
    assert got.dtype == np.dtype(dtype) and got.shape == (2, 3)
    assert got.tobytes() == values.tobytes()
    assert dumps_params({"x": values}) == listfile([v2((2, 3), flag, data)], ["x"])


@pytest.mark.skipif(BF16 is None, reason="ml_dtypes not installed")
def test_bfloat16():
    raw = struct.pack("<2H", 0x3F80, 0xC000)  # 1.0, -2.0
    got = load_params(listfile([v2((2,), 12, raw)], ["b"]))["b"]
    assert got.dtype == BF16 and got.astype(np.float32).tolist() == [1.0, -2.0]
    assert dumps_params({"b": got}) == listfile([v2((2,), 12, raw)], ["b"])


def test_v1_record_with_gpu_context_is_read():
    values = np.arange(6, dtype=np.float64).reshape(3, 2)
    data = listfile([v1((3, 2), 1, values.tobytes(), ctx=(2, 3))], ["arg:w"])
    got = load_params(data)["arg:w"]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, values)


def test_pre_v1_legacy_record_uint32_shape():
    values = np.arange(12, dtype=np.int32).reshape(2, 3, 2)
    got = load_params(listfile([legacy((2, 3, 2), 4, values.tobytes())]))
    assert isinstance(got, list) and len(got) == 1
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], values)


def test_mixed_record_versions_in_one_file():
    data = listfile([legacy((1,), 0, f32(1)), v1((1,), 0, f32(2)), v2((1,), 0, f32(3))],
                    ["a", "b", "c"])
    assert {k: v.tolist() for k, v in load_params(data).items()} == {"a": [1], "b": [2], "c": [3]}


def test_scalar_v3_record_read_and_written():
    record = v2((), 0, f32(7.5), magic=V3)
    got = load_params(listfile([record], ["s"]))["s"]
    assert got.shape == () and got.dtype == np.float32 and float(got) == 7.5
    assert dumps_params({"s": np.float32(7.5)}) == listfile([record], ["s"])


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_zero_size_arrays(shape):
    got = load_params(listfile([v2(shape, 6, b"")], ["e"]))["e"]
    assert got.shape == shape and got.dtype == np.int64
    assert dumps_params({"e": np.zeros(shape, np.int64)}) == listfile([v2(shape, 6, b"")], ["e"])


def test_nameless_list_file():
    data = listfile([v2((2,), 0, f32(1, 2)), v2((1,), 3, b"\x09")])
    got = load_params(data)
    assert isinstance(got, list) and [a.tolist() for a in got] == [[1.0, 2.0], [9]]
    assert dumps_params(got) == data


def test_no_arrays_loads_as_empty_dict():
    assert load_params(listfile([])) == {}
    assert dumps_params({}) == dumps_params([]) == listfile([])


def test_unicode_names():
    names = ["arg:Gewicht_ä", "aux:平均", "arg:🙂"]
    data = listfile([v2((1,), 0, f32(i)) for i in range(3)], names)
    assert list(load_params(data)) == names
    assert dumps_params(load_params(data)) == data


def test_loaded_arrays_are_independent_writable_copies(tmp_path):
    path = tmp_path / "m.params"
    path.write_bytes(listfile([v2((2, 2), 0, f32(1, 2, 3, 4))], ["w"]))
    got = load_params(path)["w"]
    assert got.flags.c_contiguous and got.flags.writeable and got.flags.owndata
    got[0, 0] = 42  # must not touch the (read-only) mapping
    assert load_params(str(path))["w"][0, 0] == 1


def test_input_kinds_and_source_label(tmp_path):
    data = listfile([v2((1,), 0, f32(5))], ["w"])
    path = tmp_path / "x.params"
    path.write_bytes(data)
    for src in (data, bytearray(data), memoryview(data), path, str(path)):
        assert load_params(src)["w"].tolist() == [5.0]
    path.write_bytes(data[:-1])
    with pytest.raises(ParamsFormatError, match=r"x\.params: byte"):
        load_params(path)
    with pytest.raises(ParamsFormatError, match=r"^custom: "):
        load_params(path, source="custom")
    with pytest.raises(ParamsFormatError, match=r"<bytes>"):
        load_params(data[:-1])
    with pytest.raises(ParamsFormatError, match="cannot read"):
        load_params(tmp_path / "missing.params")


# --------------------------------------------------------------------------- corrupt input

GOOD = listfile([v2((2,), 0, f32(1, 2)), v2((3,), 6, struct.pack("<3q", 1, 2, 3))],
                ["arg:a", "arg:b"])


def test_every_truncation_is_a_clean_error():
    for cut in range(len(GOOD)):
        msg = errmsg(GOOD[:cut])
        assert msg.startswith("t.params: byte ")


def test_truncated_data_names_array_and_offset():
    cut = GOOD[:-(8 + 5 + 8 + 5 + 8 + 10)]  # names + the last 10 data bytes removed
    msg = errmsg(cut)
    assert "array #1" in msg and "24 bytes" in msg and "remain" in msg
    start_of_data = 24 + (12 + 8 + 12 + 8) + (12 + 8 + 12)
    assert f"byte {start_of_data}:" in msg


def test_empty_file():
    assert "list magic" in errmsg(b"")


def test_bad_list_magic():
    msg = errmsg(struct.pack("<Q", 0x113) + GOOD[8:])
    assert "byte 0:" in msg and "0x112" in msg and "0x113" in msg


def test_nonzero_reserved_field():
    msg = errmsg(listfile([], reserved=1))
    assert "byte 8:" in msg and "reserved" in msg


def test_bad_ndarray_magic():
    msg = errmsg(listfile([struct.pack("<I", 0xDEADBEEF) + b"\0" * 40]))
    assert "byte 24:" in msg and "array #0" in msg and "0xdeadbeef" in msg and "0xf993fac9" in msg


@pytest.mark.parametrize("flag", [8, 13, 99, -1])
def test_unknown_type_flag(flag):
    msg = errmsg(listfile([v2((1,), flag, b"\0" * 8)], ["w"]))
    assert "array #0" in msg and "type flag" in msg and str(flag) in msg and "0 float32" in msg


def csr_record() -> bytes:
    """A 2x3 CSR matrix with 2 stored values: storage shape (2,), int64 indptr/indices."""
    return (struct.pack("<Iii", V2, 2, 1) + struct.pack("<q", 2)  # storage shape (2,)
            + struct.pack("<i2q", 2, 2, 3)  # shape (2, 3)
            + struct.pack("<iii", 1, 0, 0)  # cpu, float32
            + struct.pack("<ii", 6, 1) + struct.pack("<q", 3)  # indptr: int64 (3,)
            + struct.pack("<ii", 6, 1) + struct.pack("<q", 2)  # indices: int64 (2,)
            + f32(1, 2) + struct.pack("<3q", 0, 1, 2) + struct.pack("<2q", 0, 2))


def row_sparse_record() -> bytes:
    """A 4x2 row_sparse array holding row 1 only."""
    return (struct.pack("<Iii", V2, 1, 2) + struct.pack("<2q", 1, 2)  # storage shape (1, 2)
            + struct.pack("<i2q", 2, 4, 2) + struct.pack("<iii", 1, 0, 0)
            + struct.pack("<ii", 6, 1) + struct.pack("<q", 1)  # row indices int64 (1,)
            + f32(5, 6) + struct.pack("<q", 1))


@pytest.mark.parametrize("record,kind", [(csr_record(), "csr"), (row_sparse_record(), "row_sparse")])
def test_sparse_storage_named_in_error(record, kind):
    data = listfile([v2((1,), 0, f32(1)), record], ["arg:dense", "arg:sparse_w"])
    msg = errmsg(data)
    assert "sparse storage is not supported" in msg and kind in msg
    assert "array #1 'arg:sparse_w'" in msg and "byte 60:" in msg  # 24 + 36-byte record


def test_unknown_storage_type():
    msg = errmsg(listfile([v2((1,), 0, f32(1), stype=7)], ["w"]))
    assert "sparse storage is not supported" in msg and "array #0" in msg and "7" in msg


def test_huge_declared_shape_fails_before_allocating():
    data = listfile([v2((2**40, 2**40), 0, f32(1, 2, 3))], ["arg:big"])
    tracemalloc.start()
    try:
        msg = errmsg(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    # data starts at 24 + 12 + 16 + 12; what is left is 12 data bytes + 23 name bytes
    assert "byte 64:" in msg and "array #0" in msg and str(4 * 2**80) in msg
    assert "35 bytes remain" in msg


def test_huge_legacy_ndim_is_bad_magic():
    msg = errmsg(listfile([struct.pack("<I", 1000) + b"\0" * 64]))
    assert "legacy ndim" in msg and "array #0" in msg


@pytest.mark.parametrize("shape", [(-5,), (3, -1)])
def test_negative_dims(shape):
    msg = errmsg(listfile([v2(shape, 0, b"")], ["w"]))
    assert "non-negative" in msg and "array #0" in msg and "byte 32:" in msg


def test_negative_ndim():
    rec = struct.pack("<Iii", V2, 0, -2) + b"\0" * 16
    msg = errmsg(listfile([rec]))
    assert "ndim" in msg and "-2" in msg and "byte 32:" in msg


def test_uninitialised_arrays_are_named():
    rec_v2 = struct.pack("<Iii", V2, 0, 0)  # V2 ndim 0: no context or data follow
    rec_v3 = struct.pack("<Iii", V3, 0, -1)  # V3 unknown ndim
    for rec in (rec_v2, rec_v3):
        msg = errmsg(listfile([v2((1,), 0, f32(1)), rec], ["a", "b"]))
        assert "array #1 'b'" in msg and "uninitialised" in msg


def test_name_count_mismatch():
    data = listfile([v2((1,), 0, f32(1)), v2((1,), 0, f32(2))], ["a", "b", "c"])
    msg = errmsg(data)
    assert "expected 0 or 2 names" in msg and "got 3" in msg and "name list" in msg


def test_impossible_array_count():
    msg = errmsg(listfile([], count=2**62))
    assert "array count" in msg and "byte 16:" in msg


def test_trailing_garbage():
    msg = errmsg(GOOD + b"xyz")
    assert "3 trailing bytes" in msg and f"byte {len(GOOD)}:" in msg


def test_duplicate_names():
    data = listfile([v2((1,), 0, f32(1)), v2((1,), 0, f32(2))], ["w", "w"])
    assert "'w'" in errmsg(data) and "unique" in errmsg(data)


def test_invalid_utf8_name():
    data = listfile([v2((1,), 0, f32(1))])[:-8] + struct.pack("<QQ", 1, 2) + b"\xff\xfe"
    assert "UTF-8" in errmsg(data) and "name #0" in errmsg(data)


# --------------------------------------------------------------------------- writing


def test_writer_normalises_layout_and_byte_order():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = dumps_params({"w": base})
    assert dumps_params({"w": np.asfortranarray(base)}) == expected
    assert dumps_params({"w": base.astype(">f4")}) == expected
    strided = np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2]
    assert load_params(dumps_params({"w": strided}))["w"].tolist() == strided.tolist()


@pytest.mark.parametrize("bad", [np.zeros(2, np.complex64), np.zeros(2, np.int16),
                                 np.array(["a"]), np.array([None], dtype=object)])
def test_writer_rejects_unsupported_dtypes(bad):
    with pytest.raises(ParamsFormatError, match=r"array #1 'bad'.*dtype"):
        dumps_params({"ok": np.zeros(1, np.float32), "bad": bad})


def test_writer_rejects_bad_containers_and_names():
    with pytest.raises(ParamsFormatError, match="str name"):
        dumps_params({1: np.zeros(1, np.float32)})
    with pytest.raises(TypeError):
        dumps_params(np.zeros(3, np.float32))


def test_save_params_writes_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "out.params"
    arrays = {"arg:w": np.ones((2, 2), np.float32)}
    save_params(path, arrays)
    assert path.read_bytes() == dumps_params(arrays)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.params"]


def test_save_params_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.params"
    path.write_bytes(b"old")
    with pytest.raises(ParamsFormatError):  # validation fails before any file is made
        save_params(path, {"a": np.ones(2, np.float32), "b": np.zeros(2, np.complex128)})
    assert path.read_bytes() == b"old" and len(list(tmp_path.iterdir())) == 1

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)  # fail after the data was written
    with pytest.raises(OSError, match="disk full"):
        save_params(path, {"a": np.ones(1000, np.float32)})
    assert path.read_bytes() == b"old" and len(list(tmp_path.iterdir())) == 1


def test_split_arg_aux():
    a, b, c = (np.zeros(1, np.float32) for _ in range(3))
    args, auxs = split_arg_aux({"arg:w": a, "aux:mean": b, "plain": c})
    assert args == {"w": a, "plain": c} and auxs == {"mean": b}
    with pytest.raises(ParamsFormatError, match="'w'"):
        split_arg_aux({"arg:w": a, "w": b})


# --------------------------------------------------------------------------- property


def _dtypes() -> list[np.dtype]:
    return [np.dtype(d) for d in FLAGS.values()] + ([BF16] if BF16 is not None else [])


@st.composite
def random_array(draw) -> np.ndarray:
    dtype = draw(st.sampled_from(_dtypes()))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    count = int(np.prod(shape))
    raw = draw(st.binary(min_size=count * dtype.itemsize, max_size=count * dtype.itemsize))
    if dtype == np.bool_:  # MXNet bools are 0/1 bytes
        raw = bytes(b & 1 for b in raw)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)  # any bit pattern, NaNs included


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=12), random_array(), max_size=6))
def test_property_dict_round_trip(arrays):
    data = dumps_params(arrays)
    got = load_params(data)
    assert list(got) == list(arrays)
    assert all(_same(arrays[k], got[k]) for k in arrays)
    assert dumps_params(got) == data


@settings(max_examples=50, deadline=None)
@given(st.lists(random_array(), min_size=1, max_size=5))
def test_property_list_round_trip(arrays):
    got = load_params(dumps_params(arrays))
    assert isinstance(got, list) and len(got) == len(arrays)
    assert all(_same(a, b) for a, b in zip(arrays, got))


# --------------------------------------------------------------------------- MXNet corpus


def _corpus_models() -> list[str]:
    root = corpus_path()
    if root is None or not (root / "models").is_dir():
        return ["no-corpus"]
    return sorted(p.name for p in (root / "models").iterdir() if (p / "model.params").exists())


@pytest.mark.corpus
@pytest.mark.parametrize("model", _corpus_models())
def test_corpus_round_trip_is_byte_identical(model, tmp_path):
    if model == "no-corpus":
        require_corpus("models")
    mdir = require_corpus(f"models/{model}")
    meta = json.loads((mdir / "meta.json").read_text())
    original = (mdir / "model.params").read_bytes()
    assert len(original) == meta["params_bytes"]
    assert hashlib.sha256(original).hexdigest() == meta["params_sha256"]

    params = load_params(mdir / "model.params")
    assert isinstance(params, dict)
    assert sum(a.size for a in params.values()) == meta["num_params"]
    args, auxs = split_arg_aux(params)
    assert set(args) == set(meta["list_arguments"]) - set(meta["inputs"])
    assert set(auxs) == set(meta["list_auxiliary_states"])
    for name, arr in args.items():
        assert list(arr.shape) == meta["infer_shape"]["arg"][name], name
    for name, arr in auxs.items():
        assert list(arr.shape) == meta["infer_shape"]["aux"][name], name

    assert hashlib.sha256(dumps_params(params)).hexdigest() == meta["params_sha256"]
    out = tmp_path / "model.params"
    save_params(out, params)
    assert out.read_bytes() == original


@pytest.mark.corpus
def test_resnet18_loads_fast():
    path = require_corpus("models/resnet18_v1") / "model.params"
    load_params(path)  # warm the page cache
    start = time.perf_counter()
    params = load_params(path)
    elapsed = time.perf_counter() - start
    assert len(params) == 102
    assert elapsed < 1.0, f"loading resnet18_v1 took {elapsed:.3f}s"


@pytest.mark.parametrize("name", ["amp_bf16_cnn", "amp_bf16_cnn_noskip"])
def test_mxnet_bfloat16_params_round_trip_byte_for_byte(name):
    """MXNet 1.9.1's AMP params (dtype flag 12): bits as the README defines, rewritten identically."""
    if BF16 is None:
        pytest.skip("ml_dtypes is not installed")
    path = require_corpus("wave2/models") / name / "model.params"
    raw = path.read_bytes()
    arrays = load_params(raw)
    bf16 = {k: v for k, v in arrays.items() if v.dtype == BF16}
    assert bf16, "the AMP model stores bfloat16 parameters"
    for v in bf16.values():  # float32 = (uint32(bits) << 16).view(float32)
        bits = v.view(np.uint16).astype(np.uint32) << 16
        np.testing.assert_array_equal(v.astype(np.float32), bits.view(np.float32))
    assert dumps_params(arrays) == raw
