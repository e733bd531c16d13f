"""Helpers of bench_calibrate.py: cached rows, agreement on rows, 30-frame window checks, parity packs,
latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.collect import Collected
from pairedge.calibration.infer import agreement, logits, session
from pairedge.measure.metrics.pairwise import classification_metrics
from pairedge.runtime.deployment import Deployment

PRECISIONS = ("fp16", "int8")
SIZES = (1, 64, 512, 4950)
#: Kept frames per selection window: as many pair-frames as a 30-frame parity pack holds (a pack keeps every
#: frame; calibrate's rows every 3rd, so such a window spans 90 frames of its scene).
WINDOW_FRAMES = 30


def save_rows(path: Path, rows: Collected) -> None:
    """Cache collected rows as an .npz (no pickles)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {"sources": np.asarray(rows.sources)}
    for key, st in (("s1", rows.stage1), ("s2", rows.stage2)):
        for field in ("X", "cls", "truth", "motion", "group"):
            arrays[f"{key}_{field}"] = getattr(st, field)
        if st.gated is not None:
            arrays[f"{key}_gated"] = st.gated
        arrays[f"{key}_labels"] = np.asarray(st.labels)
    np.savez(path, **arrays)


def load_rows(path: Path) -> Collected:
    from pairedge.calibration.samples import StageSamples

    z = np.load(path, allow_pickle=False)
    parts = [
        StageSamples(
            s,
            z[f"s{s}_X"],
            z[f"s{s}_cls"],
            z[f"s{s}_truth"],
            z[f"s{s}_motion"],
            z[f"s{s}_group"],
            tuple(str(v) for v in z[f"s{s}_labels"]),
            z[f"s{s}_gated"] if f"s{s}_gated" in z else None,
        )
        for s in (1, 2)
    ]
    return Collected(parts[0], parts[1], tuple(str(v) for v in z["sources"]))


def _float_nodes(folder: Path) -> int:
    """Gemms of both stages without Q/DQ (computing in fp16 / fp32 on TensorRT)."""
    import json

    report = json.loads((folder / "calibration.json").read_text())
    return sum(
        len(st.get("float_nodes", {}).get("gemms_in_float", st["excluded_nodes"]))
        for st in report["stages"].values()
    )


def macs(folder: Path) -> dict[str, Any]:
    """Multiply-adds per pair of each stage's INT8 model (``{fp32, int8, float, int8_share}``), from the
    report."""
    import json

    report = json.loads((folder / "calibration.json").read_text())
    return {k: st.get("layers", {}).get("macs_per_pair") for k, st in report["stages"].items()}


def _tau(folder: Path) -> float:
    from pairedge.runtime.loading import find_models

    return find_models(folder).threshold("p_interact")


def windows(groups: np.ndarray, kept_frames: int, frames: int = WINDOW_FRAMES) -> list[np.ndarray]:
    """Row indices of windows of about ``frames`` kept frames: each scene's rows (in frame order,
    ``kept_frames`` frames of them) cut into ``round(kept_frames / frames)`` consecutive runs."""
    out = []
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        out += [c for c in np.array_split(idx, max(1, round(kept_frames / frames))) if len(c)]
    return out


def window_failures(
    stage: int, reference: np.ndarray, candidate: np.ndarray, groups: np.ndarray, tau: float, kept_frames: int
) -> tuple[int, int]:
    """(failing, total) pack-sized windows (:func:`windows`) by parity's int8 tolerances at the logits level
    (max, p99) and the labels level (gate / top-1 agreement, near-ties excepted), as ``parity check``
    judges."""
    from pairedge.compare.comparator import LogitError
    from pairedge.compare.parity.levels import Tolerances

    tol = Tolerances()
    floor = tol.gate_agreement if stage == 1 else tol.top1_agreement
    ws = windows(groups, kept_frames)
    fails = 0
    for w in ws:
        e = LogitError.of(reference[w], candidate[w])
        a = agreement(stage, reference[w], candidate[w], tau)
        fails += int(
            e.max > tol.logit_max["int8"]
            or e.p99 > tol.logit_p99["int8"]
            or a.agreement_excl_near_ties < floor
        )
    return fails, len(ws)


def _mpca(truth: np.ndarray, z: np.ndarray) -> float:
    known = truth >= 0
    return float(classification_metrics(truth[known], z[known].argmax(1), num_classes=z.shape[1]).mpca)


def selection_scores(
    folder: Path, rows: Collected, ref: dict[int, np.ndarray], kept_frames: int
) -> dict[str, Any]:
    """int8 of ``folder`` vs fp32 on selection rows: agreement (stage 2 on the gated rows, as parity judges),
    p99 logit error and the 30-frame windows that parity's int8 tolerances would fail, per stage; the MPCA
    drop (points) on the truth-labelled stage-2 rows. ``ref``: stage -> fp32 logits of the rows;
    ``kept_frames``: the frames each scene's rows come from."""
    tau = _tau(folder)
    out: dict[str, Any] = {}
    for s, st in ((1, rows.stage1), (2, rows.stage2)):
        got = logits(session(folder / f"stage{s}.int8.onnx"), st.X)
        if s == 2:
            out["mpca_drop_points"] = 100.0 * (_mpca(st.truth, ref[2]) - _mpca(st.truth, got))
        keep = st.gated if s == 2 and st.gated is not None else np.ones(len(st), bool)
        a = agreement(s, ref[s][keep], got[keep], tau)
        fails, total = window_failures(s, ref[s][keep], got[keep], st.group[keep], tau, kept_frames)
        out[f"stage{s}"] = {
            "agreement": a.agreement,
            "p99_abs_logit_error": a.p99_abs,
            "max_abs_logit_error": a.max_abs,
            "failing_windows": fails,
            "windows": total,
        }
    return out


def parity_checks(
    model: Path, folder: Path, scenes: list[str], work: Path, frames: int = 60
) -> dict[str, Any]:
    """``parity pack`` of each held-out scene (fp32 ``model``) and ``parity check`` of ``folder``'s int8 /
    fp16."""
    from pairedge.apps.evaluation.sources import parse_scene
    from pairedge.compare.parity import check_pack
    from pairedge.compare.parity.build import build_pack

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for scene in scenes:
        pack = work / f"{scene.replace(':', '_')}-{frames}.npz"
        if not pack.is_file():
            build_pack(model, parse_scene(scene, frames, "detections"), pack, frames=frames)
        for precision in ("int8", "fp16"):
            report = check_pack(pack, Deployment(folder, precision=precision, backend="onnxruntime"))
            levels = {lv.name: lv for lv in report.levels}
            logit, label = levels["logits"].metrics, levels["labels"].metrics
            out[f"{scene}/{precision}"] = {
                "passed": bool(report.passed),
                "verdict": report.verdict(),
                "failing": [lv.name for lv in report.levels if lv.status == "FAIL"],
                "stage1_logit_max": logit.get("stage1", {}).get("max"),
                "stage1_logit_p99": logit.get("stage1", {}).get("p99"),
                "stage2_logit_max": logit.get("stage2", {}).get("max"),
                "stage2_logit_p99": logit.get("stage2", {}).get("p99"),
                "gate_agreement": label.get("gate_agreement"),
                "top1_agreement": label.get("top1_agreement"),
                "top1_pairs": label.get("top1_pairs"),
            }
    return out


def evaluate(folder: Path, rows: Collected) -> dict[str, Any]:
    """Per precision: stage-1 gate and stage-2 top-1 agreement with fp32 (stage 2 on every collected row and
    on the gated ones), logit errors, MPCA vs truth."""
    tau = _tau(folder)
    out: dict[str, Any] = {}
    ref = {
        s: logits(session(folder / f"stage{s}.onnx"), st.X) for s, st in ((1, rows.stage1), (2, rows.stage2))
    }
    truth = rows.stage2.truth
    known = truth >= 0
    n_classes = len(rows.stage2.labels)
    fp32_mpca = classification_metrics(truth[known], ref[2][known].argmax(1), num_classes=n_classes).mpca
    gated = rows.stage2.gated
    for precision in PRECISIONS:
        entry: dict[str, Any] = {}
        for s, st in ((1, rows.stage1), (2, rows.stage2)):
            got = logits(session(folder / f"stage{s}.{precision}.onnx"), st.X)
            entry[f"stage{s}"] = agreement(s, ref[s], got, tau).to_dict()
            if s == 2:
                if gated is not None:
                    entry["stage2_gated"] = agreement(2, ref[2][gated], got[gated], tau).to_dict()
                mpca = classification_metrics(truth[known], got[known].argmax(1), num_classes=n_classes).mpca
                entry["mpca"] = float(mpca)
                entry["mpca_drop_points"] = 100.0 * float(fp32_mpca - mpca)
        out[precision] = entry
    out["int8"]["float_nodes"] = _float_nodes(folder)
    out["fp32_mpca"] = float(fp32_mpca)
    out["truth_rows"] = int(known.sum())
    return out


def latency(folder: Path, rows: Collected, repeats: int = 30) -> dict[str, Any]:
    """Per stage, :func:`pairedge.compare.cost.precision_costs` of the folder's fp32 / fp16 / int8 files on
    real
    rows: multiply-adds per pair, bytes, ONNX Runtime CPU p50 ms at 1 / 64 / 512 / 4950 pairs (one thread) --
    the figures ``pairedge calibrate`` and ``pairedge bench`` report, from the same code."""
    from pairedge.compare.cost import precision_costs

    out: dict[str, Any] = {}
    for s, st in ((1, rows.stage1), (2, rows.stage2)):
        files = {
            p: folder / (f"stage{s}.onnx" if p == "fp32" else f"stage{s}.{p}.onnx")
            for p in ("fp32", *PRECISIONS)
        }
        out[f"stage{s}"] = precision_costs(
            files, np.ascontiguousarray(st.X, np.float32), SIZES, repeats=repeats
        )
    return out
