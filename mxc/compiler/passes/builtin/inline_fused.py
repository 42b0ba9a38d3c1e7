"""``inline-fused``: replace float oneDNN-fused nodes by the pattern they carry.

``optimize_for("MKLDNN")`` wraps ``Convolution -> BatchNorm -> relu (+ add)``,
``FullyConnected -> activation`` and the interleaved self-attention matmuls in
``_sg_mkldnn_*`` nodes whose nested graph is the original pattern.  A float
fused node computes exactly its nested graph, so inlining it loses nothing and
lets the rest of the pipeline see the plain ops: ``fold-batchnorm`` folds the
BatchNorm into the convolution's weights (what oneDNN does at run time) and
the TVM backend fuses conv + bias + activation + sum into one kernel again.

Quantized fused nodes (``quantized=true``) are kept: their int8 semantics
(run-time weight quantization, requantize inside) are not those of the nested
float graph, and the TVM backend lowers them as a whole.
"""

from __future__ import annotations

from ...ir import Entry
from ..registry import register_pass

FUSED_OPS = ("_sg_mkldnn_conv", "_sg_mkldnn_fully_connected", "_sg_mkldnn_selfatt_qk",
             "_sg_mkldnn_selfatt_valatt")


@register_pass("inline-fused", extra_options=False)
def inline_fused(graph, ctx):
    """Inline every float ``_sg_mkldnn_*`` node's nested graph into the graph."""
    for node in list(graph.topo_order()):
        if node.op not in FUSED_OPS or node.params.get("quantized"):
            continue
        nested = node.subgraphs[0]
        mapped: dict[int, Entry] = {id(v): e for v, e in zip(nested.input_nodes(), node.inputs)}
        made = {}
        with ctx.inserting_before(node):
            for inner in nested.topo_order():
                if inner.op is None:
                    continue
                ins = [_outer(e, mapped, made) for e in inner.inputs]
                made[id(inner)] = ctx.add_node(inner.op, ins, dict(inner.attrs),
                                               name=ctx.graph.fresh_name(
                                                   f"{node.name}_{inner.name}"))
        head = nested.outputs[0]
        ctx.replace_all_uses(node.out, _outer(head, mapped, made))
        ctx.erase(node)
        ctx.stat(f"{node.op} inlined")


def _outer(entry: Entry, mapped, made) -> Entry:
    if entry.node.op is None:
        return mapped[id(entry.node)]
    return Entry(made[id(entry.node)], entry.index)
