"""The options of ``mxc quantize`` / :func:`mxc.compiler.quantize.quantize`, checked once.

They mirror ``mxnet.contrib.quantization.quantize_net``'s arguments.  What
this quantizer does not do yet is refused here, by name, before any work:
a partial quantizer must never accept an option and then ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import PassError


class QuantizeError(PassError):
    """Quantization was refused or failed: an option or a graph this quantizer (or MXNet's)
    does not handle; the message names the option, layer or operator."""


#: what MXNet 1.9.1 accepts for each enumerated option (quantize_graph's checks)
CALIB_MODES = ("naive", "entropy", "none")
QUANTIZED_DTYPES = ("auto", "int8", "uint8")
QUANTIZE_MODES = ("full", "smart")
FLOWS = ("net", "model")
GRANULARITIES = ("tensor-wise", "channel-wise")

#: what mxc's quantizer implements so far (the others are refused with QuantizeError)
IMPLEMENTED_CALIB_MODES = ("naive", "entropy", "none")
IMPLEMENTED_FLOWS = ("net", "model")
IMPLEMENTED_GRANULARITIES = ("tensor-wise",)
#: the operators this quantizer quantizes (excluding them is not implemented)
QUANTIZED_HERE = frozenset({"FullyConnected", "Activation", "_sg_mkldnn_fully_connected"})


@dataclass(frozen=True)
class QuantizeOptions:
    """One quantization request (``quantize_net``'s arguments)."""

    calib_mode: str = "naive"
    quantized_dtype: str = "auto"
    quantize_mode: str = "full"
    flow: str = "net"
    quantize_granularity: str = "tensor-wise"
    exclude_layers: tuple[str, ...] = field(default_factory=tuple)
    exclude_layers_match: tuple[str, ...] = field(default_factory=tuple)
    exclude_operators: tuple[str, ...] = field(default_factory=tuple)
    #: calibration batches to use (None: every batch given)
    num_calib_batches: int | None = None

    def check(self) -> None:
        """Refuse what MXNet refuses, then what mxc does not implement yet (each by name)."""
        for name, value, allowed in (("calib_mode", self.calib_mode, CALIB_MODES),
                                     ("quantized_dtype", self.quantized_dtype, QUANTIZED_DTYPES),
                                     ("quantize_mode", self.quantize_mode, QUANTIZE_MODES),
                                     ("flow", self.flow, FLOWS),
                                     ("quantize_granularity", self.quantize_granularity,
                                      GRANULARITIES)):
            if value not in allowed:
                raise QuantizeError(f"quantize: unknown {name} {value!r}; expected one of "
                                    f"{', '.join(allowed)}")
        if self.num_calib_batches is not None and self.num_calib_batches < 1:
            raise QuantizeError(f"quantize: num_calib_batches must be >= 1, got "
                                f"{self.num_calib_batches}")
        for name, value, done in (("calib_mode", self.calib_mode, IMPLEMENTED_CALIB_MODES),
                                  ("flow", self.flow, IMPLEMENTED_FLOWS),
                                  ("quantize_granularity", self.quantize_granularity,
                                   IMPLEMENTED_GRANULARITIES)):
            if value not in done:
                raise QuantizeError(f"quantize: {name} {value!r} is not implemented yet "
                                    f"(implemented: {', '.join(done)})")
        if self.flow == "model":
            if self.exclude_layers_match:
                raise QuantizeError("quantize: exclude_layers_match is quantize_net's; "
                                    "quantize_model (flow 'model') has no such argument")
            return
        for name in ("exclude_layers", "exclude_layers_match"):
            if getattr(self, name):
                raise QuantizeError(f"quantize: {name} is not implemented yet; quantize "
                                    f"without it, or with MXNet")
        kept = sorted(set(self.exclude_operators) & QUANTIZED_HERE)
        if kept:
            raise QuantizeError(f"quantize: exclude_operators {', '.join(kept)} is not "
                                f"implemented yet (only operators this quantizer leaves "
                                f"float32 anyway can be excluded)")
