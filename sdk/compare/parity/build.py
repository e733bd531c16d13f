"""``pairedge parity pack``: run the fp32 model over a short clip on the workstation and write the pack."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.compare.parity.identity import model_identity
from pairedge.compare.parity.pack import PairRows, ParityPack, encode_png, save_pack
from pairedge.compare.parity.replay import ReplayItem, flow_description, load_pipeline, replay
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.version import __version__
from pairedge.measure.metrics.pairwise.keys import lookup, row_keys
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.streamstate import StreamSnapshot

#: The default clip length: long enough for flow and track history to settle, small enough to copy around.
DEFAULT_FRAMES = 30


def build_pack(
    model: str | Path | Deployment,
    source: Any,
    out: str | Path,
    *,
    frames: int = DEFAULT_FRAMES,
    on_frame: Callable[[], None] | None = None,
    start: int = 0,
    box_shape: str = "auto",
    operating_point: str | None = None,
) -> ParityPack:
    """Replay ``frames`` frames of ``source`` through the fp32 pipeline of ``model`` and write the pack.

    Args:
        model: the reference: a fp32 :class:`~pairedge.runtime.deployment.Deployment` (its classifier and flow
            backends; flow "auto": the model's own flow backend), or the fp32 model folder (``stage1.onnx`` +
            ``stage2.onnx``) on ONNX Runtime CPU.
        source: a :class:`pairedge.apps.evaluation.sources.StreamSource` (simulator scene, video + detections
            [+ gold pairs], a ROS 2 log, or a box-only CAD sequence).
        out: the ``.npz`` to write (written atomically).
        frames: clip length (>= 2: flow needs a previous frame).
        start: the clip's first frame in the stream: frames before it run through the pipeline as the
            stream would (tracker, monitors, history) but are not stored; the pack keeps the stream state at
            ``start`` and the frame before it instead.
        box_shape, operating_point: as :class:`~pairedge.runtime.config.PipelineConfig` (the reference runs
            with them; the pack records what they decided at each frame).

    Raises:
        InputError: fewer than 2 frames, ``start`` < 0, or ``start + frames`` above
            :data:`pairedge.core.limits.MAX_SIM_FRAMES` (checked before anything runs), frames whose PNGs pass
            :data:`pairedge.core.limits.MAX_PACK_BYTES` (checked as they come), a source shorter than
            ``start``, or the clip has no pair of people. ModelError / FormatError from the model and the
            source.
    """
    if frames < 2:
        raise InputError(f"--frames: expected at least 2 frames (flow needs a previous frame), got {frames}")
    if start < 0:
        raise InputError(f"--start: expected a frame number >= 0, got {start}")
    limits.check_sim_work(1, start + frames, "--start + --frames")
    config = PipelineConfig(box_shape=box_shape, operating_point=operating_point)
    reference = model if isinstance(model, Deployment) else Deployment(model, backend="onnxruntime")
    if reference.precision != "fp32":
        raise InputError(
            f"a parity pack's reference runs the fp32 files, got precision {reference.precision}"
        )
    with load_pipeline(reference, config=config) as pipe:
        clip = _Clip(source, start, frames, on_frame)
        size = source.image_size  # (W, H) of box-only sources, else None: the first frame's
        stream = iter(source.open(pipe.labels, max_frames=start + frames))
        begin = _warm_up(pipe, stream, clip, size)
        result = replay(pipe, clip.items(stream), image_size=size, reset=start == 0, start=None)
        if not len(result.rows):
            raise InputError(
                f"{source.name}: no pair of people in frames {start}-{start + frames - 1}; pick another clip"
            )
        identity = model_identity(pipe.models, pipe.feature_config)
        reference = _reference(pipe, config, source, clip, size)
    truth_inter, truth_label = pair_truth(result.rows, clip.truths, pipe.labels)
    pack = ParityPack(
        identity=identity,
        reference=reference,
        frame_png=clip.png(),
        frame_offsets=clip.offsets(),
        timestamps=np.asarray(clip.stamps, np.float64),
        detections=result.detections,
        rows=result.rows,
        truth_interacting=truth_inter,
        truth_label=truth_label,
        frame_states=result.states,
        snapshot=None if begin is None else begin[0],
        lead_png=np.zeros(0, np.uint8) if begin is None or begin[1] is None else begin[1],
    )
    save_pack(pack, out)
    return pack


class _Clip:
    """The frames of a pack as they are read: PNGs (bounded), timestamps, truth."""

    def __init__(self, source: Any, start: int, frames: int, on_frame: Callable[[], None] | None) -> None:
        self.source, self.start, self.frames, self.on_frame = source, start, frames, on_frame
        self.pngs: list[np.ndarray] = []
        self.stamps: list[float] = []
        self.truths: list[Any] = []
        self.first: list[int] = []  # (W, H) of the first stored frame
        self.stored = 0

    def items(self, stream: Iterator[Any]) -> Iterator[ReplayItem]:
        for k, f in enumerate(stream):
            if f.image is not None:
                self.pngs.append(self.count(encode_png(f.image), k))
                self.first[:] = self.first or [int(f.image.shape[1]), int(f.image.shape[0])]
            self.truths.append(f.truth)
            self.stamps.append(float(f.timestamp))
            if self.on_frame is not None:
                self.on_frame()
            yield k, f.image, f.detections, f.timestamp

    def count(self, png: np.ndarray, k: int) -> np.ndarray:
        """``png``, its bytes counted against the pack's ceiling."""
        self.stored += len(png)
        if self.stored > limits.MAX_PACK_BYTES:  # the pack could not be read back: stop now
            raise InputError(
                f"--frames {self.frames}: the first {k + 1} frames of {self.source.name} already take "
                f"{limits.describe_size(self.stored)} as PNG, more than the "
                f"{limits.describe_size(limits.MAX_PACK_BYTES)} ceiling of a parity pack "
                "(pairedge.core.limits.MAX_PACK_BYTES); ask for fewer --frames"
            )
        return png

    def png(self) -> np.ndarray:
        return np.concatenate(self.pngs) if self.pngs else np.zeros(0, np.uint8)

    def offsets(self) -> np.ndarray:
        if not self.pngs:
            return np.zeros(len(self.stamps) + 1, np.int64)
        return np.concatenate([[0], np.cumsum([len(p) for p in self.pngs])]).astype(np.int64)


def _warm_up(
    pipe: Any, stream: Iterator[Any], clip: _Clip, size: tuple[int, int] | None
) -> tuple[StreamSnapshot, np.ndarray | None] | None:
    """Step ``pipe`` over the ``clip.start`` frames before the clip; the stream state and the previous frame
    (PNG, None when the flow holds none) at the clip's start, or None when the clip starts the stream."""
    if clip.start == 0:
        return None
    pipe.reset()
    last = None
    for k in range(clip.start):
        f = next(stream, None)
        if f is None:
            raise InputError(f"--start {clip.start}: {clip.source.name} has only {k} frames")
        pipe.step(
            f.image, f.detections, f.timestamp, frame_index=k - clip.start, image_size=size
        )  # < 0: before
        last = f.image
        if clip.on_frame is not None:
            clip.on_frame()
    snap = pipe.snapshot()
    lead = clip.count(encode_png(last), 0) if snap.flow_primed and last is not None else None
    return snap, lead


def _reference(pipe: Any, config: PipelineConfig, source: Any, clip: _Clip, size: Any) -> dict[str, Any]:
    """How the reference ran (the pack's ``reference`` entry)."""
    return {
        "source": source.name,
        "frames": len(clip.stamps),
        "start": clip.start,
        "box_only": not clip.pngs,
        "image_size": [int(size[0]), int(size[1])] if size is not None else clip.first or None,
        "backend": repr(pipe.stage1),
        "precision": "fp32",
        "flow": flow_description(pipe),
        "tau_interact": pipe.tau_interact,
        "tau_group": pipe.tau_group,
        "smoothing_alpha": config.smoothing.alpha,
        "smoothing_grace_frames": config.smoothing.grace_frames,
        "smoothing_max_pairs": config.smoothing.max_pairs,
        "box_shape": config.box_shape,
        "operating_point": config.operating_point,
        "operating_point_switches": list(pipe.switches.records),
        "pairedge_version": _version(),
    }


def _version() -> str:

    return str(__version__)


def pair_truth(rows: PairRows, truths: list[Any], labels: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(M,) int8 interacting (1 / 0 / -1 unknown) and (M,) int64 label id (-1: none) of every pair row.

    ``truths[k]`` is the :class:`~pairedge.apps.evaluation.sources.FrameTruth` of clip frame ``k`` (None:
    unknown); a row's truth is the first labelled pair of its frame with the same ``(id_a, id_b)``.
    """

    inter = np.full(len(rows), -1, np.int8)
    label = np.full(len(rows), -1, np.int64)
    index = {name: k for k, name in enumerate(labels)}
    known = np.array([t is not None for t in truths], bool)
    given = [(k, t) for k, t in enumerate(truths) if t is not None]
    t_keys = np.concatenate(
        [np.column_stack([np.full(len(t.pairs), k), t.pairs.reshape(-1, 2)]) for k, t in given]
        or [np.zeros((0, 3))]
    ).astype(np.int64)
    t_inter = np.concatenate([np.asarray(t.interacting, bool) for _, t in given] or [np.zeros(0, bool)])
    t_label = np.array([index.get(name, -1) for _, t in given for name in t.labels], np.int64)
    has = known[rows.frame] if len(rows) else np.zeros(0, bool)
    inter[has] = 0
    rk, tk = row_keys(np.column_stack([rows.frame, rows.pairs]).astype(np.int64), t_keys)
    first_keys, first = np.unique(tk, return_index=True)  # the first truth row of each (frame, a, b)
    pos = lookup(first_keys, first.astype(np.int64), rk)
    yes = has & (pos >= 0)
    yes[yes] = t_inter[pos[yes]]
    inter[yes] = 1
    label[yes] = t_label[pos[yes]]
    return inter, label
