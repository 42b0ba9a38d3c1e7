"""``bench/layers.py``'s arithmetic and kernel selection (no timing: it is a benchmark).

Oracle: FLOPs counted by hand for a non-square kernel and a batch; kernel names as
the VM reports them."""

from __future__ import annotations

from bench.layers import LAYERS, is_layout_only, layer_flops


def test_flops_of_a_1x7_layer_at_batch_8():
    cin, cout, size, kernel, stride, groups, _ = LAYERS["iv3_1x7"]
    assert (cin, cout, size, kernel) == (128, 128, 17, (1, 7))
    # 17x17 outputs (padding 0 x 3), 128 x 128 x 7 multiply-adds each, 8 images
    assert layer_flops(cin, cout, size, kernel, stride, groups, 8) == 2 * 8 * 17 * 17 * 128 * 128 * 7
    assert layer_flops(64, 64, 56, 3, 1, 1) == 2 * 56 * 56 * 64 * 64 * 9


def test_only_pure_layout_kernels_are_left_out():
    assert is_layout_only("transpose") and is_layout_only("transpose12")
    assert is_layout_only("vm.builtin.alloc_storage")
    assert not is_layout_only("fused_winograd_output_add_less_equal_where_transpose11")
    assert not is_layout_only("fused_conv2d_nhwc_bf16_add_less_equal_where1")


def test_output_layout_counts_the_transpose_after_the_layer_only():
    """Comparing Winograd modes, a direct convolution pays for its NCHW output's
    transpose (the Winograd output transform writes NCHW fused); the input's transpose
    before the layer stays out of both."""
    from bench.layers import _recorded_calls, compile_layer
    case = compile_layer("s2_32", "llvm", winograd="off")
    alone = [name for name, _ in _recorded_calls(case["exe"], case["x"])]
    both = [name for name, _ in _recorded_calls(case["exe"], case["x"], output_layout=True)]
    assert len(alone) == 1 and not is_layout_only(alone[0])
    assert both[0] == alone[0] and len(both) == 2 and is_layout_only(both[1])
