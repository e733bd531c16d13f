"""The letterbox of each layout equals its project's own documented arithmetic, pixel for pixel, and boxes go
back the way that project's post-processing maps them (formulas: tests/fixtures/detectors/README.md)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pairedge.runtime.detectors.preprocess import letterbox, to_blob

SIZES = [(576, 768), (480, 640), (333, 1001), (1080, 1920), (416, 416), (200, 150)]


def frame(h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(h * 7 + w)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def ultralytics_letterbox(img: np.ndarray, new: tuple[int, int]) -> tuple[np.ndarray, float, int, int]:
    """Ultralytics ``LetterBox(auto=False, center=True)`` / YOLOv5 ``letterbox(auto=False)``."""
    h, w = img.shape[:2]
    r = min(new[0] / h, new[1] / w)
    unpad = (int(round(w * r)), int(round(h * r)))
    dw, dh = (new[1] - unpad[0]) / 2, (new[0] - unpad[1]) / 2
    if (w, h) != unpad:
        img = cv2.resize(img, unpad, interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    out = cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return out, r, left, top


def yolox_preproc(img: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, float]:
    """YOLOX ``preproc`` (data_augment.py), before its transpose."""
    padded = np.ones((size[0], size[1], 3), dtype=np.uint8) * 114
    r = min(size[0] / img.shape[0], size[1] / img.shape[1])
    resized = cv2.resize(img, (int(img.shape[1] * r), int(img.shape[0] * r)), interpolation=cv2.INTER_LINEAR)
    padded[: int(img.shape[0] * r), : int(img.shape[1] * r)] = resized.astype(np.uint8)
    return padded, r


@pytest.mark.parametrize(("h", "w"), SIZES)
@pytest.mark.parametrize("size", [(640, 640), (416, 416), (384, 640)])
def test_centred_letterbox_is_ultralytics(h, w, size) -> None:
    img = frame(h, w)
    ours, box = letterbox(img, size, "letterbox-center")
    ref, r, left, top = ultralytics_letterbox(img, size)
    assert ref.shape == ours.shape and np.array_equal(ours, ref)
    assert (box.pad_x, box.pad_y) == (left, top) and box.scale_x == box.scale_y == pytest.approx(r)
    net = np.array([[left + 10 * r, top + 20 * r, left + 50 * r, top + 90 * r]], np.float32)
    np.testing.assert_allclose(box.undo(net), [[10, 20, 50, 90]], atol=1e-3)  # (box - pad) / gain


@pytest.mark.parametrize(("h", "w"), SIZES)
@pytest.mark.parametrize("size", [(416, 416), (640, 640)])
def test_top_left_letterbox_is_yolox(h, w, size) -> None:
    img = frame(h, w)
    ours, box = letterbox(img, size, "letterbox-top-left")
    ref, r = yolox_preproc(img, size)
    assert np.array_equal(ours, ref)
    assert (box.pad_x, box.pad_y) == (0, 0) and box.scale_x == pytest.approx(r)
    np.testing.assert_allclose(
        box.undo(np.array([[10, 20, 30, 40]], np.float32)), [[10 / r, 20 / r, 30 / r, 40 / r]], rtol=1e-6
    )  # YOLOX: boxes / ratio


@pytest.mark.parametrize(("h", "w"), SIZES)
def test_stretch_is_a_plain_resize(h, w) -> None:
    img = frame(h, w)
    ours, box = letterbox(img, (640, 640), "stretch")
    assert np.array_equal(ours, cv2.resize(img, (640, 640), interpolation=cv2.INTER_LINEAR))
    np.testing.assert_allclose(box.undo(np.array([[0, 0, 640, 640]], np.float32)), [[0, 0, w, h]], rtol=1e-6)


def test_blob_colour_order_and_scale() -> None:
    canvas = np.zeros((2, 3, 3), np.uint8)
    canvas[..., 0], canvas[..., 2] = 10, 200  # B, R
    rgb = to_blob(canvas, rgb=True, unit_scale=True)
    assert rgb.shape == (1, 3, 2, 3) and rgb.dtype == np.float32
    assert rgb[0, 0, 0, 0] == pytest.approx(200 / 255) and rgb[0, 2, 0, 0] == pytest.approx(10 / 255)
    bgr = to_blob(canvas, rgb=False, unit_scale=False)
    assert bgr[0, 0, 0, 0] == 10 and bgr[0, 2, 0, 0] == 200
