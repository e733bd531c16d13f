"""The output layouts of exported person detectors, told apart from the graph and its metadata, and decoded.

Each layout is what a project's own export script writes **by default**, with the preprocessing that
project's own inference code applies (:data:`PREPROCESS`; the letterbox arithmetic is in
:mod:`pairedge.runtime.detectors.preprocess`). ``N`` candidates, ``C`` classes; boxes in network-input
pixels unless said:

====================== ====================================================================================
``yolox-raw``          YOLOX ``tools/export_onnx.py`` as it runs by default (``--decode_in_inference`` off):
                       one output ``[1, N, 5 + C]`` with, per anchor of the stride-8 / 16 / 32 grids
                       (row-major, N = sum of (H/s)(W/s)), ``dx dy log_w log_h``, objectness and C class
                       scores (both already sigmoid). Decoded here: ``xy = (dxdy + grid) * stride``,
                       ``wh = exp(log_wh) * stride``. No ``Exp`` node in the graph.
``yolox``              the same export with ``--decode_in_inference``: ``cx cy w h`` in pixels (the graph
                       holds the ``Exp`` of that decoding). YOLOX preprocessing for both: BGR 0-255,
                       letterbox at the top-left padded with 114 (``yolox/data/data_augment.py preproc``).
``yolov5``             YOLOv5 ``export.py --include onnx``: ``output0 [1, N, 5 + C]``, decoded in the graph
                       (``cx cy w h``, objectness, class scores), 3 anchors per cell (N = 3 x the grid count);
                       metadata ``stride`` and ``names`` only. RGB / 255, letterbox centred, 114.
``ultralytics``        Ultralytics YOLOv8 / YOLO11 ``yolo export format=onnx``: ``output0 [1, 4 + C, N]``
                       (``cx cy w h`` then C class scores, no objectness). RGB / 255, letterbox centred, 114.
``ultralytics-nms``    Ultralytics with ``nms=True`` (metadata ``args`` ``'nms': True``) and the end-to-end
                       heads (YOLO26 ``nms=False``, YOLOv10; metadata ``end2end: 'True'``): ``[1, K, 6]``
                       rows ``x1 y1 x2 y2 score class``, K = ``max_det`` (300), zero rows padded.
``ultralytics-rtdetr`` Ultralytics' RT-DETR export (metadata ``head: 'RTDETRDecoder'``): ``[1, K, 6]`` rows
                       ``cx cy w h`` normalised to [0, 1], score, class (older releases: ``[1, K, 4 + C]``,
                       class scores); its predictor stretches the frame to the input (``scale_fill``).
``detr``               RT-DETR (lyuwenyu) / D-FINE ``export_onnx.py``: outputs ``labels``, ``boxes`` ``[1, K,
4]``
                       and ``scores``; with the ``orig_target_sizes`` input (int64 ``[1, 2]``, width then
                       height) boxes come out ``x1 y1 x2 y2`` in those pixels (pairedge feeds the network
                       input's size and maps back); otherwise metadata ``box_format`` (:data:`BOX_FORMATS`),
                       else ``xyxy``, normalised when every coordinate lies in [0, 1]. Their deploy scripts
                       resize the frame to the input without keeping its aspect ratio, RGB / 255.
====================== ====================================================================================

How a layout is found (:func:`identify`), never by a guess that could turn numbers into boxes they are not:
metadata first (Ultralytics writes ``task``, ``imgsz``, ``names``; YOLOv5 only ``stride`` and ``names``), then
the candidate count against the grids of the input size (anchor-free YOLOX / Ultralytics: one per cell;
YOLOv5: three), then the graph: a YOLOX output reached through an ``Exp`` is decoded, one without is raw.
Quantized (``ConvInteger``, ``QLinear*``, Q/DQ) and fp16 graphs keep the same outputs and the same tests.
What none of these settles is refused with one line naming the override (``--detector-layout NAME``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import ModelError
from pairedge.runtime.detectors.postprocess import cxcywh_to_xyxy


@dataclass(frozen=True)
class Preprocess:
    """How a project's own inference code turns a BGR frame into the network input.

    Attributes:
        resize: ``letterbox-center`` (Ultralytics / YOLOv5 ``LetterBox``), ``letterbox-top-left`` (YOLOX
            ``preproc``) or ``stretch`` (resize to the input, aspect ratio not kept: RT-DETR / D-FINE deploy
            scripts, Ultralytics' RT-DETR predictor).
        rgb: feed RGB (else BGR). unit_scale: divide by 255 (else 0-255). pad: the letterbox grey.
    """

    resize: str
    rgb: bool
    unit_scale: bool
    pad: int = 114


_YOLOX = Preprocess("letterbox-top-left", rgb=False, unit_scale=False)
_ULTRALYTICS = Preprocess("letterbox-center", rgb=True, unit_scale=True)
_STRETCH = Preprocess("stretch", rgb=True, unit_scale=True)

#: Layout name -> the preprocessing its project documents. The keys are every accepted layout.
PREPROCESS: Mapping[str, Preprocess] = {
    "yolox-raw": _YOLOX,
    "yolox": _YOLOX,
    "yolov5": _ULTRALYTICS,
    "ultralytics": _ULTRALYTICS,
    "ultralytics-nms": _ULTRALYTICS,
    "ultralytics-rtdetr": _STRETCH,
    "detr": _STRETCH,
}
LAYOUTS: tuple[str, ...] = tuple(PREPROCESS)
BOX_FORMATS = ("xyxy", "cxcywh", "xyxy-normalized", "cxcywh-normalized")
#: The strides of YOLOX's and Ultralytics' detection heads (P3 / P4 / P5).
STRIDES = (8, 16, 32)
#: Anchors per grid cell of YOLOv5's head.
YOLOV5_ANCHORS = 3
_DETR_NAMES = ("boxes", "scores", "labels")
_OVERRIDE = "pass --detector-layout NAME (" + ", ".join(LAYOUTS) + ") if you know it"


@dataclass(frozen=True)
class Layout:
    """How to feed a detector and read its outputs.

    Attributes:
        kind: one of :data:`LAYOUTS`.
        outputs: the output names to fetch, in the order :func:`decode` reads them.
        box_format: ``detr`` only: one of :data:`BOX_FORMATS`, or None (``xyxy``, normalised when every
            coordinate lies in [0, 1]).
        reason: how the layout was told apart (for notes and errors).
    """

    kind: str
    outputs: tuple[str, ...]
    box_format: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PREPROCESS:
            raise ModelError(f"unknown detector layout {self.kind!r}; expected one of {', '.join(LAYOUTS)}")

    @property
    def preprocess(self) -> Preprocess:
        """The preprocessing of this layout's project (:data:`PREPROCESS`)."""
        return PREPROCESS[self.kind]


def layout_record(layout: Layout) -> dict[str, object]:
    """``layout`` as a JSON object (a detector engine manifest's ``layout``), its preprocessing spelled out
    for readers of the file (the runtime takes the preprocessing from ``kind``)."""
    pre = layout.preprocess
    return {
        "kind": layout.kind,
        "outputs": list(layout.outputs),
        "box_format": layout.box_format,
        "reason": layout.reason,
        "resize": pre.resize,
        "rgb": pre.rgb,
        "unit_scale": pre.unit_scale,
    }


def layout_from_record(record: Mapping[str, object]) -> Layout:
    """The :class:`Layout` of a :func:`layout_record` object (raises ModelError on an unknown kind)."""
    outputs = record.get("outputs")
    fmt = record.get("box_format")
    return Layout(
        str(record.get("kind")),
        tuple(str(o) for o in outputs) if isinstance(outputs, list) else (),
        str(fmt) if fmt is not None else None,
        str(record.get("reason", "")),
    )


@dataclass(frozen=True)
class GraphFacts:
    """What :func:`identify` reads of a detector (from its ONNX file, or a probe run for concrete shapes).

    Attributes:
        name: the file name, for messages.
        outputs: ``(name, shape)`` per graph output; dimensions int, or str when symbolic.
        metadata: ``metadata_props``.
        op_types: every node type of the graph (subgraphs included).
        input_size: (height, width) of the image input.
        size_input: whether the graph has RT-DETR's ``orig_target_sizes`` input.
    """

    name: str
    outputs: tuple[tuple[str, tuple[int | str, ...]], ...]
    metadata: Mapping[str, str]
    op_types: frozenset[str]
    input_size: tuple[int, int]
    size_input: bool = False


def grid_cells(input_size: tuple[int, int], strides: Sequence[int] = STRIDES) -> int | None:
    """Cells of the stride grids of an (height, width) input (one candidate each in anchor-free heads), or
    None when a side is not a multiple of the largest stride."""
    h, w = input_size
    if any(h % s or w % s for s in strides):
        return None
    return sum((h // s) * (w // s) for s in strides)


def class_count(metadata: Mapping[str, str]) -> int | None:
    """The number of classes named by the metadata ``names`` (``"{0: 'person', ...}"``), or None."""
    text = metadata.get("names")
    if not text:
        return None
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return len(names) if isinstance(names, dict | list | tuple) and names else None


def _truthy(text: str | None) -> bool:
    return str(text).strip().lower() in ("true", "1")


def _ultralytics_nms(metadata: Mapping[str, str]) -> bool:
    """Ultralytics metadata saying the graph ends in NMS (``args: {'nms': True}``) or is end-to-end."""
    if _truthy(metadata.get("end2end")):
        return True
    try:
        args = ast.literal_eval(metadata.get("args", "{}"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return isinstance(args, dict) and bool(args.get("nms"))


def identify(facts: GraphFacts) -> Layout:
    """The layout of a detector (see the module docstring for the rules).

    Raises:
        ModelError: no rule settles it (one line naming the file, what it has and the override).
    """
    outputs, md = facts.outputs, facts.metadata
    by_name = {n.rsplit("/", 1)[-1].lower(): n for n, _ in outputs}
    shapes = ", ".join(f"{n} {list(s)}" for n, s in outputs) or "no output"
    if all(k in by_name for k in _DETR_NAMES):
        fmt = md.get("box_format")
        if fmt is not None and fmt not in BOX_FORMATS:
            raise ModelError(
                f"{facts.name}: metadata box_format {fmt!r} is not one of {', '.join(BOX_FORMATS)}"
            )
        return Layout(
            "detr",
            tuple(by_name[k] for k in _DETR_NAMES),
            "xyxy" if facts.size_input else fmt,
            "outputs named boxes, scores, labels",
        )
    if len(outputs) != 1 or len(outputs[0][1]) != 3:
        raise ModelError(
            f"{facts.name}: unknown detector layout ({shapes}): expected one output of rank 3 or "
            f"outputs boxes, scores, labels; {_OVERRIDE}"
        )
    out_name, (_, a, b) = outputs[0]
    nc = class_count(md)
    cells = grid_cells(facts.input_size)
    why = _by_metadata(md, a, b, nc)
    kind = why[0] if why else None
    reason = why[1] if why else ""
    if kind is None and isinstance(a, int) and isinstance(b, int) and cells is not None:
        if a == cells and b >= 6:
            kind = "yolox" if "Exp" in facts.op_types else "yolox-raw"
            reason = f"{a} candidates = one per cell of the stride-8/16/32 grids, " + (
                "decoded in the graph (it computes Exp)" if kind == "yolox" else "no Exp in the graph: raw"
            )
        elif a == YOLOV5_ANCHORS * cells and b >= 6:
            kind, reason = "yolov5", f"{a} candidates = 3 anchors per grid cell"
        elif b == cells and 5 <= a < b:
            kind, reason = "ultralytics", f"{b} candidates along the last axis, one per grid cell"
    if kind is None:
        h, w = facts.input_size
        raise ModelError(
            f"{facts.name}: cannot tell the detector layout of {shapes} (input {w}x{h}, metadata "
            f"{sorted(md) or 'none'}) from its metadata, candidate count or graph; {_OVERRIDE}"
        )
    least = {"ultralytics": 5}.get(kind, 6)
    rows = a if kind == "ultralytics" else b
    if isinstance(rows, int) and rows < least:
        raise ModelError(f"{facts.name}: a {kind} output needs at least {least} values per box, got {shapes}")
    return Layout(kind, (out_name,), reason=reason)


def _by_metadata(md: Mapping[str, str], a: object, b: object, nc: int | None) -> tuple[str, str] | None:
    """``(kind, reason)`` when the export's own metadata settles the layout of output ``[1, a, b]``."""
    ultralytics = "task" in md or str(md.get("author", "")).startswith("Ultralytics")
    if ultralytics:
        if md.get("head") == "RTDETRDecoder":
            return "ultralytics-rtdetr", "Ultralytics metadata, head RTDETRDecoder"
        if _ultralytics_nms(md):
            return (
                "ultralytics-nms",
                "Ultralytics metadata, NMS or an end-to-end head in the graph ([1, K, 6])",
            )
        return "ultralytics", "Ultralytics metadata (task, names)"
    if "stride" in md and nc is not None and b == 5 + nc:
        return "yolov5", f"YOLOv5 metadata (stride, names), {nc} classes + objectness on the last axis"
    return None


def forced(kind: str, facts: GraphFacts) -> Layout:
    """The layout ``kind`` forced by ``--detector-layout`` (its output shapes are checked at each frame).

    Raises:
        ModelError: an unknown name, or outputs that cannot be read that way at all.
    """
    if kind not in PREPROCESS:
        raise ModelError(f"--detector-layout: unknown layout {kind!r}; expected one of {', '.join(LAYOUTS)}")
    reason = "forced by --detector-layout"
    if kind == "detr":
        by_name = {n.rsplit("/", 1)[-1].lower(): n for n, _ in facts.outputs}
        if not all(k in by_name for k in _DETR_NAMES):
            raise ModelError(f"{facts.name}: layout 'detr' needs outputs named boxes, scores and labels")
        return Layout(
            "detr",
            tuple(by_name[k] for k in _DETR_NAMES),
            "xyxy" if facts.size_input else facts.metadata.get("box_format"),
            reason,
        )
    if len(facts.outputs) != 1:
        raise ModelError(f"{facts.name}: layout {kind!r} needs exactly one output, got {len(facts.outputs)}")
    return Layout(kind, (facts.outputs[0][0],), reason=reason)


def decode(
    layout: Layout, arrays: list[np.ndarray], input_size: tuple[int, int], name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw candidates of one frame from the model's outputs (in ``layout.outputs`` order).

    Args:
        input_size: (height, width) of the network input.

    Returns:
        ``(x1 y1 x2 y2 (N, 4) float32 in network-input pixels, scores (N,) float32, class ids (N,) int64)``.

    Raises:
        ModelError: outputs whose shapes do not match the layout.
    """
    if layout.kind == "detr":
        return _decode_detr(layout, arrays, input_size, name)
    out = np.asarray(arrays[0], np.float32)
    if out.ndim != 3 or out.shape[0] != 1:
        raise ModelError(f"{name}: expected a {layout.kind} output [1, ..., ...], got {list(out.shape)}")
    rows = out[0].T if layout.kind == "ultralytics" else out[0]
    least = {"ultralytics": 5, "ultralytics-rtdetr": 6}.get(layout.kind, 6)
    if rows.shape[1] < least:
        raise ModelError(
            f"{name}: {layout.kind} output needs >= {least} values per box, got {list(out.shape)}"
        )
    if layout.kind == "ultralytics-nms":
        return rows[:, :4].copy(), rows[:, 4].copy(), _class_column(rows[:, 5])
    if layout.kind == "ultralytics-rtdetr" and rows.shape[1] == 6:  # cx cy w h (normalised), score, class
        h, w = input_size
        boxes = cxcywh_to_xyxy(rows[:, :4] * np.array([w, h, w, h], np.float32))
        return boxes, rows[:, 4].copy(), _class_column(rows[:, 5])
    objectness = layout.kind in ("yolox-raw", "yolox", "yolov5")
    cls_scores = rows[:, 5:] if objectness else rows[:, 4:]
    classes = cls_scores.argmax(axis=1).astype(np.int64)
    scores = cls_scores[np.arange(len(rows)), classes]
    if objectness:
        scores = scores * rows[:, 4]
    boxes = rows[:, :4]
    if layout.kind == "yolox-raw":
        boxes = _yolox_grid_decode(boxes, input_size, name)
    elif layout.kind == "ultralytics-rtdetr":
        h, w = input_size
        boxes = boxes * np.array([w, h, w, h], np.float32)
    return cxcywh_to_xyxy(boxes), scores.astype(np.float32), classes


def _class_column(values: np.ndarray) -> np.ndarray:
    """A float class-id column as int64 (non-finite -> -1, no class)."""
    v = np.where(np.isfinite(values), values, -1)
    return np.rint(np.clip(v, -1, 2**31)).astype(np.int64)


def _yolox_grid_decode(raw: np.ndarray, input_size: tuple[int, int], name: str) -> np.ndarray:
    """YOLOX's ``decode_outputs``: (N, 4) ``dx dy log_w log_h`` per grid cell -> (N, 4) ``cx cy w h``
    pixels."""
    grid, stride = _grid(input_size)
    if len(grid) != len(raw):
        h, w = input_size
        raise ModelError(
            f"{name}: a raw YOLOX output for a {w}x{h} input has {len(grid)} candidates (stride "
            f"8/16/32 grids), got {len(raw)}"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        wh = np.exp(raw[:, 2:4]) * stride
    return np.concatenate([(raw[:, 0:2] + grid) * stride, wh], axis=1).astype(np.float32)


_GRIDS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _grid(input_size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) float32 cell ``x y`` and (N, 1) float32 stride of the stride-8/16/32 grids, row-major per level
    (YOLOX's ``meshgrid`` order), cached per input size (a detector has one)."""
    if input_size not in _GRIDS:
        h, w = input_size
        cells, strides = [], []
        for s in STRIDES:
            ys, xs = np.meshgrid(np.arange(h // s), np.arange(w // s), indexing="ij")
            cells.append(np.stack([xs, ys], axis=-1).reshape(-1, 2))
            strides.append(np.full((len(cells[-1]), 1), s))
        if len(_GRIDS) > 16:  # input sizes are per model: a handful at most
            _GRIDS.clear()
        _GRIDS[input_size] = (
            np.concatenate(cells).astype(np.float32),
            np.concatenate(strides).astype(np.float32),
        )
    return _GRIDS[input_size]


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
        fmt = (
            "xyxy-normalized" if len(b) and np.isfinite(b).all() and b.min() >= 0 and b.max() <= 1 else "xyxy"
        )
    if fmt.startswith("cxcywh"):
        b = cxcywh_to_xyxy(b)
    if fmt.endswith("normalized"):
        h, w = input_size
        b = b * np.array([w, h, w, h], np.float32)
    return b, scores.reshape(-1).astype(np.float32), labels.reshape(-1).astype(np.int64)
