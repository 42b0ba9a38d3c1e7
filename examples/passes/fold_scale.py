"""A custom graph pass, end to end: fold ``layer(x) * c`` into the layer's parameters.

``y = (W x + b) * c`` is ``y = (c W) x + c b``: a ``_mul_scalar`` after a
Convolution or FullyConnected that nothing else reads can disappear if the
layer's weight and bias are scaled instead.  The pass below

* matches the two nodes with a pattern,
* reads the parameter arrays from the pass context and replaces them
  (``ctx.alloc_arg`` on the existing variables),
* returns the layer's output as the replacement of the multiplication,

and then runs in a pipeline with two built-in passes.  Run it from the
repository root::

    python examples/passes/fold_scale.py
"""

from __future__ import annotations

import numpy as np

import mxc
from mxc.passes import Option, Pass, is_op, is_var, wildcard


@mxc.register_pass("fold-scale")
class FoldScale(Pass):
    """Fold a _mul_scalar after a Convolution/FullyConnected into its weight and bias."""

    max_scale = Option(float, 1e6, "leave larger scales alone")

    def run(self, graph, ctx):
        layer = is_op("Convolution", "FullyConnected")(wildcard(), is_var(), ...).one_use()
        scaled = is_op("_mul_scalar")(layer)

        def fold(match):
            node, c = match.node(layer), match.root.node.params.scalar
            params = [e.node for e in node.inputs[1:]]      # weight (and bias)
            if abs(c) > self.max_scale or any(ctx.param(p) is None or p.num_uses() > 1
                                               for p in params):
                return None                                 # decline: graph untouched
            for p in params:
                ctx.alloc_arg(p, value=ctx.param(p) * np.float32(c))
            return node.out                                 # replaces the _mul_scalar

        ctx.stat("scales folded", mxc.rewrite(ctx, scaled, fold))


def build():
    with mxc.sym.NameManager():
        x = mxc.sym.var("data")
        y = mxc.sym.Convolution(x, kernel=(3, 3), num_filter=8, name="conv")
        y = mxc.sym.BatchNorm(y * 0.5, fix_gamma=False, name="bn")
        y = mxc.sym.Activation(y, act_type="relu", name="relu")
        y = mxc.sym.FullyConnected(y, num_hidden=4, name="fc")
        return y * 2.0


def random_params(sym, data_shape, seed=0):
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(data=data_shape)
    args = {n: rng.standard_normal(s).astype(np.float32)
            for n, s in zip(sym.list_arguments(), arg_shapes) if n != "data"}
    aux = {n: rng.uniform(0.5, 2.0, s).astype(np.float32)
           for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    return args, aux


def main() -> None:
    sym = build()
    args, aux = random_params(sym, (2, 3, 8, 8))
    data = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)

    result = mxc.passes.run(sym, "fold-scale,fold-batchnorm,dce", args, aux)
    new_sym, new_args, new_aux = result
    for name, stats in result.statistics:
        print(f"{name}: {stats}")
    print(f"nodes: {len(sym.graph.topo_order())} -> {len(new_sym.graph.topo_order())}")
    print(new_sym.graph)

    before = sym.bind(args={**args, "data": data}, aux_states=aux).forward()[0]
    after = new_sym.bind(args={**new_args, "data": data}, aux_states=new_aux).forward()[0]
    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4)
    print(f"outputs match (max abs diff {np.abs(after - before).max():.2e})")


if __name__ == "__main__":
    main()
