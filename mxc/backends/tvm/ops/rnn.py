"""The fused RNN operator (``mxc/compiler/ops/rnn.py``), unrolled over time.

Lowering is shape-specialised, so the known sequence length is unrolled into
per-step matmuls.  Weights and biases are sliced from the flat parameter
vector (per layer and direction ``W_i2h``, ``W_h2h`` [, ``W_h2r``], then all
biases ``b_i2h``, ``b_h2h``); with bound parameters TVM folds the slices to
constants.  Gates: LSTM [i, f, g, o]; GRU [r, z, n] with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.  ``use_sequence_length``
freezes the state past each sequence's length and zeroes those outputs;
``lstm_state_clip_min/max`` clip the cell state.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const
from .join_split import concat

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


class _FlatParams:
    """Consecutive slices of the flat parameter vector."""

    def __init__(self, ctx: Lowering, vec):
        self.ctx, self.vec, self.off = ctx, vec, 0

    def take(self, shape):
        k = int(np.prod(shape))
        part = self.ctx.emit(R.strided_slice(self.vec, axes=[0], begin=[self.off],
                                             end=[self.off + k]))
        self.off += k
        return self.ctx.reshape(part, shape)


def _rnn_supported(node, io):
    if io.in_dtypes[0] not in ("float16", "float32", "float64"):
        return "RNN is lowered for float data only"
    return True


@register_converter("RNN", supports=_rnn_supported)
def rnn(ctx: Lowering):
    p = ctx.p
    names = ctx.node.opdef.input_names(p)
    get = dict(zip(names, ctx.inputs))
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(get["data"], dt)
    t_len, n, in0 = ctx.in_shapes[0]
    mode, hsz = p.mode, p.state_size
    g = _GATES[mode]
    dirs = 2 if p.bidirectional else 1
    psz = p.projection_size
    rec = psz if psz is not None else hsz

    flat = _FlatParams(ctx, ctx.astype(get["parameters"], dt))
    weights = []
    for layer in range(p.num_layers):
        in_l = in0 if layer == 0 else dirs * rec
        for _ in range(dirs):
            wx = flat.take((g * hsz, in_l))
            wh = flat.take((g * hsz, rec))
            wr = flat.take((psz, hsz)) if psz is not None else None
            weights.append((wx, wh, wr))
    biases = [(flat.take((g * hsz,)), flat.take((g * hsz,))) for _ in range(p.num_layers * dirs)]

    h0 = ctx.astype(get["state"], dt)
    c0 = ctx.astype(get["state_cell"], dt) if mode == "lstm" else None
    valid = None
    if p.use_sequence_length:
        lens = ctx.reshape(ctx.astype(get["sequence_length"], "int64"), (1, n))
        steps = ctx.const(np.arange(t_len, dtype="int64").reshape(t_len, 1))
        valid = ctx.emit(R.less(steps, lens))                       # (T, N)

    def row(v, k, width):
        return ctx.reshape(ctx.emit(R.strided_slice(v, axes=[0], begin=[k], end=[k + 1])),
                           (n, width))

    def gate(v, k):
        return ctx.emit(R.strided_slice(v, axes=[1], begin=[k * hsz], end=[(k + 1) * hsz]))

    def sigmoid(v):
        return ctx.emit(R.sigmoid(v))

    one = const(1, dt)
    hy, cy = [], []
    inp = x
    for layer in range(p.num_layers):
        outs = []
        for dr in range(dirs):
            k = layer * dirs + dr
            (wx, wh, wr), (bx, bh) = weights[k], biases[k]
            in_w = ctx.shape_of(inp)[2]
            pre = ctx.emit(R.add(R.matmul(ctx.reshape(inp, (t_len * n, in_w)),
                                          R.permute_dims(wx, [1, 0])), bx))
            pre = ctx.reshape(pre, (t_len, n, g * hsz))
            wh_t = ctx.emit(R.permute_dims(wh, [1, 0]))
            wr_t = ctx.emit(R.permute_dims(wr, [1, 0])) if wr is not None else None
            h = row(h0, k, rec)
            c = row(c0, k, hsz) if c0 is not None else None
            out = [None] * t_len
            order = range(t_len - 1, -1, -1) if dr == 1 else range(t_len)
            for t in order:
                gh = ctx.emit(R.add(R.matmul(h, wh_t), bh))
                px = row(pre, t, g * hsz)
                c_new = None
                if mode == "lstm":
                    gates = ctx.emit(R.add(px, gh))
                    i_g, f_g = sigmoid(gate(gates, 0)), sigmoid(gate(gates, 1))
                    c_g, o_g = ctx.emit(R.tanh(gate(gates, 2))), sigmoid(gate(gates, 3))
                    c_new = ctx.emit(R.add(R.multiply(f_g, c), R.multiply(i_g, c_g)))
                    lo, hi = p.lstm_state_clip_min, p.lstm_state_clip_max
                    if lo is not None:
                        c_new = ctx.emit(R.maximum(c_new, const(lo, dt)))
                    if hi is not None:
                        c_new = ctx.emit(R.minimum(c_new, const(hi, dt)))
                    h_new = ctx.emit(R.multiply(o_g, R.tanh(c_new)))
                    if wr_t is not None:
                        h_new = ctx.emit(R.matmul(h_new, wr_t))
                elif mode == "gru":
                    r = sigmoid(R.add(gate(px, 0), gate(gh, 0)))
                    z = sigmoid(R.add(gate(px, 1), gate(gh, 1)))
                    cand = ctx.emit(R.tanh(R.add(gate(px, 2), R.multiply(r, gate(gh, 2)))))
                    h_new = ctx.emit(R.add(R.multiply(R.subtract(one, z), cand),
                                           R.multiply(z, h)))
                elif mode == "rnn_tanh":
                    h_new = ctx.emit(R.tanh(R.add(px, gh)))
                else:
                    h_new = ctx.emit(R.nn.relu(R.add(px, gh)))
                if valid is not None:
                    m = ctx.reshape(ctx.emit(R.strided_slice(valid, axes=[0], begin=[t],
                                                             end=[t + 1])), (n, 1))
                    h = ctx.emit(R.where(m, h_new, h))
                    if c is not None:
                        c = ctx.emit(R.where(m, c_new, c))
                    out[t] = ctx.emit(R.where(m, h_new, const(0, dt)))
                else:
                    h, c = h_new, (c_new if c is not None else None)
                    out[t] = h_new
            hy.append(h)
            if c is not None:
                cy.append(c)
            outs.append(ctx.emit(R.stack(out, axis=0)))            # (T, N, rec)
        inp = outs[0] if dirs == 1 else ctx.emit(R.concat(outs, axis=2))
    result = [ctx.astype(inp, ctx.out_dtypes[0])]
    if p.state_outputs:
        result.append(ctx.astype(ctx.emit(R.stack(hy, axis=0)), ctx.out_dtypes[1]))
        if mode == "lstm":
            result.append(ctx.astype(ctx.emit(R.stack(cy, axis=0)), ctx.out_dtypes[2]))
    return result


# gluon's flat-parameter concatenation is Concat in inference (mxc/compiler/ops/rnn.py)
register_converter("_rnn_param_concat", module=__name__)(concat)
