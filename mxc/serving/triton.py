"""``mxc export triton``: an ``.mxc`` artifact as a Triton Inference Server model.

Writes a model repository entry Triton loads unchanged::

    OUT/NAME/config.pbtxt        generated from the manifest
    OUT/NAME/1/model.py          mxc.serving.triton_backend (Python backend)
    OUT/NAME/1/model.mxc         the artifact, copied

``config.pbtxt`` names the Python backend, every input and output with its
Triton ``TYPE_*`` and dims, and -- when the artifact has a dynamic batch (a
leading dimension that is not a fixed size) -- ``max_batch_size`` with the
batch dimension left out of ``dims`` and ``dynamic_batching``, so Triton
groups requests as ``mxc serve`` does.  A static artifact gets
``max_batch_size: 0`` and its full shapes.  The text is checked against
Triton's own protobuf schema in the tests (``tritonclient.grpc.model_config_pb2``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from ..errors import ArtifactError, OutputError
from ..runtime import read_manifest

#: numpy dtype name -> Triton's model-config data type
TRITON_TYPES: dict[str, str] = {
    "bool": "TYPE_BOOL", "uint8": "TYPE_UINT8", "uint16": "TYPE_UINT16", "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64", "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32",
    "int64": "TYPE_INT64", "float16": "TYPE_FP16", "float32": "TYPE_FP32",
    "float64": "TYPE_FP64", "bfloat16": "TYPE_BF16",
}


def _fixed(dim: Any) -> bool:
    return isinstance(dim, int) and dim >= 0


def _tensors(kind: str, entries, batched: bool, source) -> str:
    blocks = []
    for t in entries:
        dtype = str(t["dtype"])
        if dtype not in TRITON_TYPES:
            raise ArtifactError(f"{source}: {kind} {t['name']!r} has dtype {dtype}, which Triton's "
                                f"model config cannot name")
        shape = list(t["shape"])
        dims = [d if _fixed(d) else -1 for d in (shape[1:] if batched else shape)]
        blocks.append(f'  {{\n    name: "{t["name"]}"\n    data_type: {TRITON_TYPES[dtype]}\n'
                      f'    dims: [ {", ".join(str(d) for d in dims) or ""} ]\n  }}')
    return f"{kind} [\n" + ",\n".join(blocks) + "\n]\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def dynamic_batch(manifest: Mapping[str, Any]) -> bool:
    """Whether every input's leading dimension is open (a dynamic-batch artifact)."""
    inputs = manifest.get("inputs") or []
    return bool(inputs) and all(t["shape"] and not _fixed(t["shape"][0]) for t in inputs)


def _declared_max(manifest: Mapping[str, Any]) -> int | None:
    """The largest batch a dynamic artifact declares, where its manifest spells the
    range as ``[lo, hi]`` or ``"lo..hi"`` in the leading dimension."""
    highs = []
    for t in manifest.get("inputs") or []:
        lead = t["shape"][0]
        if isinstance(lead, (list, tuple)) and len(lead) == 2 and _fixed(lead[1]):
            highs.append(lead[1])
        elif isinstance(lead, str) and ".." in lead and lead.split("..")[1].isdigit():
            highs.append(int(lead.split("..")[1]))
    return min(highs) if highs else None


def triton_config(manifest: Mapping[str, Any], name: str, *, max_batch_size: int = 32,
                  max_queue_delay_us: int = 5000, instances: int = 1, source: Any = "artifact",
                  python_path: str | None = None) -> str:
    """The ``config.pbtxt`` text of an artifact's manifest."""
    batched = dynamic_batch(manifest)
    declared = _declared_max(manifest)
    if batched and declared is not None:
        max_batch_size = min(max_batch_size, declared)
    text = [f'name: "{name}"\nbackend: "python"\n',
            f"max_batch_size: {max_batch_size if batched else 0}\n",
            _tensors("input", manifest.get("inputs") or [], batched, source),
            _tensors("output", manifest.get("outputs") or [], batched, source),
            f"instance_group [\n  {{\n    kind: KIND_CPU\n    count: {instances}\n  }}\n]\n"]
    if python_path:
        text.append(f'parameters {{\n  key: "MXC_PYTHONPATH"\n  value: {{ string_value: '
                    f'"{_escape(python_path)}" }}\n}}\n')
    if batched:
        text.append(f"dynamic_batching {{\n  max_queue_delay_microseconds: {max_queue_delay_us}\n}}\n")
    return "".join(text)


def export_triton(artifact: str | os.PathLike, out_dir: str | os.PathLike, *, name: str | None = None,
                  version: int = 1, max_batch_size: int = 32, max_queue_delay_us: int = 5000,
                  instances: int = 1, python_path: str | None = None, force: bool = False) -> Path:
    """Write *artifact* as model *name* (default: its stem) under *out_dir*; returns
    the model's directory.  The manifest is read, not loaded: no native code runs."""
    artifact = Path(artifact)
    manifest = read_manifest(artifact)
    name = name or artifact.stem
    model_dir = Path(out_dir) / name
    if model_dir.exists() and not force:
        raise OutputError(f"{model_dir}: already exists; give --force to replace it")
    config = triton_config(manifest, name, max_batch_size=max_batch_size,
                           max_queue_delay_us=max_queue_delay_us, instances=instances,
                           source=artifact, python_path=python_path)
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(config)
    shutil.copyfile(Path(__file__).with_name("triton_backend.py"), version_dir / "model.py")
    shutil.copyfile(artifact, version_dir / "model.mxc")
    return model_dir
