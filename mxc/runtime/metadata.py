"""ONNX Runtime's ``ModelMetadata`` of an artifact (``sess.get_modelmeta()``).

Apart from :mod:`mxc.runtime.ort` so that :class:`~mxc.runtime.Session` can
build it without importing the module that imports the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelMetadata:
    """ORT's ``ModelMetadata``, from an artifact's manifest (``sess.get_modelmeta()``)."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


def model_metadata(manifest: dict) -> ModelMetadata:
    """producer: ``mxc VERSION``; graph name: the model's name; version: the artifact
    format version; custom metadata: the manifest's scalar facts (TVM version, target,
    creation time, pass pipeline ...) as strings."""
    target = manifest.get("target") or {}
    custom = {k: str(v) for k, v in manifest.items()
              if isinstance(v, (str, int, float, bool)) and k not in ("name", "format")}
    custom["target"] = str(target.get("string") or target.get("kind", ""))
    return ModelMetadata(
        producer_name=f"mxc {manifest.get('mxc_version', '')}".strip(),
        graph_name=str(manifest.get("name") or ""), domain="mxc",
        description=f"{manifest.get('format', 'mxc-artifact')} compiled by mxc",
        graph_description="", version=int(manifest.get("format_version", 0)),
        custom_metadata_map=custom)
