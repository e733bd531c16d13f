"""The output layouts of exported person detectors that :class:`~pairedge.runtime.detectors.onnx.OnnxDetector`
reads, found from the model's output names, shapes and metadata.

Accepted (``N`` candidates, ``C`` classes, boxes in network-input pixels unless said):

- ``ultralytics``: Ultralytics YOLOv8 / YOLO11 ``yolo export format=onnx``: one output ``[1, 4 + C, N]``,
  rows ``cx cy w h`` then C class scores (no objectness). Found by the export's metadata (``names`` with
  ``stride`` or ``imgsz``), its output name ``output0``, or a static shape whose second axis is the
  shorter. Input RGB / 255, letterbox centred.
- ``yolox``: YOLOX ``export_onnx.py`` in its *decoded* form (the default, ``decode_in_inference``): one
  output ``[1, N, 5 + C]``, columns ``cx cy w h``, objectness, C class scores; score = objectness x class
  score. Raw grid outputs (exported with decoding off) are not decoded here: their boxes would come out as
  grid offsets. Input BGR 0-255, letterbox at the top-left (YOLOX's ``preproc``).
- ``detr``: end-to-end DETR-style heads (RT-DETR ``export_onnx.py``, D-FINE, ...): outputs named ``boxes``
  ``[1, N, 4]``, ``scores`` ``[1, N]`` and ``labels`` ``[1, N]`` (any order), already thresholded by the
  model's own top-k, no NMS needed but it is applied anyway. Boxes are ``x1 y1 x2 y2``: with a second input
  ``orig_target_sizes`` (RT-DETR's, int64 ``[1, 2]``) it is fed the network input's ``(width, height)`` so
  boxes come out in its pixels; otherwise metadata ``box_format`` says ``xyxy``, ``cxcywh``,
  ``xyxy-normalized`` or ``cxcywh-normalized``, and without it boxes are ``xyxy``, taken as normalised to
  [0, 1] when every coordinate of the frame lies in [0, 1]. Input RGB / 255, letterbox centred.

Anything else (several outputs without those names, a rank other than 3, fewer than 5 rows) is refused
with one line naming what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import ModelError
from pairedge.runtime.detectors.postprocess import cxcywh_to_xyxy

LAYOUTS = ("ultralytics", "yolox", "detr")
BOX_FORMATS = ("xyxy", "cxcywh", "xyxy-normalized", "cxcywh-normalized")
_DETR_NAMES = ("boxes", "scores", "labels")


@dataclass(frozen=True)
class Layout:
    """How to feed a detector and read its outputs.

    Attributes:
        kind: one of :data:`LAYOUTS`.
        outputs: the output names to fetch, in the order :func:`decode` reads them.
        center: letterbox centred (else at the top-left).
        rgb: feed RGB (else BGR). unit_scale: divide pixels by 255 (else 0-255).
        box_format: ``detr`` only: one of :data:`BOX_FORMATS`, or None (``xyxy``, normalised when every
            coordinate lies in [0, 1]).
    """

    kind: str
    outputs: tuple[str, ...]
    center: bool = True
    rgb: bool = True
    unit_scale: bool = True
    box_format: str | None = None


def find_layout(
    outputs: list[tuple[str, tuple[object, ...]]], metadata: dict[str, str], size_input: bool, name: str
) -> Layout:
    """The layout of a model from its ``(output name, shape)`` pairs (dimensions int or symbolic), its
    metadata and whether it has an ``orig_target_sizes`` input.

    Raises:
        ModelError: no accepted layout (one line naming the file ``name`` and what was expected).
    """
    by_name = {n.rsplit("/", 1)[-1].lower(): n for n, _ in outputs}
    if all(k in by_name for k in _DETR_NAMES):
        fmt = metadata.get("box_format")
        if fmt is not None and fmt not in BOX_FORMATS:
            raise ModelError(f"{name}: metadata box_format {fmt!r} is not one of {', '.join(BOX_FORMATS)}")
        return Layout("detr", tuple(by_name[k] for k in _DETR_NAMES), box_format="xyxy" if size_input else fmt)
    shapes = ", ".join(f"{n} {list(s)}" for n, s in outputs)
    expected = (
        "expected one output [1, 4 + classes, N] (Ultralytics YOLOv8/11), [1, N, 5 + classes] (YOLOX, decoded) "
        "or outputs boxes [1, N, 4], scores [1, N], labels [1, N] (DETR / RT-DETR)"
    )
    if len(outputs) != 1 or len(outputs[0][1]) != 3:
        raise ModelError(f"{name}: unknown detector layout ({shapes}); {expected}")
    out_name, (_, a, b) = outputs[0]
    ultralytics_meta = "names" in metadata and ("stride" in metadata or "imgsz" in metadata)
    if ultralytics_meta or out_name == "output0":
        kind = "ultralytics"
    elif isinstance(a, int) and isinstance(b, int):
        kind = "ultralytics" if a < b else "yolox"
    elif isinstance(a, int):
        kind = "ultralytics"
    elif isinstance(b, int):
        kind = "yolox"
    else:
        raise ModelError(f"{name}: cannot tell the layout of {shapes} (both axes dynamic, no metadata); {expected}")
    rows = a if kind == "ultralytics" else b
    least = 5 if kind == "ultralytics" else 6
    if isinstance(rows, int) and rows < least:
        raise ModelError(f"{name}: {kind} layout needs at least {least} values per box, got {shapes}; {expected}")
    if kind == "yolox":
        return Layout("yolox", (out_name,), center=False, rgb=False, unit_scale=False)
    return Layout("ultralytics", (out_name,))


def decode(
    layout: Layout, arrays: list[np.ndarray], input_size: tuple[int, int], name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw candidates of one frame from the model's outputs (in ``layout.outputs`` order).

    Args:
        input_size: (height, width) of the network input (for normalised boxes).

    Returns:
        ``(x1 y1 x2 y2 (N, 4) float32 in network-input pixels, scores (N,) float32, class ids (N,) int64)``.

    Raises:
        ModelError: outputs whose shapes do not match the layout.
    """
    if layout.kind == "detr":
        return _decode_detr(layout, arrays, input_size, name)
    out = np.asarray(arrays[0], np.float32)
    least = 5 if layout.kind == "ultralytics" else 6
    if out.ndim != 3 or out.shape[0] != 1:
        raise ModelError(f"{name}: expected a {layout.kind} output [1, ..., ...], got {list(out.shape)}")
    rows = out[0].T if layout.kind == "ultralytics" else out[0]  # (N, 4 + C) or (N, 5 + C)
    if rows.shape[1] < least:
        raise ModelError(f"{name}: {layout.kind} output needs >= {least} values per box, got {list(out.shape)}")
    cls_scores = rows[:, 4:] if layout.kind == "ultralytics" else rows[:, 5:]
    classes = cls_scores.argmax(axis=1).astype(np.int64)
    scores = cls_scores[np.arange(len(rows)), classes]
    if layout.kind == "yolox":
        scores = scores * rows[:, 4]
    return cxcywh_to_xyxy(rows[:, :4]), scores.astype(np.float32), classes


def _decode_detr(
    layout: Layout, arrays: list[np.ndarray], input_size: tuple[int, int], name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    boxes, scores, labels = (np.asarray(a) for a in arrays)
    ok = boxes.ndim == 3 and boxes.shape[0] == 1 and boxes.shape[2] == 4
    n = boxes.shape[1] if ok else -1
    if not (ok and scores.reshape(-1).shape == (n,) and labels.reshape(-1).shape == (n,)):
        raise ModelError(
            f"{name}: expected DETR outputs boxes [1, N, 4], scores [1, N], labels [1, N], got "
            f"{list(boxes.shape)}, {list(scores.shape)}, {list(labels.shape)}"
        )
    b = boxes[0].astype(np.float32)
    fmt = layout.box_format
    if fmt is None:
        fmt = "xyxy-normalized" if len(b) and np.isfinite(b).all() and b.min() >= 0 and b.max() <= 1 else "xyxy"
    if fmt.startswith("cxcywh"):
        b = cxcywh_to_xyxy(b)
    if fmt.endswith("normalized"):
        h, w = input_size
        b = b * np.array([w, h, w, h], np.float32)
    return b, scores.reshape(-1).astype(np.float32), labels.reshape(-1).astype(np.int64)
