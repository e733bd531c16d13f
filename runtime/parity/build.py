"""``pairedge parity pack``: run the fp32 model over a short clip on the workstation and write the pack."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pairedge import limits
from pairedge.errors import InputError
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.parity.identity import model_identity
from pairedge.runtime.parity.pack import PairRows, ParityPack, encode_png, save_pack
from pairedge.runtime.parity.replay import ReplayItem, flow_description, load_pipeline, replay

#: The default clip length: long enough for flow and track history to settle, small enough to copy around.
DEFAULT_FRAMES = 30


def build_pack(
    model: str | Path,
    source: Any,
    out: str | Path,
    *,
    frames: int = DEFAULT_FRAMES,
    backend: str = "onnxruntime",
    flow: str = "auto",
    on_frame: Callable[[], None] | None = None,
) -> ParityPack:
    """Replay ``frames`` frames of ``source`` through the fp32 pipeline of ``model`` and write the pack.

    Args:
        model: the fp32 model folder (``stage1.onnx`` + ``stage2.onnx``).
        source: a :class:`pairedge.evaluation.sources.StreamSource` (simulator scene, video + detections
            [+ gold pairs], or a box-only CAD sequence).
        out: the ``.npz`` to write (written atomically).
        frames: clip length (>= 2: flow needs a previous frame).
        backend, flow: the reference's classifier and flow backends ("auto": the model's own flow backend).

    Raises:
        InputError: fewer than 2 frames or more than :data:`pairedge.limits.MAX_SIM_FRAMES` (checked before
            anything runs), frames whose PNGs pass :data:`pairedge.limits.MAX_PACK_BYTES` (checked as they
            come), or the clip has no pair of people. ModelError / FormatError from the model and the source.
    """
    if frames < 2:
        raise InputError(f"--frames: expected at least 2 frames (flow needs a previous frame), got {frames}")
    limits.check_sim_work(1, frames, "--frames")
    config = PipelineConfig()
    with load_pipeline(model, backend=backend, flow=flow, config=config) as pipe:
        truths: list[Any] = []
        pngs: list[np.ndarray] = []
        stamps: list[float] = []
        size = getattr(source, "image_size", None)  # (W, H) of box-only sources, else the first frame's
        first: list[int] = []

        def items() -> Iterator[ReplayItem]:
            stored = 0
            for k, f in enumerate(source.open(pipe.labels, max_frames=frames)):
                if f.image is not None:
                    pngs.append(encode_png(f.image))
                    first[:] = first or [int(f.image.shape[1]), int(f.image.shape[0])]
                    stored += len(pngs[-1])
                    if stored > limits.MAX_PACK_BYTES:  # the pack could not be read back: stop now
                        raise InputError(
                            f"--frames {frames}: the first {k + 1} frames of {source.name} already take "
                            f"{limits.describe_size(stored)} as PNG, more than the "
                            f"{limits.describe_size(limits.MAX_PACK_BYTES)} ceiling of a parity pack "
                            "(pairedge.limits.MAX_PACK_BYTES); ask for fewer --frames"
                        )
                truths.append(f.truth)
                stamps.append(float(f.timestamp))
                if on_frame is not None:
                    on_frame()
                yield k, f.image, f.detections, f.timestamp

        result = replay(pipe, items(), image_size=size)
        if not len(result.rows):
            raise InputError(
                f"{source.name}: no pair of people in the first {frames} frames; pick another clip"
            )
        identity = model_identity(pipe.models, pipe.feature_config)
        reference = {
            "source": source.name, "frames": len(stamps), "box_only": not pngs, "image_size": [int(size[0]), int(size[1])] if size is not None else first or None,
            "backend": repr(pipe.stage1), "precision": "fp32", "flow": flow_description(pipe),
            "tau_interact": pipe.tau_interact, "tau_group": pipe.tau_group,
            "smoothing_alpha": config.smoothing.alpha, "pairedge_version": _version(),
        }  # fmt: skip
    offsets = (
        np.concatenate([[0], np.cumsum([len(p) for p in pngs])]).astype(np.int64)
        if pngs
        else np.zeros(len(stamps) + 1, np.int64)
    )
    truth_inter, truth_label = pair_truth(result.rows, truths, pipe.labels)
    pack = ParityPack(
        identity=identity, reference=reference,
        frame_png=np.concatenate(pngs) if pngs else np.zeros(0, np.uint8), frame_offsets=offsets,
        timestamps=np.asarray(stamps, np.float64), detections=result.detections, rows=result.rows,
        truth_interacting=truth_inter, truth_label=truth_label,
    )  # fmt: skip
    save_pack(pack, out)
    return pack


def _version() -> str:
    from pairedge import __version__

    return str(__version__)


def pair_truth(rows: PairRows, truths: list[Any], labels: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(M,) int8 interacting (1 / 0 / -1 unknown) and (M,) int64 label id (-1: none) of every pair row.

    ``truths[k]`` is the :class:`~pairedge.evaluation.sources.FrameTruth` of clip frame ``k`` (None: unknown);
    a row's truth is the first labelled pair of its frame with the same ``(id_a, id_b)``.
    """
    from pairedge.metrics.pairwise_keys import lookup, row_keys

    inter = np.full(len(rows), -1, np.int8)
    label = np.full(len(rows), -1, np.int64)
    index = {name: k for k, name in enumerate(labels)}
    known = np.array([t is not None for t in truths], bool)
    given = [(k, t) for k, t in enumerate(truths) if t is not None]
    t_keys = np.concatenate([np.column_stack([np.full(len(t.pairs), k), t.pairs.reshape(-1, 2)])
                             for k, t in given] or [np.zeros((0, 3))]).astype(np.int64)  # fmt: skip
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
