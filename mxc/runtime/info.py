"""What a session tells about itself: input/output info (ONNX Runtime's ``NodeArg``)
and per-step profiles."""

from __future__ import annotations

from dataclasses import dataclass

#: numpy dtype name -> ONNX Runtime's element type name (``NodeArg.type`` is ``tensor(T)``)
ORT_ELEMENT_TYPES = {"float32": "float", "float64": "double", "float16": "float16",
                     "bfloat16": "bfloat16", "int8": "int8", "int16": "int16", "int32": "int32",
                     "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
                     "uint64": "uint64", "bool": "bool"}


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of a model input or output (ONNX Runtime's ``NodeArg``)."""

    name: str
    shape: tuple[int | str, ...]   # a dynamic batch is the name ``'batch'`` (as ORT shows it)
    dtype: str
    #: ``(lo, hi)`` when the dimension ``batch_axis`` takes any batch in that range
    batch_range: tuple[int, int] | None = None
    batch_axis: int | None = None

    def __repr__(self) -> str:
        extra = (f", batch_range={self.batch_range}, batch_axis={self.batch_axis}"
                 if self.batch_range is not None else "")
        return (f"TensorInfo(name={self.name!r}, shape={self.shape!r}, dtype={self.dtype!r}"
                f"{extra})")

    @property
    def type(self) -> str:
        """ONNX Runtime's spelling: ``tensor(float)`` for float32, ``tensor(int64)`` ..."""
        return f"tensor({ORT_ELEMENT_TYPES.get(self.dtype, self.dtype)})"


@dataclass(frozen=True)
class StepTime:
    """Time of one step of a profiled run."""

    name: str
    kind: str          # "region" or "host"
    what: str          # the VM function or the host op
    seconds: float


@dataclass(frozen=True)
class Profile:
    """Per-step times of one :meth:`Session.run` (``str()`` gives a table)."""

    steps: tuple[StepTime, ...]
    total: float       # wall time of the whole call, input checks and copies included
    threads: int | None = None  # CPU threads the compiled regions ran on

    @property
    def overhead(self) -> float:
        """Time not spent inside a step: feed checks, transfers, output copies."""
        return max(self.total - sum(s.seconds for s in self.steps), 0.0)

    def as_dict(self) -> dict:
        return {"total_ms": self.total * 1e3, "overhead_ms": self.overhead * 1e3,
                "threads": self.threads,
                "steps": [{"name": s.name, "kind": s.kind, "what": s.what,
                           "ms": s.seconds * 1e3} for s in self.steps]}

    def __str__(self) -> str:
        width = max([len(s.name) for s in self.steps] + [4])
        lines = [f"{'step':<{width}}  {'kind':<6}  {'what':<24}  {'ms':>10}"]
        for s in self.steps:
            lines.append(f"{s.name:<{width}}  {s.kind:<6}  {s.what:<24}  {s.seconds * 1e3:>10.3f}")
        lines.append(f"{'overhead':<{width}}  {'':<6}  {'':<24}  {self.overhead * 1e3:>10.3f}")
        lines.append(f"{'total':<{width}}  {'':<6}  {'':<24}  {self.total * 1e3:>10.3f}")
        if self.threads is not None:
            lines.append(f"threads: {self.threads}")
        return "\n".join(lines)


class SessionSpellings:
    """ONNX Runtime's spellings and the target string, shared by :class:`~mxc.runtime.Session`
    and the bucketed session (each defines ``inputs``, ``outputs`` and ``manifest``)."""

    inputs: list
    outputs: list
    manifest: dict

    def get_inputs(self) -> list[TensorInfo]:  # ONNX Runtime spelling
        return self.inputs

    def get_outputs(self) -> list[TensorInfo]:
        return self.outputs

    @property
    def target(self) -> str:
        return str((self.manifest.get("target") or {}).get("string", "?"))
