"""The parity pack: a small portable ``.npz`` with a short clip and what the fp32 pipeline made of it.

Written on the workstation by ``pairedge parity pack``, read on the robot by ``pairedge parity check``. It is
a plain numpy ``.npz`` (compressed) read with ``allow_pickle=False``: every array has a fixed dtype and the
text parts are JSON strings. Arrays (F frames, D detections, M pair-frames, C stage-2 classes):

========================  ==================  ===================================================
key                       shape, dtype        what
========================  ==================  ===================================================
``format``                () str              ``"pairedge-parity-pack"``
``version``               () int64            layout version (:data:`PACK_VERSION`)
``identity``              () str (JSON)       the fp32 model: hashes, spec, labels, normalisation, ...
``reference``             () str (JSON)       how the reference ran: flow backend, thresholds, source
``frame_png``             (B,) uint8          the F frames as concatenated PNG files (lossless)
``frame_offsets``         (F + 1,) int64      byte offsets of each PNG in ``frame_png``
``timestamps``            (F,) float64        seconds
``det_frame``             (D,) int64          frame of each detection row
``det_boxes``             (D, 4) float32      x y w h pixels, as fed to the pipeline (after tracking)
``det_ids``               (D,) int64          track ids
``det_scores``            (D,) float32        detector scores
``det_orientation``       (D,) float32        body orientation, radians (NaN: unknown)
``det_orientation_conf``  (D,) float32        its confidence in [0, 1] (0: unknown)
``pair_frame``            (M,) int64          frame of each pair row
``pairs``                 (M, 2) int64        track ids ``a < b``
``stage1_features``       (M, F1) float32     raw stage-1 features
``stage2_features``       (M, F2) float32     raw stage-2 features
``stage1_logits``         (M, 2) float32      fp32 stage-1 logits
``stage2_logits``         (M, C) float32      fp32 stage-2 logits (every pair, gated or not)
``p_interact``            (M,) float32        the pipeline's (smoothed) interaction probability
``label``                 (M,) int64          the pipeline's stage-2 label, -1 when not gated
``truth_interacting``     (M,) int8           1 / 0, -1 where unknown
``truth_label``           (M,) int64          stage-2 class id of a true interacting pair, else -1
========================  ==================  ===================================================

PNG keeps the pixels exact, so the device's flow sees the very frames the reference saw.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.errors import FormatError
from pairedge.types import Detections

PACK_FORMAT = "pairedge-parity-pack"
PACK_VERSION = 2  # 2: detections keep their body orientation

#: key -> (dtype kind, number of dimensions) of every array a pack must hold.
_ARRAYS: Mapping[str, tuple[str, int]] = {
    "frame_png": ("u", 1),
    "frame_offsets": ("i", 1),
    "timestamps": ("f", 1),
    "det_frame": ("i", 1),
    "det_boxes": ("f", 2),
    "det_ids": ("i", 1),
    "det_scores": ("f", 1),
    "det_orientation": ("f", 1),
    "det_orientation_conf": ("f", 1),
    "pair_frame": ("i", 1),
    "pairs": ("i", 2),
    "stage1_features": ("f", 2),
    "stage2_features": ("f", 2),
    "stage1_logits": ("f", 2),
    "stage2_logits": ("f", 2),
    "p_interact": ("f", 1),
    "label": ("i", 1),
    "truth_interacting": ("i", 1),
    "truth_label": ("i", 1),
}
_ROWS = ("pairs", "stage1_features", "stage2_features", "stage1_logits", "stage2_logits", "p_interact",
         "label", "truth_interacting", "truth_label")  # fmt: skip


@dataclass(frozen=True)
class PairRows:
    """Per pair-frame rows of one pipeline run (the reference's, or the device's during a check).

    Attributes:
        frame: (M,) int64 clip frame index. pairs: (M, 2) int64 track ids ``a < b``.
        stage1_features: (M, F1) float32. stage2_features: (M, F2) float32.
        stage1_logits: (M, 2) float32. stage2_logits: (M, C) float32 (every pair).
        p_interact: (M,) float32 smoothed probability. label: (M,) int64 pipeline label, -1 = not gated.
    """

    frame: np.ndarray
    pairs: np.ndarray
    stage1_features: np.ndarray
    stage2_features: np.ndarray
    stage1_logits: np.ndarray
    stage2_logits: np.ndarray
    p_interact: np.ndarray
    label: np.ndarray

    def __len__(self) -> int:
        return len(self.frame)

    def keys(self) -> np.ndarray:
        """(M, 3) int64 ``(frame, id_a, id_b)``."""
        return np.column_stack([self.frame, self.pairs]).astype(np.int64)


@dataclass(frozen=True)
class ParityPack:
    """A loaded (or about to be written) parity pack; see the module docstring for the arrays.

    Attributes:
        identity: the fp32 model (:func:`pairedge.runtime.parity.identity.model_identity`).
        reference: how the reference ran (flow backend, thresholds, smoothing, clip source, pairedge version).
        frame_png: (B,) uint8 concatenated PNGs; frame_offsets: (F + 1,) int64.
        timestamps: (F,) float64. detections: one :class:`Detections` per frame.
        rows: the reference's pair rows. truth_interacting: (M,) int8. truth_label: (M,) int64.
    """

    identity: dict[str, Any]
    reference: dict[str, Any]
    frame_png: np.ndarray
    frame_offsets: np.ndarray
    timestamps: np.ndarray
    detections: tuple[Detections, ...]
    rows: PairRows
    truth_interacting: np.ndarray
    truth_label: np.ndarray
    path: Path | None = field(default=None, compare=False)

    @property
    def num_frames(self) -> int:
        return len(self.timestamps)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.identity["labels"])

    @property
    def has_truth(self) -> bool:
        return bool((self.truth_interacting >= 0).any())

    def image(self, index: int) -> np.ndarray:
        """Frame ``index`` decoded: (H, W, 3) uint8 BGR (or (H, W) gray when it was stored gray)."""
        import cv2

        lo, hi = int(self.frame_offsets[index]), int(self.frame_offsets[index + 1])
        image = cv2.imdecode(self.frame_png[lo:hi], cv2.IMREAD_UNCHANGED)
        if image is None:
            raise FormatError(self.path or "<pack>", f"frame {index} is not a decodable PNG", "frame_png")
        return image


def encode_png(image: np.ndarray) -> np.ndarray:
    """(B,) uint8 PNG bytes of an (H, W, 3) or (H, W) uint8 image."""
    import cv2

    ok, buf = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:
        raise FormatError("<pack>", f"could not PNG-encode a frame of shape {image.shape}")
    return np.asarray(buf, np.uint8).reshape(-1)


def save_pack(pack: ParityPack, path: str | Path) -> Path:
    """Write ``pack`` to ``path`` (``.npz``, compressed) atomically: a partial file is never left behind."""
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    det_frame = np.concatenate(
        [np.full(len(d), k, np.int64) for k, d in enumerate(pack.detections)] or [np.zeros(0, np.int64)]
    )
    r = pack.rows
    arrays = {
        "format": np.array(PACK_FORMAT),
        "version": np.array(PACK_VERSION, np.int64),
        "identity": np.array(json.dumps(pack.identity, sort_keys=True)),
        "reference": np.array(json.dumps(pack.reference, sort_keys=True)),
        "frame_png": pack.frame_png.astype(np.uint8),
        "frame_offsets": pack.frame_offsets.astype(np.int64),
        "timestamps": pack.timestamps.astype(np.float64),
        "det_frame": det_frame,
        "det_boxes": _concat(pack.detections, "boxes", (4,), np.float32),
        "det_ids": _concat(pack.detections, "track_ids", (), np.int64),
        "det_scores": _concat(pack.detections, "scores", (), np.float32),
        "det_orientation": _concat(pack.detections, "orientation", (), np.float32, np.nan),
        "det_orientation_conf": _concat(pack.detections, "orientation_conf", (), np.float32),
        "pair_frame": r.frame.astype(np.int64),
        "pairs": r.pairs.astype(np.int64).reshape(-1, 2),
        "stage1_features": r.stage1_features.astype(np.float32),
        "stage2_features": r.stage2_features.astype(np.float32),
        "stage1_logits": r.stage1_logits.astype(np.float32),
        "stage2_logits": r.stage2_logits.astype(np.float32),
        "p_interact": r.p_interact.astype(np.float32),
        "label": r.label.astype(np.int64),
        "truth_interacting": pack.truth_interacting.astype(np.int8),
        "truth_label": pack.truth_label.astype(np.int64),
    }
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    tmp.replace(out)
    return out


def _concat(
    dets: tuple[Detections, ...], name: str, width: tuple[int, ...], dtype: Any, missing: float = 0.0
) -> np.ndarray:
    """One attribute of every frame's detections stacked: (D, *width) of ``dtype``; ``missing`` fills the
    frames whose optional attribute (orientation) is None."""
    parts = [np.full((len(d), *width), missing, dtype) if getattr(d, name) is None
             else np.asarray(getattr(d, name), dtype).reshape(-1, *width) for d in dets]  # fmt: skip
    return np.concatenate(parts) if parts else np.zeros((0, *width), dtype)


def load_pack(path: str | Path) -> ParityPack:
    """Read and check a pack (no pickle).

    Raises:
        FormatError: not a file, not an npz, truncated or corrupt, another format or version, a missing key,
            a wrong dtype or shape, rows of different lengths, or indices out of range.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise FormatError(
            file, "parity pack not found; create one with `pairedge parity pack MODEL_DIR --out F`"
        )
    try:
        with np.load(file, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise FormatError(
            file, f"not a readable parity pack (.npz): {type(exc).__name__}: {exc}; the file is truncated or "
            "corrupt, copy it again", "npz",
        ) from None  # fmt: skip
    return _parse(file, data)


def _text(file: Path, data: dict[str, np.ndarray], key: str) -> str:
    if key not in data or data[key].dtype.kind != "U" or data[key].ndim != 0:
        raise FormatError(file, f"expected a text entry {key!r}; this is not a pairedge parity pack", key)
    return str(data[key])


def _parse(file: Path, data: dict[str, np.ndarray]) -> ParityPack:
    if _text(file, data, "format") != PACK_FORMAT:
        raise FormatError(file, f"format is {str(data['format'])!r}, expected {PACK_FORMAT!r}", "format")
    version = int(data["version"]) if "version" in data and data["version"].ndim == 0 else -1
    if version != PACK_VERSION:
        raise FormatError(
            file, f"pack layout version {version}, this pairedge reads version {PACK_VERSION}; create the "
            "pack with the same pairedge version as the robot", "version",
        )  # fmt: skip
    try:
        identity = json.loads(_text(file, data, "identity"))
        reference = json.loads(_text(file, data, "reference"))
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"identity/reference are not valid JSON ({exc})", "identity") from None
    for key, (kind, ndim) in _ARRAYS.items():
        arr = data.get(key)
        if arr is None or arr.dtype.kind not in (kind, "u" if kind == "i" else kind) or arr.ndim != ndim:
            got = "missing" if arr is None else f"{arr.dtype} with {arr.ndim} dimension(s)"
            raise FormatError(
                file, f"array {key!r}: expected kind {kind!r} with {ndim} dimension(s), got {got}", key
            )
    _check_shapes(file, data, identity)
    n = len(data["timestamps"])
    detections = _split_detections(data, n)
    rows = PairRows(
        frame=data["pair_frame"], pairs=data["pairs"], stage1_features=data["stage1_features"],
        stage2_features=data["stage2_features"], stage1_logits=data["stage1_logits"],
        stage2_logits=data["stage2_logits"], p_interact=data["p_interact"], label=data["label"],
    )  # fmt: skip
    return ParityPack(
        identity=identity, reference=reference, frame_png=data["frame_png"],
        frame_offsets=data["frame_offsets"], timestamps=data["timestamps"], detections=detections, rows=rows,
        truth_interacting=data["truth_interacting"].astype(np.int8), truth_label=data["truth_label"], path=file,
    )  # fmt: skip


def _check_shapes(file: Path, data: dict[str, np.ndarray], identity: dict[str, Any]) -> None:
    n = len(data["timestamps"])
    offsets = data["frame_offsets"]
    if (
        len(offsets) != n + 1
        or (n and (offsets[0] != 0 or offsets[-1] != len(data["frame_png"])))
        or (np.diff(offsets) < 0).any()
    ):
        raise FormatError(
            file, f"frame_offsets: expected {n + 1} increasing offsets into frame_png", "frame_offsets"
        )
    d = len(data["det_frame"])
    if data["det_boxes"].shape != (d, 4) or any(
        len(data[k]) != d for k in ("det_ids", "det_scores", "det_orientation", "det_orientation_conf")
    ):
        raise FormatError(
            file, f"detections: expected {d} boxes (D, 4), ids, scores and orientations", "det_boxes"
        )
    if d and (
        data["det_frame"].min() < 0 or data["det_frame"].max() >= n or (np.diff(data["det_frame"]) < 0).any()
    ):
        raise FormatError(file, f"det_frame: expected sorted frame indices in [0, {n})", "det_frame")
    m = len(data["pair_frame"])
    try:
        widths = {"stage1_features": len(identity["stage1_feature_names"]),
                  "stage2_features": len(identity["stage2_feature_names"]),
                  "stage1_logits": len(identity["stage1_labels"]), "stage2_logits": len(identity["labels"]),
                  "pairs": 2}  # fmt: skip
    except (KeyError, TypeError):
        raise FormatError(
            file, "identity: expected feature names and labels of both stages", "identity"
        ) from None
    for key in _ROWS:
        arr = data[key]
        want = (m, widths[key]) if key in widths else (m,)
        if arr.shape != want:
            raise FormatError(file, f"array {key!r}: expected shape {want}, got {arr.shape}", key)
    if m and (data["pair_frame"].min() < 0 or data["pair_frame"].max() >= n):
        raise FormatError(file, f"pair_frame: expected frame indices in [0, {n})", "pair_frame")
    for key in ("stage1_features", "stage2_features", "stage1_logits", "stage2_logits"):
        if not np.isfinite(data[key]).all():
            raise FormatError(file, f"array {key!r} contains NaN or inf", key)


def _split_detections(data: dict[str, np.ndarray], n: int) -> tuple[Detections, ...]:
    bounds = np.searchsorted(data["det_frame"], np.arange(n + 1))
    return tuple(
        Detections.from_arrays(data["det_boxes"][lo:hi], data["det_ids"][lo:hi], data["det_scores"][lo:hi],
                               data["det_orientation"][lo:hi], data["det_orientation_conf"][lo:hi])  # fmt: skip
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    )
