"""``pairedge parity check``: replay a pack through the device's pipeline and judge the four levels.

Runs on the robot: numpy, OpenCV and the deployed backends only (no torch, no training data).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.compare.parity.identity import model_identity, relation
from pairedge.compare.parity.levels import (
    SKIP,
    LevelResult,
    Tolerances,
    features_level,
    labels_level,
    logits_level,
    spec_problems,
    task_level,
    task_scores,
)
from pairedge.compare.parity.pack import PairRows, ParityPack, load_pack
from pairedge.compare.parity.replay import (
    ReplayItem,
    StreamStart,
    flow_description,
    model_only_logits,
    replay,
)
from pairedge.compare.parity.verdict import ParityReport
from pairedge.core.bundled import describe_model
from pairedge.measure.metrics.pairwise.keys import lookup, row_keys
from pairedge.runtime.config import FlowConfig, PipelineConfig, SmoothingConfig
from pairedge.runtime.decisions import gated_labels, interact_probability
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.pipeline import Pipeline


@dataclass(frozen=True)
class CheckOptions:
    """Options of :func:`check_pack` (what to check and how strictly; the candidate itself is a
    :class:`~pairedge.runtime.deployment.Deployment`).

    Attributes:
        model_only: features from the pack, no frames, no flow (levels 2-4 and the definition check of 1).
        tolerances: the pass thresholds.
    """

    model_only: bool = False
    tolerances: Tolerances = Tolerances()


def check_pack(
    pack: str | Path | ParityPack,
    model: str | Path | Deployment,
    options: CheckOptions | None = None,
    on_frame: Callable[[], None] | None = None,
) -> ParityReport:
    """Check a deployed model against ``pack``.

    ``model``: the :class:`Deployment` (model folder, precision, backends; flow "auto" = the flow backend
    of the pack's reference), or a model folder (``Deployment(folder)``: fp32, the backends "auto").

    A candidate that is neither the pack's model nor derived from it (``relation`` "unverified": other
    files, no recorded fp32 source) is compared but never passes (:attr:`ParityReport.passed`).

    Raises:
        FormatError: unreadable pack. ModelError: missing files, or a model other than the pack's.
        BackendError: the backend cannot run here.
    """
    opts = options or CheckOptions()
    pk = pack if isinstance(pack, ParityPack) else load_pack(pack)
    deployment = model if isinstance(model, Deployment) else Deployment(model)
    deployment, config = reference_flow(deployment, pk.reference, reference_config(pk.reference))
    with deployment.load(config) as pipe:
        rel, rel_note = relation(pk.identity, pipe.models)
        cand_id = model_identity(pipe.models, pipe.feature_config)
        precision = pipe.models.precision
        levels = _levels(pk, pipe, cand_id, precision, opts, on_frame)
        candidate = {
            "model": str(deployment.folder),
            "name": describe_model(deployment.folder),
            "precision": precision,
            "relation": rel,
            "identity_note": rel_note,
            "integrity": pipe.models.integrity,
            "pipeline": pipe.describe(),
            "flow": flow_description(pipe),
        }
    return ParityReport(
        pack={
            "path": str(pk.path) if pk.path else None,
            "source": pk.reference.get("source"),
            "frames": pk.num_frames,
            "pairs": len(pk.rows),
            "reference": pk.reference,
            "replayed": replayed_state(pk),
        },
        candidate=candidate,
        mode="model-only" if opts.model_only else "full",
        levels=tuple(levels),
        tolerances=opts.tolerances.to_dict(),
    )


def reference_flow(
    deployment: Deployment, reference: dict[str, Any], config: PipelineConfig
) -> tuple[Deployment, PipelineConfig]:
    """A candidate with flow "auto" runs the flow backend the pack's reference ran (its name, preset and
    scale); any other flow, or a reference without flow, leaves both as they are."""
    ref_flow = reference.get("flow", {})
    if deployment.flow != "auto" or ref_flow.get("name") in (None, "none"):
        return deployment, config
    preset, scale = ref_flow.get("preset"), ref_flow.get("scale")
    flow = FlowConfig(
        preset=preset or config.flow.preset,
        scale=scale if scale is not None else config.flow.scale,
    )
    return replace(deployment, flow=ref_flow["name"]), replace(config, flow=flow)


def reference_config(reference: dict[str, Any]) -> PipelineConfig:
    """The pipeline options the pack's reference ran with. Gate thresholds and box-shape decisions come per
    frame from the pack (:attr:`ParityPack.frame_states`), so they are not pinned here."""
    ref, base = reference, SmoothingConfig()
    smoothing = SmoothingConfig(
        alpha=float(ref.get("smoothing_alpha", base.alpha)),
        grace_frames=int(ref.get("smoothing_grace_frames", base.grace_frames)),
        max_pairs=int(ref.get("smoothing_max_pairs", base.max_pairs)),
    )
    return PipelineConfig(
        tau_group=ref.get("tau_group"),
        smoothing=smoothing,
        box_shape=str(ref.get("box_shape", "auto")),
        operating_point=ref.get("operating_point"),
    )


def replayed_state(pk: ParityPack) -> dict[str, Any]:
    """What the check gives the device from the pack instead of letting it decide: the box-shape decision
    (frames, the detector's ratio), the gate thresholds (and the clip frames where they change), and whether
    the clip starts mid-stream (stream state restored at frame ``start``)."""
    st = pk.frame_states
    ratios = [s.aspect for s in st if s.aspect == s.aspect]  # not NaN
    taus = [s.tau_interact for s in st]
    return {
        "box_shape_ignored_frames": sum(s.box_shape_ignored for s in st),
        "fixed_ratio": ratios[-1] if ratios else None,
        "gate_thresholds": sorted(set(taus)),
        "gate_changes_at": [k for k in range(1, len(taus)) if taus[k] != taus[k - 1]],
        "start": int(pk.reference.get("start", 0)),
        "stream_state": pk.snapshot is not None,
    }


def gate_threshold(pk: ParityPack) -> float | np.ndarray:
    """The stage-1 threshold of every pair row: one number when it held over the whole clip, else (M,) float64
    (an automatic operating point switched inside the clip)."""
    tau = np.array([s.tau_interact for s in pk.frame_states], np.float64)
    if not len(tau) or (tau == tau[0]).all():
        return float(tau[0]) if len(tau) else float(pk.reference["tau_interact"])
    return tau[pk.rows.frame]


def _levels(
    pk: ParityPack,
    pipe: Pipeline,
    cand_id: dict[str, Any],
    precision: str,
    opts: CheckOptions,
    on_frame: Callable[[], None] | None,
) -> list[LevelResult]:
    tol, ref, ident = opts.tolerances, pk.rows, pk.identity
    tau = gate_threshold(pk)
    widths_ok = (pipe.models.spec.stage1_dim, pipe.models.spec.stage2_dim) == (
        ref.stage1_features.shape[1],
        ref.stage2_features.shape[1],
    )
    dev = match = None
    fits = pk.snapshot is None or not spec_problems(ident, cand_id)  # a stream state is the spec's own
    if not opts.model_only and widths_ok and fits:
        dev = replay_pack(pk, pipe, on_frame)
        match = match_rows(ref.keys(), dev.keys())
    flows = (pk.reference.get("flow", {}), flow_description(pipe))
    levels = [features_level(ident, cand_id, ref, dev, match, flows, tol)]
    if not widths_ok:
        why = (
            f"not run: the model takes {pipe.models.spec.stage1_dim} / {pipe.models.spec.stage2_dim} "
            f"features, the pack has {ref.stage1_features.shape[1]} / {ref.stage2_features.shape[1]}"
        )
        return levels + [LevelResult(n, SKIP, (), (why,)) for n in ("logits", "labels", "task")]
    logits = model_only_logits(pipe, ref.stage1_features, ref.stage2_features)
    levels.append(logits_level(ident, cand_id, ref, logits, precision, tol, tau))
    levels.append(labels_level(ident, cand_id, ref, logits, tau, pk.truth_label, tol))
    c = ref.stage2_logits.shape[1]
    keys = ref.keys()
    if not pk.has_truth:
        levels.append(task_level(None, None, tol))
    elif dev is None or match is None:  # model-only: raw gate and top-1 on both sides
        ref_s = task_scores(
            keys,
            interact_probability(ref.stage1_logits),
            gated_labels(ref.stage1_logits, ref.stage2_logits, tau),
            tau,
            pk.truth_interacting,
            pk.truth_label,
            c,
        )
        dev_s = task_scores(
            keys,
            interact_probability(logits[0]),
            gated_labels(logits[0], logits[1], tau),
            tau,
            pk.truth_interacting,
            pk.truth_label,
            c,
        )
        levels.append(task_level(ref_s, dev_s, tol))
    else:  # full: the pipelines' own outputs (smoothed gate, stage-2 labels)
        p, lab = np.zeros(len(ref), np.float32), np.full(len(ref), -1, np.int64)
        p[match[0]], lab[match[0]] = dev.p_interact[match[1]], dev.label[match[1]]
        ref_s = task_scores(keys, ref.p_interact, ref.label, tau, pk.truth_interacting, pk.truth_label, c)
        dev_s = task_scores(keys, p, lab, tau, pk.truth_interacting, pk.truth_label, c)
        levels.append(task_level(ref_s, dev_s, tol))
    return levels


def replay_pack(
    pk: ParityPack, pipe: Pipeline, on_frame: Callable[[], None] | None = None, *, exact: bool = True
) -> PairRows:
    """The pack's clip through ``pipe``: the device's pair rows.

    ``exact``: give the pipeline the reference's decisions at every frame and, for a clip from the middle
    of a stream, its state at the start (what ``parity check`` does). False lets the device decide on the
    clip alone (what packs before layout version 3 had to do; for comparisons only).
    """
    box_only = bool(pk.reference.get("box_only")) or len(pk.frame_png) == 0  # no frames: as the reference ran
    size = pk.reference.get("image_size")

    def items() -> Any:
        for k in range(pk.num_frames):
            image = None if box_only else pk.image(k)
            if on_frame is not None:
                on_frame()
            item: ReplayItem = (k, image, pk.detections[k], float(pk.timestamps[k]))
            yield item

    start = None if pk.snapshot is None or not exact else StreamStart(pk.snapshot, pk.lead_image())
    states = pk.frame_states if exact else None
    return replay(pipe, items(), image_size=tuple(size) if size else None, states=states, start=start).rows


def match_rows(ref_keys: np.ndarray, dev_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(ri, di)`` of the pair-frames present in both (keys (M, 3) ``frame, a, b``, unique
    within each side), ``ri`` increasing."""

    rk, dk = row_keys(ref_keys, dev_keys)
    order = np.argsort(dk, kind="stable")
    di = lookup(dk[order], order.astype(np.int64), rk)
    ri = np.flatnonzero(di >= 0)
    return ri, di[ri]
