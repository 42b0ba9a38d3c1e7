"""Image ops where MXNet 1.9.1 has no case or is wrong: odd-size flips, NHWC batches.

Oracle: small images whose mirrored values are written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym as S


def _run(op, x, **attrs):
    y = getattr(S, op)(S.var("x"), **attrs)
    return np.asarray(y.bind(args={"x": x}).forward()[0])


def test_flip_left_right_odd_width_keeps_the_middle_column():
    x = np.array([[[1], [2], [3]],
                  [[4], [5], [6]]], np.uint8)          # H=2, W=3 (odd), C=1
    want = np.array([[[3], [2], [1]],
                     [[6], [5], [4]]], np.uint8)
    np.testing.assert_array_equal(_run("_image_flip_left_right", x), want)


def test_flip_top_bottom_odd_height_keeps_the_middle_row():
    x = np.array([[[1, 10]], [[2, 20]], [[3, 30]]], np.uint8)   # H=3 (odd), W=1, C=2
    want = np.array([[[3, 30]], [[2, 20]], [[1, 10]]], np.uint8)
    np.testing.assert_array_equal(_run("_image_flip_top_bottom", x), want)


def test_flips_apply_to_every_image_of_an_nhwc_batch():
    x = np.array([[[[1], [2], [3]]], [[[7], [8], [9]]]], np.float32)   # N=2, H=1, W=3
    want = np.array([[[[3], [2], [1]]], [[[9], [8], [7]]]], np.float32)
    np.testing.assert_array_equal(_run("_image_flip_left_right", x), want)


def test_adjust_lighting_saturates_uint8():
    x = np.array([[[250, 5, 128]]], np.uint8)
    got = _run("_image_adjust_lighting", x, alpha=(-1.0, 0.0, 0.0))
    # alpha (-1, 0, 0) adds -55.46 * eigvec[:, 0] = (31.47, 32.21, 32.37) to R, G, B
    np.testing.assert_array_equal(got, np.array([[[255, 37, 160]]], np.uint8))


def test_resize_rejects_interpolations_other_than_nearest_and_bilinear():
    from mxc.errors import AttributeInvalidError
    with pytest.raises(AttributeInvalidError, match="interp"):
        S._image_resize(S.var("x"), size=(4, 4), interp=3).infer_shape(x=(8, 8, 3))


def test_resize_nearest_picks_floor_of_the_scaled_position():
    x = np.arange(4 * 6, dtype=np.uint8).reshape(4, 6, 1)
    got = _run("_image_resize", x, size=(4, 3), interp=0)        # w=4, h=3
    rows, cols = [0, 1, 2], [0, 1, 3, 4]                          # floor(o * 4/3), floor(o * 6/4)
    np.testing.assert_array_equal(got, x[rows][:, cols])
