"""``mx.mod.Module`` for inference: bind, set parameters, forward, predict.

Training (``bind(for_training=True)``, ``fit``, optimizers) is not provided
and raises :class:`~mxc.mxnet.base.NotSupportedError`; inference scripts that
bind with ``for_training=False`` run unchanged.  As in MXNet 1.x, ``forward``
with a batch of another shape rebinds the module for it (:meth:`Module.reshape`,
parameters kept) where the graph takes that shape, else says why and what to do.  Labels a symbol declares
(``softmax_label``) are bound to zeros of their inferred shape: inference
never reads them, as in MXNet.
"""

from __future__ import annotations

import logging

import numpy as np

from .base import MXNetError, not_supported
from .context import check_cpu
from .io import DataBatch, DataDesc, NDArrayIter
from .ndarray import NDArray, concat
from .symbol import Symbol, _wrap

__all__ = ["Module", "BaseModule"]

_log = logging.getLogger("mxc.mxnet")


#: MXNet 1.x's pip builds index tensors with int32 (no USE_INT64_TENSOR_SIZE): a declared
#: shape of 2**31 elements or more is refused there, and here, before any allocation
MAX_TENSOR_ELEMENTS = (1 << 31) - 1


def _shape(value, name: str, what: str) -> tuple:
    if not isinstance(value, (list, tuple)):
        raise MXNetError(f"{what}: the shape of {name!r} must be a tuple of integers, not "
                         f"{type(value).__name__} {value!r:.60}")
    dims = []
    for d in value:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0:
            raise MXNetError(f"{what}: the shape of {name!r} must be a tuple of non-negative "
                             f"integers, got {tuple(value)!r:.80}")
        dims.append(int(d))
    size = 1
    for d in dims:
        size *= d
    if size > MAX_TENSOR_ELEMENTS:
        raise MXNetError(f"{what}: {name!r} of shape {tuple(dims)} has {size:,} elements; size "
                         f"of tensor you are trying to allocate is larger than 2^31 elements "
                         f"(MXNet without USE_INT64_TENSOR_SIZE)")
    return tuple(dims)


def _descs(shapes, what: str = "bind") -> list[DataDesc]:
    """*shapes* (``[DataDesc]`` or ``[(name, shape)]``) checked, as :class:`DataDesc` s."""
    if shapes is None:
        return []
    if not isinstance(shapes, (list, tuple)):
        raise MXNetError(f"{what}: data_shapes must be a list of DataDesc or (name, shape) "
                         f"pairs, not {type(shapes).__name__} {shapes!r:.60}")
    out = []
    for item in shapes:
        if isinstance(item, DataDesc):
            name, shape, extra = item.name, item.shape, item[2:]
        elif isinstance(item, (list, tuple)) and len(item) >= 2:
            name, shape, extra = item[0], item[1], ()
        else:
            raise MXNetError(f"{what}: each data shape must be a DataDesc or a (name, shape) "
                             f"pair, not {item!r:.60}")
        if not isinstance(name, str):
            raise MXNetError(f"{what}: a data name must be a string, not {name!r:.60}")
        out.append(DataDesc(name, _shape(shape, name, what), *extra))
    return out


class Module:
    """A symbol with parameters, bound for inference."""

    def __init__(self, symbol: Symbol, data_names=("data",), label_names=("softmax_label",),
                 logger=logging, context=None, work_load_list=None, fixed_param_names=None,
                 state_names=None, group2ctxs=None, compression_params=None):
        contexts = context if isinstance(context, (list, tuple)) else [context]
        for ctx in contexts:
            check_cpu(ctx, "Module")
        self._symbol = _wrap(symbol)
        self._data_names = list(data_names or [])
        inputs = self._symbol.list_inputs()
        self._label_names = [n for n in (label_names or []) if n in inputs]
        missing = [n for n in self._data_names if n not in inputs]
        if missing:
            raise MXNetError(f"Module: data name {missing[0]!r} is not an input of the symbol; "
                             f"inputs are {', '.join(inputs)}")
        self._param_names = [n for n in self._symbol.list_arguments()
                             if n not in self._data_names and n not in self._label_names]
        self._aux_names = self._symbol.list_auxiliary_states()
        self._arg_params: dict[str, NDArray] = {}
        self._aux_params: dict[str, NDArray] = {}
        self._exec = None
        self._data_shapes: list[DataDesc] = []
        self.binded = self.params_initialized = False

    # -- introspection ---------------------------------------------------------------------
    @property
    def symbol(self) -> Symbol:
        return self._symbol

    @property
    def data_names(self) -> list[str]:
        return list(self._data_names)

    @property
    def label_names(self) -> list[str]:
        return list(self._label_names)

    @property
    def output_names(self) -> list[str]:
        return self._symbol.list_outputs()

    @property
    def data_shapes(self) -> list[DataDesc]:
        return list(self._data_shapes)

    @property
    def output_shapes(self) -> list[tuple[str, tuple]]:
        self._need_bind()
        shapes = {d.name: d.shape for d in self._data_shapes}
        out = self._symbol.infer_shape_partial(**shapes)[1]
        return list(zip(self.output_names, out))

    # -- setup -----------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module=None,
             grad_req: str = "write") -> None:
        if for_training:
            raise not_supported("Module training (bind(for_training=True)); bind with "
                                "for_training=False for inference")
        if self.binded and not force_rebind:
            _log.warning("Already bound, ignoring bind()")
            return
        descs = _descs(data_shapes)
        labels = _descs(label_shapes, "bind label_shapes")
        inputs = self._symbol.list_inputs()
        unknown = [d.name for d in descs + labels if d.name not in inputs]
        if unknown:
            raise MXNetError(f"bind: {unknown[0]!r} is not an input of the symbol; inputs are "
                             f"{', '.join(inputs)}")
        shapes = {d.name: d.shape for d in descs + labels}
        try:
            self._exec = self._symbol.simple_bind(grad_req="null", **shapes)
        except MemoryError:
            raise MXNetError(f"bind: cannot allocate the arrays of shapes {shapes} in this "
                             f"process") from None
        self._data_shapes = descs
        self.binded = True
        if self.params_initialized:
            self._copy_params()

    def _need_bind(self) -> None:
        if not self.binded:
            raise MXNetError("call bind before this Module method")

    def set_params(self, arg_params, aux_params, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        arg_params, aux_params = dict(arg_params or {}), dict(aux_params or {})
        if not allow_missing:
            missing = [n for n in self._param_names if n not in arg_params]
            missing += [n for n in self._aux_names if n not in aux_params]
            if missing:
                raise MXNetError(f"{missing[0]} is not presented")
        if not allow_extra:
            extra = [n for n in arg_params if n not in self._param_names]
            extra += [n for n in aux_params if n not in self._aux_names]
            if extra:
                raise MXNetError(f"Find name \"{extra[0]}\" that is not in the arguments")
        self._arg_params = {k: v for k, v in arg_params.items() if k in self._param_names}
        self._aux_params = {k: v for k, v in aux_params.items() if k in self._aux_names}
        self.params_initialized = True
        if self.binded:
            self._copy_params()

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False) -> None:
        if arg_params is None and aux_params is None:
            raise not_supported("Module.init_params without arg_params (random initialisation "
                                "is for training)")
        self.set_params(arg_params, aux_params, allow_missing, force_init, allow_extra)

    def _copy_params(self) -> None:
        for kind, params, bound in (("argument", self._arg_params, self._exec.arg_dict),
                                    ("auxiliary state", self._aux_params, self._exec.aux_dict)):
            for name, value in params.items():
                target = bound[name]
                shape = tuple(value.shape if hasattr(value, "shape") else np.shape(value))
                if shape != tuple(target.shape):
                    data = ", ".join(f"{d.name}{d.shape}" for d in self._data_shapes)
                    raise MXNetError(f"set_params: {kind} {name!r} has shape {shape}, but the "
                                     f"module bound for {data} expects {tuple(target.shape)}; "
                                     f"bind with the data shapes the parameters were trained "
                                     f"for")
                target[:] = value

    def get_params(self) -> tuple[dict, dict]:
        return dict(self._arg_params), dict(self._aux_params)

    def reshape(self, data_shapes, label_shapes=None) -> None:
        """Bind again for new input shapes, keeping the parameters (MXNet's
        ``Module.reshape``; ``forward`` calls it when a batch's shape changes).

        The parameters' shapes are part of the new binding, so a shape the graph
        cannot take with these weights (another feature size, a batch size a
        ``Reshape`` fixes) is an :class:`~mxc.mxnet.base.MXNetError` saying so."""
        self._need_bind()
        descs = _descs(data_shapes)
        shapes = {n: v.shape for n, v in {**self._arg_params, **self._aux_params}.items()}
        shapes.update({d.name: d.shape for d in descs + _descs(label_shapes)})
        try:
            exe = self._symbol.simple_bind(grad_req="null", **shapes)
        except (RuntimeError, MXNetError) as exc:
            old = ", ".join(f"{d.name} {d.shape}" for d in self._data_shapes)
            new = ", ".join(f"{d.name} {d.shape}" for d in descs)
            reason = str(exc).splitlines()[-1]
            raise MXNetError(
                f"Module.reshape: the graph cannot take {new} with its parameters (bound for "
                f"{old}): {reason}. Feed batches of the bound shape (pad the last one: "
                f"NDArrayIter(..., last_batch_handle='pad'); predict() drops the padding)"
            ) from None
        self._exec, self._data_shapes = exe, descs
        if self.params_initialized:
            self._copy_params()

    def fit(self, train_data, eval_data=None, eval_metric="acc", *args, **kwargs):
        """Training: not provided (:class:`~mxc.mxnet.base.NotSupportedError`)."""
        raise not_supported("Module.fit (training; mxc.mxnet runs inference: bind with "
                            "for_training=False and use forward/predict)")

    # -- running ---------------------------------------------------------------------------
    def forward(self, data_batch: DataBatch, is_train=None) -> None:
        """Run one batch; a batch of another shape than the bound one rebinds the module
        first (:meth:`reshape`), as MXNet 1.x does."""
        self._need_bind()
        if not self.params_initialized:
            raise MXNetError("call set_params (or init_params) before forward")
        if is_train:
            raise not_supported("Module.forward(is_train=True)")
        data = data_batch.data if isinstance(data_batch, DataBatch) else list(data_batch)
        if len(data) != len(self._data_names):
            raise MXNetError(f"forward: {len(data)} data arrays for data names "
                             f"{self._data_names}")
        data = [v if isinstance(v, NDArray) else NDArray(np.asarray(v)) for v in data]
        if any(v.shape != self._exec.arg_dict[n].shape for n, v in zip(self._data_names, data)):
            provided = getattr(data_batch, "provide_data", None)
            self.reshape(provided or [(n, v.shape) for n, v in zip(self._data_names, data)],
                         getattr(data_batch, "provide_label", None) or None)
        for name, value in zip(self._data_names, data):
            self._exec.arg_dict[name][:] = value
        self._exec.forward(is_train=False)

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        self._need_bind()
        return list(self._exec.outputs)

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run every batch of *eval_data* (an iterator or arrays); padding is dropped."""
        self._need_bind()
        if isinstance(eval_data, (NDArray, np.ndarray)):
            eval_data = NDArrayIter(eval_data, batch_size=self._data_shapes[0].shape[0])
        if reset and hasattr(eval_data, "reset"):
            eval_data.reset()
        outputs: list[list[NDArray]] = []
        for i, batch in enumerate(eval_data):
            if num_batch is not None and i == num_batch:
                break
            self.forward(batch)                  # may reshape: the batch size after it
            keep = self._data_shapes[0].shape[0] - getattr(batch, "pad", 0)
            outputs.append([NDArray(o.asnumpy()[:keep]) for o in self.get_outputs()])
        if not outputs:
            return []
        if not merge_batches:
            return outputs
        merged = [concat(*parts, dim=0) if len(parts) > 1 else parts[0]
                  for parts in zip(*outputs)]
        if len(merged) == 1 and not always_output_list:
            return merged[0]
        return merged

    # -- checkpoints -------------------------------------------------------------------------
    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False, **kwargs):
        from .model import load_checkpoint
        if load_optimizer_states:
            raise not_supported("optimizer states")
        sym, args, aux = load_checkpoint(prefix, epoch)
        mod = Module(sym, **kwargs)
        mod._arg_params, mod._aux_params = args, aux
        mod.params_initialized = True
        return mod

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states=False,
                        remove_amp_cast=True) -> None:
        from .model import save_checkpoint
        save_checkpoint(prefix, epoch, self._symbol, self._arg_params, self._aux_params)


BaseModule = Module
