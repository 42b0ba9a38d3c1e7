"""The numpy reference backend's detection operators on realistic inputs, timed per call.

    python bench/bench_reference_ops.py                  # every case, default sizes
    python bench/bench_reference_ops.py roialign box_nms --rois 300 --runs 3
    python bench/bench_reference_ops.py --profile roialign   # + cProfile's top functions

The reference backend (``mxc run MODEL-symbol.json``'s default, and the
oracle) runs two-stage detectors (Faster/Mask R-CNN) in minutes when one of
these operators loops in Python or contracts naively.  Each case is one
operator node run by :func:`mxc.backends.reference.run_graph` on the inputs a
detector gives it (sizes below, seeded); reported is the median of ``--runs``
calls (after one untimed call) with the p10-p90 range.  Compare two trees by
running this script with each on ``PYTHONPATH`` (the cases only use
``mxc.sym`` and ``run_graph``).

Cases (defaults: a 600x800 image, stride-16 features):

* ``roialign``: ``_contrib_ROIAlign`` of ``--rois`` ROIs on a 1x256x38x50 map,
  7x7 bins, ``sample_ratio`` 2 (Mask R-CNN's box head);
* ``roialign_adaptive``: the same with ``sample_ratio`` -1;
* ``roipooling``: ``ROIPooling`` of ``--rois`` ROIs, 7x7 bins;
* ``box_nms``: ``_contrib_box_nms`` over ``--boxes`` class-less proposals
  (``force_suppress``, IoU 0.7: an RPN's);
* ``box_nms_classes``: over ``--boxes`` boxes of 20 classes (IoU 0.5, per
  class: a detector's final suppression);
* ``proposal``: ``_contrib_Proposal`` on 12 anchors x 38 x 50 (6,000 -> 300).

``--model DIR`` (repeatable) times whole models instead: one reference run of a
corpus-format directory (``symbol.json``, ``model.params``, ``io.npz``; e.g.
the detectors ``bench/peers/zoo_export.py --all`` writes), its wall and CPU
seconds, the seconds per operator type (the five slowest) and the largest
difference from MXNet's outputs in ``io.npz``::

    python bench/bench_reference_ops.py --model zoo-models/mask_rcnn_resnet50_v1b_coco
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import machine  # noqa: E402
from bench.timing import measure, summarize  # noqa: E402

IMAGE = (600, 800)
STRIDE = 16


def _boxes(rng, n, width=None):
    """*n* corner boxes inside the image, clustered the way detections are."""
    import numpy as np
    h, w = IMAGE
    centers = rng.uniform((0, 0), (w, h), size=(max(1, n // 20), 2))
    c = centers[rng.integers(0, len(centers), n)] + rng.normal(0, 12, (n, 2))
    size = rng.uniform(16, 200, (n, 2))
    box = np.concatenate([c - size / 2, c + size / 2], axis=1)
    box[:, 0::2] = box[:, 0::2].clip(0, w - 1)
    box[:, 1::2] = box[:, 1::2].clip(0, h - 1)
    return box.astype(np.float32)


def cases(args) -> dict:
    """name -> (op, attrs, feeds)."""
    import numpy as np
    rng = np.random.default_rng(0)
    fh, fw = IMAGE[0] // STRIDE + 1, IMAGE[1] // STRIDE
    feat = rng.standard_normal((1, 256, fh, fw)).astype(np.float32)
    rois = np.concatenate([np.zeros((args.rois, 1), np.float32), _boxes(rng, args.rois)], 1)
    scores = rng.uniform(0, 1, (args.boxes, 1)).astype(np.float32)
    rpn = np.concatenate([scores, _boxes(rng, args.boxes)], 1)[None]
    ids = rng.integers(0, 20, (args.boxes, 1)).astype(np.float32)
    det = np.concatenate([ids, scores, _boxes(rng, args.boxes)], 1)[None]
    na = 12
    cls = rng.uniform(0, 1, (1, 2 * na, fh, fw)).astype(np.float32)
    deltas = (rng.standard_normal((1, 4 * na, fh, fw)) * 0.1).astype(np.float32)
    im_info = np.array([[IMAGE[0], IMAGE[1], 1.0]], np.float32)
    align = dict(pooled_size=(7, 7), spatial_scale=1.0 / STRIDE, sample_ratio=2)
    return {
        "roialign": ("_contrib_ROIAlign", align, {"data": feat, "rois": rois}),
        "roialign_adaptive": ("_contrib_ROIAlign", {**align, "sample_ratio": -1},
                              {"data": feat, "rois": rois}),
        "roipooling": ("ROIPooling", dict(pooled_size=(7, 7), spatial_scale=1.0 / STRIDE),
                       {"data": feat, "rois": rois}),
        "box_nms": ("_contrib_box_nms", dict(overlap_thresh=0.7, coord_start=1, score_index=0,
                                             id_index=-1, force_suppress=True, topk=6000),
                    {"data": rpn}),
        "box_nms_classes": ("_contrib_box_nms", dict(overlap_thresh=0.5, valid_thresh=0.01,
                                                     coord_start=2, score_index=1, id_index=0,
                                                     topk=-1), {"data": det}),
        "proposal": ("_contrib_Proposal", dict(rpn_pre_nms_top_n=6000, rpn_post_nms_top_n=300,
                                               threshold=0.7, rpn_min_size=16),
                     {"cls_prob": cls, "bbox_pred": deltas, "im_info": im_info}),
    }


def op_call(op: str, attrs: dict, feeds: dict):
    """A no-argument function running the one-node graph of *op* on *feeds*."""
    from mxc import sym as S
    from mxc.backends.reference import run_graph
    node = getattr(S, op)(*(S.var(k) for k in feeds), **attrs, name="op")
    return lambda: run_graph(node.graph, feeds)


def model_run(directory: Path) -> dict:
    """One reference run of a corpus-format model directory, timed per operator type."""
    import collections
    import time

    import numpy as np
    import mxc
    from mxc.backends.reference import run_graph
    from mxc.compiler import interpret

    sym = mxc.sym.load(str(directory / "symbol.json"))
    params = mxc.nd.load(str(directory / "model.params"))
    values = {k.split(":", 1)[-1]: v for k, v in params.items()}     # arg:/aux: prefixes
    with np.load(directory / "io.npz") as z:
        feeds = {k[4:]: z[k] for k in z.files if k.startswith("in__")}
        ref = [z[k] for k in sorted((k for k in z.files if k.startswith("out__")),
                                    key=lambda k: int(k[5:]))]
    per_op: collections.Counter = collections.Counter()
    original = interpret._run_node

    def timed(node, *a, **k):            # the interpreter's one call per node
        t = time.perf_counter()
        try:
            return original(node, *a, **k)
        finally:
            per_op[node.op] += time.perf_counter() - t
    interpret._run_node = timed
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        with np.errstate(all="ignore"):
            outs = run_graph(sym.graph, {**values, **feeds})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        interpret._run_node = original
    err = 0.0
    for got, want in zip(outs, ref):
        got, want = np.asarray(got, "f8"), want.astype("f8")
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        with np.errstate(all="ignore"):
            diff = np.where(same, 0.0, np.abs(got - want))
        err = max(err, float(diff.max()) if diff.size else 0.0)
    return {"model": directory.name, "wall": wall, "cpu": cpu, "max_err": err,
            "ops": per_op.most_common(5)}


def main_models(dirs: list[Path]) -> None:
    print("\n".join(machine.format_machine(machine.machine_info())))
    print("\n| model | wall s | CPU s | slowest op types (s) | max abs err vs MXNet |"
          "\n|---|---:|---:|---|---:|")
    for d in dirs:
        r = model_run(d)
        ops = ", ".join(f"{op} {t:.1f}" for op, t in r["ops"])
        print(f"| {r['model']} | {r['wall']:.1f} | {r['cpu']:.1f} | {ops} | {r['max_err']:.3g} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--rois", type=int, default=1000)
    ap.add_argument("--boxes", type=int, default=6000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print cProfile's top 12 per case")
    ap.add_argument("--model", type=Path, action="append", default=[], metavar="DIR",
                    help="time whole models (corpus-format directories) instead")
    args = ap.parse_args()
    if args.model:
        return main_models(args.model)
    table = cases(args)
    names = args.cases or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(table)}")
    print("\n".join(machine.format_machine(machine.machine_info())))
    print(f"\nrois {args.rois}, boxes {args.boxes}, {args.runs} run(s) after 1 warm-up\n")
    print("| case | op | median ms | p10-p90 ms |\n|---|---|---:|---:|")
    profiles = []
    for name in names:
        op, attrs, feeds = table[name]
        call = op_call(op, attrs, feeds)
        s = summarize(measure(call, 1, args.runs))
        print(f"| {name} | {op} | {s['median_ms']:.1f} | {s['p10_ms']:.1f}-{s['p90_ms']:.1f} |",
              flush=True)
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(call)
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
            profiles.append(f"\n## {name}\n{out.getvalue()}")
    print("".join(profiles))


if __name__ == "__main__":
    main()
