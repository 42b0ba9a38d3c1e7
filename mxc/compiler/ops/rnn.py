"""The fused RNN operator (rnn_relu, rnn_tanh, lstm, gru), MXNet 1.9.1.

Data layout is TNC: data (T, N, in); state (L*D, N, H) (H -> projection size
P for LSTMP), state_cell (L*D, N, H) for LSTM; output (T, N, D*H).

``parameters`` is one flat vector: first every weight, for each layer and
direction ``W_i2h (G*H, in_l)`` then ``W_h2h (G*H, H)`` (then ``W_h2r (P, H)``
with a projection), then every bias in the same order ``b_i2h (G*H)``,
``b_h2h (G*H)``.  Gate order: LSTM [i, f, g, o]; GRU [r, z, n] with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.  Layers above the first see
the concatenated directions.  Dropout (``p``) only acts in training.

With ``use_sequence_length`` the ``sequence_length`` input (N,) limits each
sequence: outputs past the length are 0, the final states are those at the
last valid step and the reverse direction starts at the last valid step.
``lstm_state_clip_min/max`` clip the LSTM cell state after each step (NaN
propagates; ``lstm_state_clip_nan`` is not modelled).  Projection, clipping
and sequence lengths are cuDNN features in MXNet; the reference follows the
cuDNN semantics for them.
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, cast_to, fmt_shape, merge_into
from .join_split import Concat
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_float, \
    to_int

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def rnn_param_size(num_layers, input_size, state_size, directions, mode, projection_size=None):
    """Length of the flat parameter vector (MXNet's GetRnnParamSize)."""
    size = state_size * directions * _GATES[mode]
    rec = projection_size if projection_size is not None else state_size
    first = (input_size + rec + 2) * size
    other = (rec * directions + rec + 2) * size
    total = first + (num_layers - 1) * other
    if projection_size is not None:
        total += projection_size * state_size * num_layers * directions
    return total


@register_op("RNN", aliases=("_npx_rnn",))
class RNN(OpDef):
    attrs = {
        "state_size": Attr(to_int),
        "num_layers": Attr(to_int),
        "bidirectional": Attr(to_bool, False),
        "mode": Attr(enum("rnn_relu", "rnn_tanh", "lstm", "gru")),
        "p": Attr(to_float, 0.0),
        "state_outputs": Attr(to_bool, False),
        "projection_size": Attr(optional(to_int), None),
        "lstm_state_clip_min": Attr(optional(to_float), None),
        "lstm_state_clip_max": Attr(optional(to_float), None),
        "lstm_state_clip_nan": Attr(to_bool, False),
        "use_sequence_length": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.state_size < 1:
            raise attr_error(p, "state_size", f"must be >= 1, got {p.state_size}")
        if p.num_layers < 1:
            raise attr_error(p, "num_layers", f"must be >= 1, got {p.num_layers}")
        if not 0.0 <= p.p <= 1.0:
            raise attr_error(p, "p", f"must be in [0, 1], got {p.p}")
        if p.projection_size is not None:
            if p.mode != "lstm":
                raise attr_error(p, "projection_size", "projection is only supported for LSTM")
            if p.projection_size < 1:
                raise attr_error(p, "projection_size",
                                 f"must be >= 1, got {p.projection_size}")

    def input_names(self, p):
        names = ["data", "parameters", "state"]
        if p.mode == "lstm":
            names.append("state_cell")
        if p.use_sequence_length:
            names.append("sequence_length")
        return names

    def num_outputs(self, p):
        if not p.state_outputs:
            return 1
        return 3 if p.mode == "lstm" else 2

    def output_names(self, p):
        names = ["output"]
        if p.state_outputs:
            names.append("state_output")
            if p.mode == "lstm":
                names.append("statecell_output")
        return names

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = ins[0]
        if d is None:
            return ins, outs
        if len(d) != 3:
            raise shape_error(p, f"data must be 3-D (sequence length, batch, input size), got "
                                 f"{fmt_shape(d)}")
        t, n, x = d
        dirs = 2 if p.bidirectional else 1
        layers = dirs * p.num_layers
        rec = p.projection_size if p.projection_size is not None else p.state_size
        merge_into(p, ins, 2, (layers, n, rec), "state")
        idx = 3
        if p.mode == "lstm":
            merge_into(p, ins, 3, (layers, n, p.state_size), "state_cell")
            idx = 4
        size = None if x is None else rnn_param_size(p.num_layers, x, p.state_size, dirs,
                                                     p.mode, p.projection_size)
        merge_into(p, ins, 1, (size,), "parameters")
        if p.use_sequence_length:
            merge_into(p, ins, idx, (n,), "sequence_length")
        merge_into(p, outs, 0, (t, n, dirs * rec), "output")
        if p.state_outputs:
            merge_into(p, outs, 1, (layers, n, rec), "state output")
            if p.mode == "lstm":
                merge_into(p, outs, 2, (layers, n, p.state_size), "state cell output")
        return ins, outs

    def infer_type(self, p, in_types, out_types):
        dtype = in_types[0] if in_types[0] is not None else next(
            (t for t in out_types if t is not None), None)
        if dtype is None:
            return in_types, out_types
        ins = list(in_types)
        seq_idx = len(ins) - 1 if p.use_sequence_length else None
        for i in range(len(ins)):
            if i != seq_idx:
                ins[i] = dtype
        return ins, [dtype] * len(out_types)

    def forward(self, p, inputs, ctx):
        names = self.input_names(p)
        get = dict(zip(names, inputs))
        x = get["data"]
        out_dt = ctx.out_dtypes[0] or x.dtype
        seq_len = get.get("sequence_length")
        outs = rnn_forward(p, x.astype(np.float64), get["parameters"].astype(np.float64),
                           get["state"].astype(np.float64),
                           get["state_cell"].astype(np.float64) if "state_cell" in get else None,
                           None if seq_len is None else seq_len.astype(np.int64))
        y, hy, cy = outs
        result = [cast_to(y, out_dt)]
        if p.state_outputs:
            result.append(cast_to(hy, ctx.out_dtypes[1] or out_dt))
            if p.mode == "lstm":
                result.append(cast_to(cy, ctx.out_dtypes[2] or out_dt))
        return result


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def rnn_forward(p, x, params, h0, c0, seq_len):
    """float64 reference of the fused RNN; returns (out, hy, cy)."""
    t_len, n, in0 = x.shape
    mode, hsz = p.mode, p.state_size
    g = _GATES[mode]
    dirs = 2 if p.bidirectional else 1
    psz = p.projection_size
    rec = psz if psz is not None else hsz
    # slice the flat vector: all weights, then all biases
    off = 0

    def take(shape):
        nonlocal off
        k = int(np.prod(shape))
        if off + k > params.size:
            raise ValueError(f"parameters has {params.size} elements, fewer than the layout needs")
        v = params[off:off + k].reshape(shape)
        off += k
        return v

    weights = []
    for layer in range(p.num_layers):
        in_l = in0 if layer == 0 else dirs * rec
        for _ in range(dirs):
            wx = take((g * hsz, in_l))
            wh = take((g * hsz, rec))
            wr = take((psz, hsz)) if psz is not None else None
            weights.append((wx, wh, wr))
    biases = [(take((g * hsz,)), take((g * hsz,))) for _ in range(p.num_layers * dirs)]
    if seq_len is None:
        valid = np.ones((t_len, n), dtype=bool)
    else:
        valid = np.arange(t_len)[:, None] < seq_len.reshape(1, n)
    clip = (p.lstm_state_clip_min, p.lstm_state_clip_max)
    hy = np.empty((p.num_layers * dirs, n, rec))
    cy = np.empty((p.num_layers * dirs, n, hsz))
    inp = x
    for layer in range(p.num_layers):
        outs = []
        for dr in range(dirs):
            k = layer * dirs + dr
            (wx, wh, wr), (bx, bh) = weights[k], biases[k]
            pre = inp @ wx.T + bx  # (T, N, G*H)
            h = h0[k].copy()
            c = c0[k].copy() if c0 is not None else None
            out = np.zeros((t_len, n, rec))
            steps = range(t_len - 1, -1, -1) if dr == 1 else range(t_len)
            for t in steps:
                gh = h @ wh.T + bh
                px = pre[t]
                if mode == "lstm":
                    gates = px + gh
                    i_g = _sigmoid(gates[:, :hsz])
                    f_g = _sigmoid(gates[:, hsz:2 * hsz])
                    c_g = np.tanh(gates[:, 2 * hsz:3 * hsz])
                    o_g = _sigmoid(gates[:, 3 * hsz:])
                    c_new = f_g * c + i_g * c_g
                    if clip[0] is not None or clip[1] is not None:
                        c_new = np.clip(c_new, clip[0], clip[1])
                    h_new = o_g * np.tanh(c_new)
                    if wr is not None:
                        h_new = h_new @ wr.T
                elif mode == "gru":
                    r = _sigmoid(px[:, :hsz] + gh[:, :hsz])
                    z = _sigmoid(px[:, hsz:2 * hsz] + gh[:, hsz:2 * hsz])
                    cand = np.tanh(px[:, 2 * hsz:] + r * gh[:, 2 * hsz:])
                    h_new = (1.0 - z) * cand + z * h
                elif mode == "rnn_tanh":
                    h_new = np.tanh(px + gh)
                else:
                    h_new = np.maximum(px + gh, 0.0)
                m = valid[t][:, None]
                h = np.where(m, h_new, h)
                if mode == "lstm":
                    c = np.where(m, c_new, c)
                out[t] = np.where(m, h_new, 0.0)
            hy[k] = h
            if c is not None:
                cy[k] = c
            outs.append(out)
        inp = outs[0] if dirs == 1 else np.concatenate(outs, axis=2)
    return inp, hy, cy


@register_op("_rnn_param_concat")
class RNNParamConcat(Concat):
    """Gluon's concatenation of the flattened RNN weights and biases into ``parameters``.

    In inference it is :class:`~.join_split.Concat` (same ``num_args``/``dim``
    schema and kernel); MXNet gives it its own name only so that its shape
    inference may leave inputs of deferred shape unknown.
    """

    def infer_shape(self, p, in_shapes, out_shapes):
        """:class:`Concat`'s inference, plus MXNet's rule for deferred weights.

        A bidirectional layer's first ``l0_i2h_weight`` and ``r0_i2h_weight``
        both wait for the input size (Gluon exports them as ``(4H, 0)``), so two
        inputs are unknown along the axis; MXNet splits the rest of the
        parameter vector evenly between them (and refuses more than two).
        """
        ins, outs = super().infer_shape(p, in_shapes, out_shapes)
        known = [s for s in ins if s is not None]
        if not known or outs[0] is None:
            return ins, outs
        axis = p.dim % len(known[0])
        missing = [i for i, s in enumerate(ins) if s is None or s[axis] is None]
        total = outs[0][axis]
        if len(missing) < 2 or total is None:
            return ins, outs
        if len(missing) > 2:
            raise shape_error(p, f"{len(missing)} inputs of unknown size along dim {axis}; "
                                 f"MXNet infers at most 2 (the two directions' input weights)")
        residual = total - sum(s[axis] for i, s in enumerate(ins) if i not in missing)
        if residual < 0 or residual % 2:
            raise shape_error(p, f"the {residual} parameters left for the 2 inputs of unknown "
                                 f"size cannot be split evenly between them")
        for i in missing:
            s = ins[i]
            ins[i] = s[:axis] + (residual // 2,) + s[axis + 1:]
        return ins, outs
