"""Read and write MXNet ``.params`` files (NDArray lists) without MXNet.

A ``.params`` file is what ``mx.nd.save`` writes: a list of dense arrays,
optionally with one name per array (``mx.model.save_checkpoint`` names them
``arg:<name>`` / ``aux:<name>``).  Every integer is little-endian.

File layout::

    u64  0x112                      list magic
    u64  0                          reserved (always 0 in files MXNet writes)
    u64  N                          number of arrays
    N x  <array record>
    u64  K                          number of names: 0 (a plain list) or N
    K x  (u64 length, UTF-8 bytes)  names, in array order

Array record, current layout (MXNet >= 1.0 writes V2; V3 under numpy shape
semantics, i.e. ``npx.set_np()``)::

    u32  0xF993FAC9 (V2) | 0xF993FACA (V3)
    i32  storage type               0 dense; 1 row_sparse, 2 csr (unsupported)
    i32  ndim, ndim x i64 dims      the shape
    i32  dev_type, i32 dev_id       context of the saving process (ignored)
    i32  type flag                  see _FLAG_TO_DTYPE
    prod(dims) * itemsize bytes     C-order data

Shape "none" rules: under V2 an ``ndim`` of 0 means an uninitialised array and
the record stops right after the shape (no context, no data); V2 therefore
cannot hold 0-d scalars, which only V3 can (there, ``ndim == -1`` or a ``-1``
dim means uninitialised).  Sparse records add a storage shape before the shape
and per-aux (type, shape) pairs and aux data; we parse them only far enough to
skip them and report them by name.

Older layouts that MXNet still reads, and so do we:

* V1 (``0xF993FAC8``): like V2 without the storage-type field.
* pre-V1: no magic at all; the first u32 *is* the ndim, followed by u32 dims,
  then context, type flag and data as above.

Writing reproduces ``mx.nd.save`` of MXNet 1.9.1 byte for byte: V2 magic,
dense storage, i64 dims, context cpu(0) (dev_type 1, dev_id 0).  Only 0-d
arrays are written as V3 records, since V2 has no way to express them.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Union

import ml_dtypes
import numpy as np

from ..errors import ParamsFormatError
from ..atomic_files import atomic_open

__all__ = ["load_params", "save_params", "dumps_params", "split_arg_aux"]

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8


def is_params_file(path) -> bool:
    """Whether *path* starts like an MXNet NDArray list (``mx.nd.save``, ``.params``)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == LIST_MAGIC.to_bytes(8, "little")
    except OSError:
        return False

V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
# A pre-V1 record starts with its ndim; anything larger is treated as a bad magic
# rather than as a shape, so that garbage gives a readable error.
_LEGACY_MAX_NDIM = 32
_CPU_DEV_TYPE = 1
_SPARSE_AUX_COUNT = {1: ("row_sparse", 1), 2: ("csr", 2)}


# mshadow type flags that MXNet 1.9.1 can (de)serialise.
_FLAG_TO_DTYPE: dict[int, np.dtype] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float64),
    2: np.dtype(np.float16),
    3: np.dtype(np.uint8),
    4: np.dtype(np.int32),
    5: np.dtype(np.int8),
    6: np.dtype(np.int64),
    7: np.dtype(np.bool_),
    12: np.dtype(ml_dtypes.bfloat16),  # numpy has no bfloat16; ml_dtypes provides one
}
_DTYPE_TO_FLAG = {dt: flag for flag, dt in _FLAG_TO_DTYPE.items()}

PathOrBytes = Union[str, os.PathLike, bytes, bytearray, memoryview]
Arrays = Union[Mapping[str, np.ndarray], Sequence[np.ndarray]]


# --------------------------------------------------------------------------- reading


@dataclass
class _Record:
    """Where one dense array's data lies; ``problem`` defers an error until names are known."""

    start: int
    data_offset: int = 0
    dtype: np.dtype | None = None
    shape: tuple[int, ...] = ()
    problem: str | None = None


class _Reader:
    """Bounds-checked cursor over the file; every failure is a ParamsFormatError."""

    def __init__(self, buf: memoryview, source: str):
        self.buf = buf
        self.pos = 0
        self.source = source
        self.where = "file header"

    def fail(self, message: str, at: int | None = None) -> NoReturn:
        offset = self.pos if at is None else at
        raise ParamsFormatError(f"{self.source}: byte {offset}: {self.where}: {message}")

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def need(self, nbytes: int, what: str) -> None:
        """Fail unless ``nbytes`` more bytes exist; called before anything is allocated."""
        if nbytes > self.remaining():
            self.fail(f"expected {what} ({nbytes} bytes) but only {self.remaining()} bytes remain "
                      "(truncated file?)")

    def unpack(self, fmt: str, what: str) -> tuple:
        size = struct.calcsize(fmt)
        self.need(size, what)
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return values

    def scalar(self, fmt: str, what: str) -> int:
        return self.unpack("<" + fmt, what)[0]

    def shape(self, legacy_ndim: int | None = None) -> tuple[int, ...] | None:
        """Read a shape; ``None`` means MXNet's "unknown ndim" (-1)."""
        if legacy_ndim is not None:  # pre-V1: the ndim was the magic, dims are u32
            return self.unpack(f"<{legacy_ndim}I", f"{legacy_ndim} uint32 shape dims")
        at = self.pos
        ndim = self.scalar("i", "shape ndim (int32)")
        if ndim == -1:
            return None
        if ndim < 0:
            self.fail(f"expected a shape ndim >= -1, got {ndim}", at)
        return self.unpack(f"<{ndim}q", f"{ndim} int64 shape dims")

    def sized_bytes(self, dims: Sequence[int], itemsize: int, what: str) -> int:
        """Skip ``prod(dims) * itemsize`` bytes, checking them against the file size first."""
        nbytes = itemsize
        for d in dims:
            nbytes *= d
        self.need(nbytes, what)
        start = self.pos
        self.pos += nbytes
        return start


def _itemsize(r: _Reader, flag: int, what: str, at: int) -> int:
    if flag in _FLAG_TO_DTYPE:
        return _FLAG_TO_DTYPE[flag].itemsize
    known = ", ".join(f"{f} {dt.name}" for f, dt in _FLAG_TO_DTYPE.items())
    r.fail(f"expected a {what} type flag ({known}), got {flag}", at)


def _check_dims(r: _Reader, dims: Sequence[int], at: int) -> None:
    if any(d < 0 for d in dims):
        r.fail(f"expected non-negative shape dims, got {tuple(dims)}", at)


def _check_extent(r: _Reader, dims: Sequence[int], itemsize: int, at: int) -> None:
    """Refuse shapes numpy cannot represent even when empty: the product of the
    non-zero dims times the item size must fit in a signed 64-bit size, as
    ``(0, 2**63 - 1)`` does not (numpy would raise a bare ValueError)."""
    extent = itemsize
    for d in dims:
        extent *= d or 1
    if extent >= 1 << 63:
        r.fail(f"expected a shape whose extent fits in 64 bits, got {tuple(dims)}", at)


def _read_record(r: _Reader) -> _Record:
    """Parse one array record, leaving the cursor after it; never allocates array memory."""
    rec = _Record(start=r.pos)
    magic = r.scalar("I", "NDArray magic (uint32)")
    stype = 0
    storage_shape: tuple[int, ...] | None = None
    legacy_ndim: int | None = None
    if magic in (V2_MAGIC, V3_MAGIC):
        at = r.pos
        stype = r.scalar("i", "storage type (int32)")
        if stype != 0:
            if stype not in _SPARSE_AUX_COUNT:
                r.fail(f"expected storage type 0 (dense), got {stype}; "
                       "sparse storage is not supported", at)
            at = r.pos
            storage_shape = r.shape()
            if storage_shape is None:
                r.fail("expected a known sparse storage shape, got ndim -1", at)
            _check_dims(r, storage_shape, at)
    elif magic != V1_MAGIC:
        if magic > _LEGACY_MAX_NDIM:
            r.fail(f"expected NDArray magic 0x{V2_MAGIC:08x}, 0x{V3_MAGIC:08x} or 0x{V1_MAGIC:08x} "
                   f"(or a legacy ndim <= {_LEGACY_MAX_NDIM}), got 0x{magic:08x}", rec.start)
        legacy_ndim = magic

    at = r.pos
    shape = r.shape(legacy_ndim)
    if magic == V3_MAGIC:
        uninitialised = shape is None or -1 in shape
    else:
        uninitialised = shape is not None and len(shape) == 0
        if shape is None:
            r.fail("expected a shape ndim >= 0 outside numpy (V3) records, got -1", at)
    if uninitialised:
        rec.problem = "is an uninitialised NDArray (no shape); mxc cannot represent it"
        return rec
    assert shape is not None
    _check_dims(r, shape, at)

    r.unpack("<ii", "context (dev_type, dev_id as int32)")
    at = r.pos
    flag = r.scalar("i", "type flag (int32)")
    itemsize = _itemsize(r, flag, "data", at)
    _check_extent(r, shape, itemsize, at)

    if storage_shape is not None:  # sparse: walk past it so names can still be read
        name, aux_count = _SPARSE_AUX_COUNT[stype]
        aux: list[tuple[tuple[int, ...], int]] = []
        for k in range(aux_count):
            at = r.pos
            aux_size = _itemsize(r, r.scalar("i", f"aux {k} type flag (int32)"), f"aux {k}", at)
            at = r.pos
            aux_shape = r.shape()
            if aux_shape is None:
                r.fail(f"expected a known aux {k} shape, got ndim -1", at)
            _check_dims(r, aux_shape, at)
            aux.append((aux_shape, aux_size))
        r.sized_bytes(storage_shape, itemsize, "sparse values")
        for k, (aux_shape, aux_size) in enumerate(aux):
            r.sized_bytes(aux_shape, aux_size, f"sparse aux {k} data")
        rec.problem = f"uses {name} storage; sparse storage is not supported"
        return rec

    rec.data_offset = r.sized_bytes(shape, itemsize, f"data of shape {tuple(shape)}")
    rec.shape = tuple(shape)
    rec.dtype = _FLAG_TO_DTYPE[flag]
    return rec


def _parse(buf: memoryview, source: str) -> tuple[list[_Record], list[str]]:
    r = _Reader(buf, source)
    magic = r.scalar("Q", "list magic (uint64)")
    if magic != LIST_MAGIC:
        r.fail(f"expected NDArray list magic 0x{LIST_MAGIC:x}, got 0x{magic:x} "
               "(not an MXNet .params file?)", 0)
    # MXNet ignores this field, but it has always written 0; a non-zero value
    # means the file is not what we think it is.
    reserved = r.scalar("Q", "reserved field (uint64)")
    if reserved != 0:
        r.fail(f"expected reserved field 0, got {reserved}", 8)

    at = r.pos
    count = r.scalar("Q", "array count (uint64)")
    if count * 4 > r.remaining():  # every record takes at least 4 bytes
        r.fail(f"array count {count} cannot fit in the {r.remaining()} remaining bytes", at)
    records = []
    for i in range(count):
        r.where = f"array #{i}"
        records.append(_read_record(r))

    r.where = "name list"
    at = r.pos
    name_count = r.scalar("Q", "name count (uint64)")
    if name_count not in (0, count):
        r.fail(f"expected 0 or {count} names (one per array), got {name_count}", at)
    names: list[str] = []
    for j in range(name_count):
        r.where = f"name #{j}"
        length = r.scalar("Q", "name length (uint64)")
        r.need(length, "name bytes")
        at = r.pos
        try:
            names.append(bytes(buf[at:at + length]).decode("utf-8"))
        except UnicodeDecodeError as exc:
            r.fail(f"expected a UTF-8 name: {exc}", at)
        r.pos += length
    r.where = "end of file"
    if r.remaining():
        r.fail(f"expected end of file after the name list, found {r.remaining()} trailing bytes")

    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in seen:
            r.where = f"name #{j}"
            r.fail(f"expected unique names, but {name!r} is also the name of array #{seen[name]}")
        seen[name] = j
    for i, rec in enumerate(records):
        if rec.problem is not None:
            label = f"array #{i} {names[i]!r}" if names else f"array #{i}"
            raise ParamsFormatError(f"{source}: byte {rec.start}: {label} {rec.problem}")
    return records, names


def _materialize(buf: memoryview, rec: _Record) -> np.ndarray:
    """Copy one array out of the buffer (the only copy), in native byte order."""
    assert rec.dtype is not None
    count = 1
    for d in rec.shape:
        count *= d
    if count == 0:
        return np.empty(rec.shape, dtype=rec.dtype)
    file_dtype = rec.dtype.newbyteorder("<")
    # ``view`` aliases ``buf``; it dies with this frame, so the mmap can close.
    view = np.frombuffer(buf, dtype=file_dtype, count=count, offset=rec.data_offset)
    return view.reshape(rec.shape).astype(rec.dtype, order="C", copy=True)


def _decode(buf: memoryview, source: str) -> dict[str, np.ndarray] | list[np.ndarray]:
    records, names = _parse(buf, source)
    arrays = [_materialize(buf, rec) for rec in records]
    if names or not arrays:
        return dict(zip(names, arrays))
    return arrays


def load_params(path_or_bytes: PathOrBytes, *, source: str | None = None
                ) -> dict[str, np.ndarray] | list[np.ndarray]:
    """Load a ``.params`` file (a path, or its bytes).

    Returns ``{name: array}`` when the file stores names (``mx.nd.save`` of a
    dict) and a list otherwise; a file with no arrays gives ``{}`` so model
    loaders can always treat the result as a dict.  Arrays are fresh, writable,
    C-ordered and keep the file's dtype.  ``source`` names the input in error
    messages (default: the path, or ``<bytes>``).

    Stricter than MXNet on purpose: duplicate names, a non-zero reserved field
    and trailing bytes are errors (MXNet keeps the last duplicate and ignores
    the rest), and so are sparse or uninitialised arrays, which no compiled
    model can use.  Every problem raises :class:`ParamsFormatError`.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        with memoryview(path_or_bytes) as view:
            return _decode(view.cast("B"), source or "<bytes>")
    path = Path(path_or_bytes)
    label = source or str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:  # mmap refuses empty files; let the parser report it
                return _decode(memoryview(b""), label)
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ParamsFormatError(f"{label}: cannot read: {exc.strerror or exc}") from exc
    view = memoryview(mapped)
    try:
        return _decode(view, label)
    finally:
        try:
            view.release()
            mapped.close()
        except BufferError:  # a traceback still holds a view; the GC closes the map later
            pass


# --------------------------------------------------------------------------- writing


def _flag_of(array: np.ndarray, label: str) -> int:
    dtype = array.dtype.newbyteorder("=") if array.dtype.byteorder == ">" else array.dtype
    flag = _DTYPE_TO_FLAG.get(dtype)
    if flag is None:
        names = ", ".join(dt.name for dt in _FLAG_TO_DTYPE.values())
        raise ParamsFormatError(f"{label}: dtype {array.dtype} cannot be saved; expected one of {names}")
    return flag


def _normalize(arrays: Arrays) -> tuple[list[np.ndarray], list[int], list[bytes]]:
    """Validate everything up front so a save never fails halfway through the file."""
    if isinstance(arrays, Mapping):
        items = list(arrays.items())
    elif isinstance(arrays, Sequence) and not isinstance(arrays, (str, bytes)):
        items = [(None, a) for a in arrays]
    else:
        raise TypeError(f"expected a dict or list of arrays, got {type(arrays).__name__}")
    out: list[np.ndarray] = []
    flags: list[int] = []
    names: list[bytes] = []
    for i, (name, value) in enumerate(items):
        label = f"array #{i}" if name is None else f"array #{i} {name!r}"
        if name is not None:
            if not isinstance(name, str):
                raise ParamsFormatError(f"{label}: expected a str name, got {type(name).__name__}")
            names.append(name.encode("utf-8"))
        array = np.asarray(value)
        flags.append(_flag_of(array, label))
        # (not ascontiguousarray: that turns 0-d arrays into 1-d ones)
        out.append(np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C"))
    return out, flags, names


def _chunks(arrays: Arrays) -> Iterator[bytes | memoryview]:
    """The file as a stream of pieces, so large arrays are written without a joined copy."""
    data, flags, names = _normalize(arrays)
    yield struct.pack("<QQQ", LIST_MAGIC, 0, len(data))
    for array, flag in zip(data, flags):
        ndim = array.ndim
        magic = V2_MAGIC if ndim else V3_MAGIC
        yield struct.pack(f"<Iii{ndim}qiii", magic, 0, ndim, *array.shape, _CPU_DEV_TYPE, 0, flag)
        if array.size:
            yield memoryview(array.reshape(-1).view(np.uint8))
    yield struct.pack("<Q", len(names))
    for name in names:
        yield struct.pack("<Q", len(name))
        yield name


def dumps_params(arrays: Arrays) -> bytes:
    """Serialise arrays as ``mx.nd.save`` would (a dict keeps names, a list has none)."""
    return b"".join(_chunks(arrays))


def save_params(path: str | os.PathLike, arrays: Arrays) -> None:
    """Write a ``.params`` file atomically: a temp file in the same directory, then rename.

    Either the complete new file or the previous content is ever visible at ``path``.
    """
    target = Path(path)
    pieces = _chunks(arrays)
    first = next(pieces)  # runs the validation before any file is created
    with atomic_open(target) as fh:
        fh.write(first)
        for piece in pieces:
            fh.write(piece)


# --------------------------------------------------------------------------- helpers


def split_arg_aux(d: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Split a checkpoint dict into (arg_params, aux_params), stripping the prefixes.

    Keys without an ``arg:``/``aux:`` prefix (Gluon ``save_parameters`` files)
    count as arguments.  Two keys that collapse to the same name are an error
    rather than a silent overwrite.
    """
    args: dict[str, np.ndarray] = {}
    auxs: dict[str, np.ndarray] = {}
    for key, value in d.items():
        if key.startswith("aux:"):
            target, name = auxs, key[4:]
        else:
            target, name = args, key[4:] if key.startswith("arg:") else key
        if name in target:
            kind = "aux" if target is auxs else "arg"
            raise ParamsFormatError(f"parameter {key!r}: {kind} name {name!r} appears twice")
        target[name] = value
    return args, auxs
