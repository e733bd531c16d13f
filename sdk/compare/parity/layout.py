"""What a parity pack must hold, checked in two passes: the layout on the ``.npy`` headers before any array
is read, then the values once they are.

A pack is the *reference* a device is judged against, so nothing in it may be silently wrong: a NaN
``p_interact``, an infinite box, a normalisation std of NaN (which would make every drift NaN and every
comparison pass), a label id outside the label set or a frame larger than
:data:`pairedge.core.limits.MAX_FRAME_PIXELS` is a :class:`~pairedge.core.errors.FormatError` naming the array
("a corrupt pack"), never a PASS. Array names, shapes and dtypes are documented in
:mod:`pairedge.compare.parity.pack`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.imagesize import image_size
from pairedge.core.io.npz import ArrayInfo
from pairedge.runtime.boxshape import MODES
from pairedge.runtime.config import MAX_CONFIRM_S
from pairedge.runtime.streamstate import check_paths, decode

#: key -> (dtype kind, number of dimensions) of every array a pack must hold ("i" also accepts "u").
ARRAYS: Mapping[str, tuple[str, int]] = {
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
    "frame_box_shape": ("i", 1),
    "frame_aspect": ("f", 1),
    "frame_tau_interact": ("f", 1),
    "frame_confirm_s": ("f", 1),
    "lead_png": ("u", 1),
}
#: The per-frame arrays: F rows each.
FRAMES = ("timestamps", "frame_box_shape", "frame_aspect", "frame_tau_interact", "frame_confirm_s")
#: At most this many stream-state arrays (the pipeline keeps about 20).
MAX_STATE_ARRAYS = 256
#: The per pair-frame arrays: M rows each.
ROWS = (
    "pairs",
    "stage1_features",
    "stage2_features",
    "stage1_logits",
    "stage2_logits",
    "p_interact",
    "label",
    "truth_interacting",
    "truth_label",
)
_DETECTIONS = ("det_ids", "det_scores", "det_orientation", "det_orientation_conf")


def strict_json(file: Path, text: str, key: str) -> Any:
    """``text`` parsed as JSON, refusing ``NaN`` / ``Infinity`` (not JSON, and never a valid reference)."""

    def refuse(name: str) -> Any:
        raise FormatError(file, f"{key} holds {name}, not a finite number; the pack is corrupt", key)

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(file, f"{key} is not valid JSON ({exc})", key) from None


# -- identity and reference --------------------------------------------------------------------------------
def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)


def _finite(values: Any, n: int, positive: bool = False) -> bool:
    if not isinstance(values, list) or len(values) != n:
        return False
    ok = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    return ok and (not positive or all(v > 0 for v in values))


def _probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def check_identity(file: Path, identity: Any) -> dict[str, int]:
    """Validate the pack's model identity; returns the widths of the per-pair arrays it implies.

    Raises:
        FormatError: a missing or malformed field (hashes, names, labels, normalisation statistics).
    """

    def bad(what: str) -> FormatError:
        return FormatError(
            file, f"identity: {what}; the pack is corrupt or not from `pairedge parity pack`", "identity"
        )

    if not isinstance(identity, dict):
        raise bad(f"expected a JSON object, got {type(identity).__name__}")
    for key in ("stage1_sha256", "stage2_sha256"):
        value = identity.get(key)
        if not isinstance(value, str) or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
            raise bad(f"{key!r} must be 64 lowercase hex digits, got {value!r:.80}")
    for key in ("feature_spec", "feature_spec_version"):
        if not isinstance(identity.get(key), str):
            raise bad(f"{key!r} must be a string")
    for key in ("stage1_feature_names", "stage2_feature_names", "stage1_labels", "labels"):
        if not _strings(identity.get(key)):
            raise bad(f"{key!r} must be a non-empty list of names")
    norm = identity.get("norm")
    for stage in ("stage1", "stage2"):
        width = len(identity[f"{stage}_feature_names"])
        entry = norm.get(stage) if isinstance(norm, dict) else None
        if (
            not isinstance(entry, dict)
            or not _finite(entry.get("mean"), width)
            or not _finite(entry.get("std"), width, positive=True)
        ):
            raise bad(f"norm.{stage}: expected {width} finite means and {width} finite positive stds")
    for key in ("feature_config", "thresholds", "data_fingerprint"):
        if not isinstance(identity.get(key, {}), dict):
            raise bad(f"{key!r} must be an object")
    return {
        "stage1_features": len(identity["stage1_feature_names"]),
        "stage2_features": len(identity["stage2_feature_names"]),
        "stage1_logits": len(identity["stage1_labels"]),
        "stage2_logits": len(identity["labels"]),
        "pairs": 2,
    }


def check_reference(file: Path, reference: Any) -> None:
    """Validate how the reference ran: thresholds, smoothing, flow, image size (within the frame ceiling).

    Raises:
        FormatError: naming the field.
    """

    def bad(what: str) -> FormatError:
        return FormatError(file, f"reference: {what}; the pack is corrupt", "reference")

    if not isinstance(reference, dict):
        raise bad(f"expected a JSON object, got {type(reference).__name__}")
    if not _probability(reference.get("tau_interact")):
        raise bad(
            f"'tau_interact' must be a probability in [0, 1], got {reference.get('tau_interact')!r:.40}"
        )
    if reference.get("tau_group") is not None and not _probability(reference["tau_group"]):
        raise bad(f"'tau_group' must be null or a probability in [0, 1], got {reference['tau_group']!r:.40}")
    alpha = reference.get("smoothing_alpha", 0.6)
    if not _probability(alpha) or alpha == 0:
        raise bad(f"'smoothing_alpha' must be in (0, 1], got {alpha!r:.40}")
    if not isinstance(reference.get("flow", {}), dict):
        raise bad("'flow' must be an object")
    start = reference.get("start", 0)
    if type(start) is not int or start < 0:
        raise bad(f"'start' must be a frame number >= 0, got {start!r:.40}")

    if reference.get("box_shape", "auto") not in MODES:
        raise bad(f"'box_shape' must be one of {', '.join(MODES)}, got {reference.get('box_shape')!r:.40}")
    point = reference.get("operating_point")
    if point is not None and (not isinstance(point, str) or not point.strip() or len(point) > 100):
        raise bad(f"'operating_point' must be null or a name, got {point!r:.40}")
    for key in ("smoothing_grace_frames", "smoothing_max_pairs"):
        value = reference.get(key)
        if value is not None and (type(value) is not int or value < (key == "smoothing_max_pairs")):
            raise bad(f"{key!r} must be a whole number (max_pairs >= 1), got {value!r:.40}")
    size = reference.get("image_size")
    if size is not None:
        if not isinstance(size, list) or len(size) != 2 or not all(type(v) is int for v in size):
            raise bad(f"'image_size' must be [width, height] in pixels, got {size!r:.40}")
        limits.check_frame_size(size[0], size[1], f"{file}, reference image_size")


# -- pass 1: the headers ---------------------------------------------------------------------------------
def check_headers(file: Path, infos: Mapping[str, ArrayInfo], widths: Mapping[str, int]) -> None:
    """Every array present with its dtype kind and rank, and their shapes consistent (F frames, D detections,
    M pair-frames, the identity's widths) — from the headers, before any data is read.

    Raises:
        FormatError: naming the array, what was expected and what its header declares.
    """
    for key, (kind, ndim) in ARRAYS.items():
        info = infos.get(key)
        kinds = (kind, "u") if kind == "i" else (kind,)
        if info is None or info.dtype.kind not in kinds or info.ndim != ndim:
            got = "missing" if info is None else f"{info.dtype} with {info.ndim} dimension(s)"
            raise FormatError(
                file, f"array {key!r}: expected kind {kind!r} with {ndim} dimension(s), got {got}", key
            )
    n = infos["timestamps"].shape[0]
    if n > limits.MAX_SIM_FRAMES:
        raise FormatError(
            file,
            f"{n:,} frames, more than the ceiling of {limits.MAX_SIM_FRAMES:,} (pairedge.core.limits."
            "MAX_SIM_FRAMES); a pack is a short clip",
            "timestamps",
        )
    d, m = infos["det_frame"].shape[0], infos["pair_frame"].shape[0]
    want = {
        "frame_offsets": (n + 1,),
        "det_boxes": (d, 4),
        **{k: (d,) for k in _DETECTIONS},
        **{k: (n,) for k in FRAMES},
        **{k: ((m, widths[k]) if k in widths else (m,)) for k in ROWS},
    }
    for key, shape in want.items():
        if infos[key].shape != shape:
            raise FormatError(
                file,
                f"array {key!r}: expected shape {shape} (F={n} frames, D={d} detections, M={m} pair-frames), "
                f"its header declares {infos[key].shape}",
                key,
            )
    for key in ("frame_png", "lead_png"):
        if infos[key].dtype != np.uint8:
            raise FormatError(file, f"array {key!r}: expected uint8 PNG bytes, got {infos[key].dtype}", key)


def check_stream_state(file: Path, text: str, infos: Mapping[str, ArrayInfo]) -> dict[str, Any] | None:
    """The ``stream_state`` entry (JSON null, or ``{"values": {path: value}, "flow_primed": bool}``) and the
    headers of its ``state:<path>`` arrays (attribute paths, numeric, at most 4 dimensions, at most
    :data:`MAX_STATE_ARRAYS`); returns the parsed entry.

    Raises:
        FormatError: naming what is malformed.
    """

    def bad(what: str, key: str = "stream_state") -> FormatError:
        return FormatError(file, f"stream state: {what}; the pack is corrupt", key)

    state = strict_json(file, text, "stream_state")
    keys = [k for k in infos if k.startswith("state:")]
    if state is None:
        if keys:
            raise bad(f"{len(keys)} state arrays but no stream state", keys[0])
        return None
    if (
        not isinstance(state, dict)
        or set(state) != {"values", "flow_primed"}
        or not isinstance(state["values"], dict)
        or not isinstance(state["flow_primed"], bool)
    ):
        raise bad('expected {"values": {...}, "flow_primed": true|false}')
    if len(keys) + len(state["values"]) > MAX_STATE_ARRAYS:
        raise bad(f"{len(keys)} arrays and {len(state['values'])} values, more than {MAX_STATE_ARRAYS}")
    try:
        check_paths(state["values"], "stream state values")
        check_paths([k.removeprefix("state:") for k in keys], "stream state arrays")
        for value in state["values"].values():
            decode(value)
    except (InputError, RecursionError) as exc:
        raise bad(str(exc)) from None
    for key in keys:
        info = infos[key]
        if info.dtype.kind not in "biuf" or info.ndim > 4:
            raise bad(
                f"array {key!r} is {info.dtype} with {info.ndim} dimension(s), expected numbers, at most 4",
                key,
            )
    if state["flow_primed"] and not infos["lead_png"].shape[0]:
        raise bad("the flow had a previous frame, but the pack holds no frame before the clip", "lead_png")
    return state


# -- pass 2: the values ----------------------------------------------------------------------------------
def check_values(file: Path, data: Mapping[str, np.ndarray], reference: Mapping[str, Any]) -> None:
    """The values a reference must have: offsets and indices in range, every float finite (orientation:
    NaN = unknown, never inf), probabilities in [0, 1], label ids in the label set, unique pair-frames,
    every frame a PNG of the reference's image size.

    Raises:
        FormatError: naming the array and the first offending row.
    """
    n = len(data["timestamps"])
    _check_offsets(file, data, n)
    _check_frames(file, data, reference.get("image_size"))
    for key, lo, hi in (
        ("det_frame", 0, n - 1),
        ("pair_frame", 0, n - 1),
        ("truth_interacting", -1, 1),
        ("label", -1, data["stage2_logits"].shape[1] - 1),
        ("truth_label", -1, data["stage2_logits"].shape[1] - 1),
    ):
        _in_range(file, data[key], key, lo, hi)
    if len(data["det_frame"]) and (np.diff(data["det_frame"]) < 0).any():
        raise FormatError(file, "det_frame: expected frame indices in increasing order", "det_frame")
    finite = (
        "timestamps",
        "det_boxes",
        "det_scores",
        "det_orientation_conf",
        "stage1_features",
        "stage2_features",
        "stage1_logits",
        "stage2_logits",
        "p_interact",
    )
    for key in finite:
        _finite_rows(file, data[key], key)
    if np.isinf(data["det_orientation"]).any():
        raise FormatError(
            file,
            "array 'det_orientation' holds inf (NaN means unknown); the pack is corrupt",
            "det_orientation",
        )
    for key in ("p_interact", "det_orientation_conf"):
        if len(data[key]) and not ((data[key] >= 0) & (data[key] <= 1)).all():
            raise FormatError(file, f"array {key!r}: expected values in [0, 1]; the pack is corrupt", key)
    keys = np.column_stack([data["pair_frame"], data["pairs"]]).astype(np.int64)
    if len(np.unique(keys, axis=0)) != len(keys):
        raise FormatError(
            file, "pairs: a (frame, id_a, id_b) pair-frame is listed twice; the pack is corrupt", "pairs"
        )
    _check_frame_states(file, data)
    if len(data["lead_png"]):
        _check_png(
            file, data["lead_png"], "the frame before the clip", reference.get("image_size"), "lead_png"
        )


def _check_frame_states(file: Path, data: Mapping[str, np.ndarray]) -> None:
    """Per-frame decisions: a flag, a ratio (NaN, or positive where the flag is set), a probability,
    seconds."""

    _in_range(file, data["frame_box_shape"], "frame_box_shape", 0, 1)
    aspect = data["frame_aspect"]
    known = ~np.isnan(aspect)
    if (
        not (np.isfinite(aspect[known]) & (aspect[known] > 0)).all()
        or (data["frame_box_shape"][known] != 1).any()
    ):
        raise FormatError(
            file,
            "array 'frame_aspect': expected NaN or a positive ratio on frames whose box shape "
            "was ignored; the pack is corrupt",
            "frame_aspect",
        )
    for key, hi in (("frame_tau_interact", 1.0), ("frame_confirm_s", MAX_CONFIRM_S)):
        v = data[key]
        if not (np.isfinite(v) & (v >= 0) & (v <= hi)).all():
            raise FormatError(
                file, f"array {key!r}: expected values in [0, {hi:g}]; the pack is corrupt", key
            )


def _finite_rows(file: Path, values: np.ndarray, key: str) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad.reshape(len(values), -1).any(axis=1))[0])
        raise FormatError(
            file,
            f"array {key!r} contains NaN or inf (first at row {row}): a reference is never NaN; the pack is "
            "corrupt, make it again with `pairedge parity pack`",
            key,
        )


def _in_range(file: Path, values: np.ndarray, key: str, lo: int, hi: int) -> None:
    if len(values) and (values.min() < lo or values.max() > hi):
        raise FormatError(
            file, f"array {key!r}: expected values in [{lo}, {hi}], got {values.min()}..{values.max()}", key
        )


def _check_offsets(file: Path, data: Mapping[str, np.ndarray], n: int) -> None:
    offsets = data["frame_offsets"]
    size = len(data["frame_png"])
    if n and (offsets[0] != 0 or offsets[-1] != size or (np.diff(offsets) < 0).any()):
        raise FormatError(
            file, f"frame_offsets: expected {n + 1} increasing offsets into frame_png", "frame_offsets"
        )


def _check_frames(file: Path, data: Mapping[str, np.ndarray], size: Any) -> None:
    """Every stored frame is a PNG whose header declares the reference's image size (within the ceiling)."""
    png, offsets = data["frame_png"], data["frame_offsets"]
    if not len(png):
        return  # a box-only clip
    for k in range(len(offsets) - 1):
        _check_png(file, png[int(offsets[k]) : int(offsets[k + 1])], f"frame {k}", size, "frame_png")


def _check_png(file: Path, data: np.ndarray, what: str, size: Any, key: str) -> None:

    found = image_size(data)
    if found is None or found[0] != "png":
        raise FormatError(file, f"{what} is not a PNG image; the pack is corrupt", key)
    _, width, height = found
    limits.check_frame_size(width, height, f"{file}, {what}")
    if size is not None and [width, height] != list(size):
        raise FormatError(
            file,
            f"{what} is {width} x {height} pixels, the reference's image_size is {size[0]} x {size[1]}",
            key,
        )
