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
``frame_box_shape``       (F,) int8           1: the box-shape columns were at the training mean
``frame_aspect``          (F,) float64        the detector's fixed w/h ratio when judged so, else NaN
``frame_tau_interact``    (F,) float64        the gate threshold in force (operating point)
``frame_confirm_s``       (F,) float64        the link confirmation time in force, seconds
``stream_state``          () str (JSON)       null, or the stream state before the clip's first frame
``lead_png``              (B0,) uint8         the frame before the clip as PNG (empty: none)
``state:<path>``          any, numeric        the arrays of that stream state (track history, ...)
========================  ==================  ===================================================

The ``frame_*`` arrays are the decisions of the reference's monitors (:class:`pairedge.runtime.streamstate.
FrameState`): the check replays them instead of deciding again, since the monitors judged raw detector boxes
the pack does not keep and, for a clip that starts mid-stream (``parity pack --start``), frames before it.
Such a clip also carries the stream state at its start (clock, feature history, smoothing; :meth:`pairedge.
runtime.pipeline.Pipeline.snapshot`) and the frame before it, so its first frames have the same flow and
history as in the stream. Version 3 added all of them; older packs are refused (make them again).

PNG keeps the pixels exact, so the device's flow sees the very frames the reference saw. Reading is bounded
(:mod:`pairedge.core.io.npz`): a pack is at most :data:`pairedge.core.limits.MAX_PACK_BYTES` on disk and
as its arrays declare once decompressed, and its layout is checked on the headers before any array is
inflated (:mod:`pairedge.compare.parity.layout`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.compare.parity import layout
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.imagesize import check_image_bytes
from pairedge.core.io.npz import NpzReader
from pairedge.core.types import Detections
from pairedge.runtime.streamstate import FrameState, StreamSnapshot

PACK_FORMAT = "pairedge-parity-pack"
PACK_VERSION = 3  # 2: detections keep their body orientation; 3: per-frame decisions, stream state at start
#: Prefix of the stream-state arrays.
STATE_PREFIX = "state:"


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
        identity: the fp32 model (:func:`pairedge.compare.parity.identity.model_identity`).
        reference: how the reference ran (flow backend, thresholds, smoothing, clip source, pairedge version).
        frame_png: (B,) uint8 concatenated PNGs; frame_offsets: (F + 1,) int64.
        timestamps: (F,) float64. detections: one :class:`Detections` per frame.
        rows: the reference's pair rows. truth_interacting: (M,) int8. truth_label: (M,) int64.
        frame_states: the reference's decisions at each of the F frames.
        snapshot: the stream state before the first frame (a clip from the middle of a stream), else None.
        lead_png: (B0,) uint8 PNG of the frame before the first (the flow's previous frame), or empty.
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
    frame_states: tuple[FrameState, ...] = ()
    snapshot: StreamSnapshot | None = None
    lead_png: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
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
        lo, hi = int(self.frame_offsets[index]), int(self.frame_offsets[index + 1])
        return decode_png(self.frame_png[lo:hi], self.path, f"frame {index}", "frame_png")

    def lead_image(self) -> np.ndarray | None:
        """The frame before the clip, decoded (None when the pack has none)."""
        return (
            decode_png(self.lead_png, self.path, "the frame before the clip", "lead_png")
            if len(self.lead_png)
            else None
        )


def decode_png(data: np.ndarray, path: Path | None, what: str, key: str) -> np.ndarray:
    """(H, W, 3) uint8 BGR or (H, W) gray from PNG bytes, its header checked before decoding."""
    import cv2

    check_image_bytes(data, f"{path or '<pack>'}, {what}")
    image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise FormatError(path or "<pack>", f"{what} is not a decodable PNG", key)
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
        "det_boxes": _concat(pack.detections, lambda d: d.boxes, (4,), np.float32),
        "det_ids": _concat(pack.detections, lambda d: d.track_ids, (), np.int64),
        "det_scores": _concat(pack.detections, lambda d: d.scores, (), np.float32),
        "det_orientation": _concat(pack.detections, lambda d: d.orientation, (), np.float32, np.nan),
        "det_orientation_conf": _concat(pack.detections, lambda d: d.orientation_conf, (), np.float32),
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
        **_state_arrays(pack),
    }
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    tmp.replace(out)
    return out


def _state_arrays(pack: ParityPack) -> dict[str, np.ndarray]:
    """The per-frame decisions, the stream state at the start and the frame before it, as pack arrays."""
    st = pack.frame_states
    if len(st) != pack.num_frames:
        raise InputError(f"parity pack: {len(st)} frame states for {pack.num_frames} frames")
    snap = pack.snapshot
    text = None if snap is None else {"values": snap.values, "flow_primed": snap.flow_primed}
    out: dict[str, np.ndarray] = {
        "frame_box_shape": np.array([s.box_shape_ignored for s in st], np.int8),
        "frame_aspect": np.array([s.aspect for s in st], np.float64),
        "frame_tau_interact": np.array([s.tau_interact for s in st], np.float64),
        "frame_confirm_s": np.array([s.confirm_s for s in st], np.float64),
        "stream_state": np.array(json.dumps(text, sort_keys=True)),
        "lead_png": np.asarray(pack.lead_png, np.uint8).reshape(-1),
    }
    for path, arr in ({} if snap is None else snap.arrays).items():
        out[STATE_PREFIX + path] = arr
    return out


def _concat(
    dets: tuple[Detections, ...],
    get: Callable[[Detections], np.ndarray | None],
    width: tuple[int, ...],
    dtype: Any,
    missing: float = 0.0,
) -> np.ndarray:
    """One field of every frame's detections stacked: (D, *width) of ``dtype``; ``missing`` fills the
    frames whose optional field (orientation) is None."""
    values = [get(d) for d in dets]
    parts = [
        np.full((len(d), *width), missing, dtype) if v is None else np.asarray(v, dtype).reshape(-1, *width)
        for d, v in zip(dets, values, strict=True)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, *width), dtype)


def load_pack(path: str | Path) -> ParityPack:
    """Read and check a pack (no pickle), bounded by :data:`pairedge.core.limits.MAX_PACK_BYTES`.

    The file must be a regular file within the ceiling; the arrays' declared sizes (zip directory) and
    layout (``.npy`` headers: shapes consistent, widths as the identity says, frames within
    :data:`pairedge.core.limits.MAX_FRAME_PIXELS`) are checked before any array is inflated; then every value
    a reference must have (:mod:`pairedge.compare.parity.layout`).

    Raises:
        FormatError: not a regular file, above the ceiling, not an npz, truncated or corrupt, another format
            or version, a missing key, a wrong dtype or shape, rows of different lengths, indices out of
            range, NaN / inf anywhere in the reference.
    """
    file = Path(path).expanduser()
    if not file.exists():
        raise FormatError(
            file, "parity pack not found; create one with `pairedge parity pack MODEL_DIR --out F`"
        )
    limits.regular_file(file, "a parity pack (.npz)", limits.MAX_PACK_BYTES)
    with NpzReader(file, limits.MAX_PACK_BYTES, "parity pack (.npz)") as npz:
        if _text(file, npz, "format") != PACK_FORMAT:
            raise FormatError(
                file, f"format is {_text(file, npz, 'format')!r}, expected {PACK_FORMAT!r}", "format"
            )
        version_info = npz.infos.get("version")
        version = (
            int(npz.read("version"))
            if version_info is not None and version_info.ndim == 0 and version_info.dtype.kind in "iu"
            else -1
        )
        if version != PACK_VERSION:
            why = (
                " (versions before 3 do not record the reference's per-frame box-shape and operating-point "
                "decisions, so a check could not reproduce them)"
                if 0 < version < 3
                else ""
            )
            raise FormatError(
                file,
                f"pack layout version {version}, this pairedge reads version {PACK_VERSION}{why}; make the "
                "pack again with `pairedge parity pack` of the same pairedge version as the robot",
                "version",
            )
        identity = layout.strict_json(file, _text(file, npz, "identity"), "identity")
        reference = layout.strict_json(file, _text(file, npz, "reference"), "reference")
        widths = layout.check_identity(file, identity)
        layout.check_reference(file, reference)
        layout.check_headers(file, npz.infos, widths)
        stream = layout.check_stream_state(file, _text(file, npz, "stream_state"), npz.infos)
        data = {key: npz.read(key) for key in layout.ARRAYS}
        state = {
            key.removeprefix(STATE_PREFIX): npz.read(key) for key in npz.infos if key.startswith(STATE_PREFIX)
        }
    layout.check_values(file, data, reference)
    snapshot = (
        None if stream is None else StreamSnapshot(stream["values"], state, bool(stream["flow_primed"]))
    )
    return _assemble(file, data, identity, reference, snapshot)


def _text(file: Path, npz: NpzReader, key: str) -> str:
    info = npz.infos.get(key)
    if info is None or info.dtype.kind != "U" or info.ndim != 0:
        raise FormatError(file, f"expected a text entry {key!r}; this is not a pairedge parity pack", key)
    return str(npz.read(key))


def _assemble(
    file: Path,
    data: dict[str, np.ndarray],
    identity: dict[str, Any],
    reference: dict[str, Any],
    snapshot: StreamSnapshot | None,
) -> ParityPack:
    rows = PairRows(
        frame=data["pair_frame"],
        pairs=data["pairs"],
        stage1_features=data["stage1_features"],
        stage2_features=data["stage2_features"],
        stage1_logits=data["stage1_logits"],
        stage2_logits=data["stage2_logits"],
        p_interact=data["p_interact"],
        label=data["label"],
    )
    return ParityPack(
        identity=identity,
        reference=reference,
        frame_png=data["frame_png"],
        frame_offsets=data["frame_offsets"],
        timestamps=data["timestamps"],
        detections=_split_detections(file, data, len(data["timestamps"])),
        rows=rows,
        truth_interacting=data["truth_interacting"].astype(np.int8),
        truth_label=data["truth_label"],
        frame_states=_frame_states(data),
        snapshot=snapshot,
        lead_png=data["lead_png"],
        path=file,
    )


def _frame_states(data: dict[str, np.ndarray]) -> tuple[FrameState, ...]:
    cols = zip(
        data["frame_box_shape"].tolist(),
        data["frame_aspect"].tolist(),
        data["frame_tau_interact"].tolist(),
        data["frame_confirm_s"].tolist(),
        strict=True,
    )
    return tuple(FrameState(bool(b), float(a), float(t), float(c)) for b, a, t, c in cols)


def _split_detections(file: Path, data: dict[str, np.ndarray], n: int) -> tuple[Detections, ...]:
    bounds = np.searchsorted(data["det_frame"], np.arange(n + 1))
    try:
        return tuple(
            Detections.from_arrays(
                data["det_boxes"][lo:hi],
                data["det_ids"][lo:hi],
                data["det_scores"][lo:hi],
                data["det_orientation"][lo:hi],
                data["det_orientation_conf"][lo:hi],
            )
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
        )
    except InputError as exc:  # ids beyond int64, orientations out of range, ...
        raise FormatError(file, f"detections: {exc}", "det_boxes") from None
