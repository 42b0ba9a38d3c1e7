"""Time to load a DenseNet-121-sized symbol JSON: parse + IR build.

The graph is generated with mxc's own builders in DenseNet-121's shape (four
dense blocks of 6/12/24/16 layers, BN-ReLU-Conv bottlenecks, Concat growth,
transitions), about 1,000 JSON nodes like the Gluon export.  Reports the
median of repeated loads; run ``python bench/bench_load.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxc import sym  # noqa: E402
from mxc.frontend.symbol_json import load_json  # noqa: E402


def densenet121_like() -> sym.Symbol:
    def bn_relu_conv(x, channels, kernel, pad, name):
        x = sym.BatchNorm(x, name=f"{name}_bn")
        x = sym.Activation(x, act_type="relu", name=f"{name}_relu")
        return sym.Convolution(x, num_filter=channels, kernel=kernel, pad=pad, no_bias=True,
                               name=f"{name}_conv")

    x = sym.var("data")
    x = sym.Convolution(x, num_filter=64, kernel=(7, 7), stride=(2, 2), pad=(3, 3),
                        no_bias=True, name="conv0")
    x = sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    for b, layers in enumerate((6, 12, 24, 16)):
        for i in range(layers):
            y = bn_relu_conv(x, 128, (1, 1), (0, 0), f"stage{b}_{i}_a")
            y = bn_relu_conv(y, 32, (3, 3), (1, 1), f"stage{b}_{i}_b")
            x = sym.Concat(x, y, dim=1, name=f"stage{b}_{i}_concat")
        if b < 3:
            x = bn_relu_conv(x, 256, (1, 1), (0, 0), f"transition{b}")
            x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg",
                            name=f"transition{b}_pool")
    x = sym.Pooling(x, global_pool=True, kernel=(7, 7), pool_type="avg", name="gap")
    return sym.FullyConnected(sym.Flatten(x), num_hidden=1000, name="fc")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    text = densenet121_like().tojson()
    nodes = text.count('"op":')
    load_json(text)  # warm caches (grammar compilation happens at import)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        load_json(text)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1e3
    print(f"densenet121-like JSON: {nodes} nodes, {len(text) / 1e3:.0f} kB")
    print(f"load_json (parse + IR build): median {med:.1f} ms over {args.repeat} runs "
          f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}); target <= 300 ms")


if __name__ == "__main__":
    main()
