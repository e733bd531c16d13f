"""The four parity levels and their tolerances (documented in docs/deployment.md).

1. **features** — the device's features vs the pack's (per column, in units of the model's own
   normalisation std, i.e. what the classifier sees): mean / p99 / max absolute drift; pair coverage; the
   feature spec, its version and its options must be the pack's.
2. **logits** — the device's classifiers on the pack's features vs the fp32 logits: max / mean / p99 absolute
   error per stage (tolerances by precision); normalisation statistics compared with the pack's.
3. **labels** — label names and order; stage-1 gate agreement; stage-2 top-1 agreement on the pairs the
   reference gates (near-ties counted and excepted); the reference-vs-device confusion and the per-class
   confusion delta against the truth.
4. **task** — pairwise accuracy, MPCA, macro-F1 and stage-1 pair F1 against the pack's truth: the device's
   drop versus the reference's (one-sided: a candidate may do better).

Levels 2-4 compute their decisions, agreements, logit errors and drops with
:mod:`pairedge.compare.comparator`, the comparison ``calibrate`` and ``bench`` use, so on the same rows they
report the same figures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pairedge.compare.comparator import (
    Comparison,
    DecisionRule,
    LogitError,
    compare,
    decision_problem,
    metric_delta,
    top1_scope,
)
from pairedge.core.artefacts import PRECISIONS
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise import classification_metrics, pair_detection

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Tolerances:
    """Pass thresholds of every level (fractions, not percent).

    Attributes:
        feature_mean_z, feature_p99_z: largest mean / p99 absolute drift of a feature column, in units of the
            model's normalisation std for that column.
        pair_coverage: smallest share of the pack's pair-frames the device must also produce.
        logit_p99, logit_max: precision -> largest p99 / max absolute logit error.
        gate_agreement, top1_agreement: smallest stage-1 gate / stage-2 top-1 agreement with the reference.
        task_drop: metric -> largest drop of the device's score below the reference's.
    """

    feature_mean_z: float = 0.02
    feature_p99_z: float = 0.10
    pair_coverage: float = 0.99
    logit_p99: dict[str, float] = field(default_factory=lambda: {"fp32": 1e-4, "fp16": 0.02, "int8": 0.25})
    logit_max: dict[str, float] = field(default_factory=lambda: {"fp32": 1e-3, "fp16": 0.1, "int8": 1.0})
    gate_agreement: float = 0.99
    top1_agreement: float = 0.99
    task_drop: dict[str, float] = field(
        default_factory=lambda: {"accuracy": 0.005, "mpca": 0.005, "macro_f1": 0.01, "pair_f1": 0.01}
    )

    def __post_init__(self) -> None:
        for key, (level, upper, names) in _TOLERANCE_RULES.items():
            value = getattr(self, key)
            if names is None:
                _check_tolerance(level, key, value, upper)
                continue
            if not isinstance(value, dict) or set(value) != set(names):
                raise InputError(
                    f"tolerances: {level} level, {key!r}: expected an object with the keys {list(names)}, "
                    f"got {value!r:.120}"
                )
            for name, v in value.items():
                _check_tolerance(level, f"{key}[{name!r}]", v, upper)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Tolerances:
        """Defaults overridden by ``values`` (dict fields merge: ``{"logit_max": {"int8": 2.0}}``).

        Raises:
            InputError: an unknown key, or a value that is not a finite number >= 0 (fractions: at most 1),
                naming the level and the key.
        """
        if not isinstance(values, dict):
            raise InputError(f"tolerances: expected a JSON object, got {type(values).__name__}")
        base = cls().to_dict()
        for key, value in values.items():
            if key not in base:
                raise InputError(f"tolerances: unknown key {key!r}; expected some of {sorted(base)}")
            if isinstance(base[key], dict):
                if not isinstance(value, dict):
                    raise InputError(f"tolerances: {key!r} expects an object such as {base[key]}")
                unknown = sorted(set(value) - set(base[key]))
                if unknown:
                    raise InputError(
                        f"tolerances: {key!r}: unknown key(s) {unknown}; expected some of {sorted(base[key])}"
                    )
                base[key] = {**base[key], **value}
            else:
                base[key] = value
        return cls(**base)


#: field -> (level it belongs to, upper bound or None, the keys of a per-name field or None).
_TOLERANCE_RULES: dict[str, tuple[str, float | None, tuple[str, ...] | None]] = {
    "feature_mean_z": ("features", None, None),
    "feature_p99_z": ("features", None, None),
    "pair_coverage": ("features", 1.0, None),
    "logit_p99": ("logits", None, PRECISIONS),
    "logit_max": ("logits", None, PRECISIONS),
    "gate_agreement": ("labels", 1.0, None),
    "top1_agreement": ("labels", 1.0, None),
    "task_drop": ("task", None, ("accuracy", "mpca", "macro_f1", "pair_f1")),
}


def _check_tolerance(level: str, key: str, value: Any, upper: float | None) -> None:
    """A tolerance is a finite number >= 0 (a fraction at most ``upper``): NaN would disable its level."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        ok = ok and math.isfinite(value) and value >= 0 and (upper is None or value <= upper)
    except OverflowError:  # an integer beyond float
        ok = False
    if not ok:
        what = f"a finite number in [0, {upper:g}]" if upper is not None else "a finite number >= 0"
        raise InputError(f"tolerances: {level} level, {key!r} must be {what}, got {value!r:.60}")


@dataclass(frozen=True)
class LevelResult:
    """One level: ``status`` PASS / FAIL / SKIP, ``problems`` (one line each, naming what differs), notes,
    metrics (JSON-serialisable) and the tolerances applied."""

    name: str
    status: str
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    tolerances: dict[str, Any] = field(default_factory=dict)


def _stats(diff: np.ndarray) -> dict[str, float]:
    a = np.abs(diff.astype(np.float64))
    if not a.size:
        return {"max": 0.0, "mean": 0.0, "p99": 0.0}
    return {"max": float(a.max()), "mean": float(a.mean()), "p99": float(np.percentile(a, 99))}


# -- 1. features ----------------------------------------------------------------------------------------
def spec_problems(pack_id: dict[str, Any], cand_id: dict[str, Any]) -> list[str]:
    """What differs between the pack's and the candidate's feature definition (spec, version, options)."""
    out = []
    ps, cs = (
        (pack_id["feature_spec"], pack_id["feature_spec_version"]),
        (cand_id["feature_spec"], cand_id["feature_spec_version"]),
    )
    if ps != cs:
        out.append(f"feature spec differs: pack {ps[0]} v{ps[1]}, model {cs[0]} v{cs[1]}")
    pc, cc = pack_id.get("feature_config", {}), cand_id.get("feature_config", {})
    diff = sorted(k for k in set(pc) | set(cc) if pc.get(k) != cc.get(k))
    if ps == cs and diff:
        shown = ", ".join(f"{k}: pack {pc.get(k)!r} vs model {cc.get(k)!r}" for k in diff[:4])
        out.append(f"feature options differ ({shown})")
    return out


def features_level(
    pack_id: dict[str, Any],
    cand_id: dict[str, Any],
    ref: Any,
    dev: Any | None,
    match: tuple[np.ndarray, np.ndarray] | None,
    flows: tuple[dict[str, Any], dict[str, Any]] | None,
    tol: Tolerances,
) -> LevelResult:
    """Level 1. ``ref`` / ``dev``: pack and device :class:`PairRows`; ``match``: aligned row indices;
    ``flows``: reference and device flow descriptions. ``dev`` None = model-only (only the definition is
        compared)."""
    problems = spec_problems(pack_id, cand_id)
    tols = {"mean_z": tol.feature_mean_z, "p99_z": tol.feature_p99_z, "pair_coverage": tol.pair_coverage}
    if dev is None or match is None or problems:
        notes = (
            ("model-only: features taken from the pack; only their definition is compared",)
            if dev is None
            else ()
        )
        return LevelResult("features", FAIL if problems else PASS, tuple(problems), notes, {}, tols)
    ri, di = match
    coverage = len(ri) / max(len(ref), 1)
    metrics: dict[str, Any] = {
        "pairs_reference": len(ref),
        "pairs_device": len(dev),
        "pairs_matched": len(ri),
        "coverage": coverage,
        "columns": {},
    }
    if coverage < tol.pair_coverage:
        problems.append(
            f"pair coverage {coverage:.3f} < {tol.pair_coverage}: the device produced "
            f"{len(ri)} of the pack's {len(ref)} pair-frames (detections dropped or re-tracked?)"
        )
    worst: list[tuple[float, str, dict[str, float]]] = []
    for stage in ("stage1", "stage2"):
        names = pack_id[f"{stage}_feature_names"]
        std = np.maximum(np.asarray(pack_id["norm"][stage]["std"], np.float64), 1e-6)
        diff = (
            getattr(dev, f"{stage}_features")[di].astype(np.float64) - getattr(ref, f"{stage}_features")[ri]
        ) / std
        for k, name in enumerate(names):
            s = _stats(diff[:, k])
            metrics["columns"][f"{stage}.{name}"] = s
            if s["p99"] > tol.feature_p99_z or s["mean"] > tol.feature_mean_z:
                worst.append((s["p99"], f"{stage}.{name}", s))
    if worst:
        worst.sort(reverse=True)
        cols = ", ".join(f"{n} (p99 {s['p99']:.3g}, mean {s['mean']:.3g} std)" for _, n, s in worst[:3])
        rf, df = flows or ({}, {})
        via = (
            f"; flow backend differs: reference {rf.get('repr')}, device {df.get('repr')}"
            if rf.get("repr") != df.get("repr")
            else f"; flow backend {df.get('repr')} (same as the reference)"
        )
        problems.append(f"{len(worst)} feature column(s) drift beyond tolerance: {cols}{via}")
    return LevelResult("features", FAIL if problems else PASS, tuple(problems), (), metrics, tols)


# -- 2. logits ------------------------------------------------------------------------------------------
def _comparison(ref: Any, logits: tuple[np.ndarray, np.ndarray], tau: float) -> Comparison:
    """The comparator on the pack's rows: the gate on every pair, the top-1 on the pairs the reference
    gates."""
    return compare((ref.stage1_logits, ref.stage2_logits), logits, DecisionRule(tau=tau))


def logits_level(
    pack_id: dict[str, Any],
    cand_id: dict[str, Any],
    ref: Any,
    logits: tuple[np.ndarray, np.ndarray],
    precision: str,
    tol: Tolerances,
    tau: float = 0.5,
) -> LevelResult:
    """Level 2: ``logits`` = the candidate's (stage 1, stage 2) on the pack's features.

    The comparator's logit error (:class:`pairedge.compare.comparator.LogitError`): stage 1 on every pair;
    stage 2 on the pairs the reference gates (those stage 2 classifies in the pipeline; its logits on
    non-interacting pairs are never used; every pair when the reference gates none), with the all-pairs
    statistics reported as ``stage2_all_pairs``.
    """
    p99, mx = (
        tol.logit_p99.get(precision, tol.logit_p99["int8"]),
        tol.logit_max.get(precision, tol.logit_max["int8"]),
    )
    problems: list[str] = []
    metrics: dict[str, Any] = {"precision": precision}
    for stage, cand, want in (
        ("stage1", logits[0], ref.stage1_logits),
        ("stage2", logits[1], ref.stage2_logits),
    ):
        if cand.shape != want.shape:
            problems.append(
                f"{stage} logits have shape {cand.shape[1:]} per pair, the pack's {want.shape[1:]}"
            )
    if problems:
        return LevelResult(
            "logits", FAIL, tuple(problems), (), metrics, {"p99": p99, "max": mx, "precision": precision}
        )
    comp = _comparison(ref, logits, tau)
    for stage, sc in (("stage1", comp.gate), ("stage2", comp.top1)):
        bad = sc.logits_all.nonfinite_rows
        if bad:  # NaN compares false with every tolerance: it must fail by name, never pass
            problems.append(
                f"{stage} logits are NaN or inf for {bad} of {sc.logits_all.rows} pairs ({precision})"
            )
            metrics[f"{stage}_nonfinite_pairs"] = bad
            continue
        if stage == "stage2":
            metrics["stage2_all_pairs"] = _error_stats(sc.logits_all)
            metrics["stage2_pairs"] = sc.logits.rows
            metrics["stage2_scope"] = sc.decision.scope
        s = metrics[stage] = _error_stats(sc.logits)
        if s["p99"] > p99 or s["max"] > mx:
            problems.append(
                f"{stage} logit error max {s['max']:.3g} / p99 {s['p99']:.3g} exceeds {mx:g} / {p99:g} "
                f"({precision}){_norm_hint(pack_id, cand_id, stage, precision)}"
            )
    return LevelResult(
        "logits",
        FAIL if problems else PASS,
        tuple(problems),
        (),
        metrics,
        {"p99": p99, "max": mx, "precision": precision},
    )


def _error_stats(e: LogitError) -> dict[str, float]:
    return {"max": e.max, "mean": e.mean, "p99": e.p99}


def _norm_hint(pack_id: dict[str, Any], cand_id: dict[str, Any], stage: str, precision: str) -> str:
    a, b = pack_id["norm"][stage], cand_id["norm"][stage]
    if np.allclose(a["mean"], b["mean"], rtol=1e-6, atol=1e-9) and np.allclose(
        a["std"], b["std"], rtol=1e-6, atol=1e-9
    ):
        if precision == "fp32":
            return "; normalisation statistics match the pack's, so the weights differ"
        return (
            f"; normalisation statistics match the pack's: the error comes from {precision} "
            "weights/activations"
        )
    return "; normalisation statistics differ from the pack's (model exported with another normalisation)"


# -- 3. labels ------------------------------------------------------------------------------------------
def labels_level(
    pack_id: dict[str, Any],
    cand_id: dict[str, Any],
    ref: Any,
    logits: tuple[np.ndarray, np.ndarray],
    tau: float,
    truth_label: np.ndarray,
    tol: Tolerances,
) -> LevelResult:
    """Level 3: names and order of the labels, gate and top-1 agreement, confusion and its delta vs truth."""
    problems: list[str] = []
    for key, what in (("stage1_labels", "stage-1"), ("labels", "stage-2")):
        if list(pack_id[key]) != list(cand_id[key]):
            kind = "label order differs" if sorted(pack_id[key]) == sorted(cand_id[key]) else "labels differ"
            problems.append(f"{what} {kind}: pack {pack_id[key]}, model {cand_id[key]}")
    tols = {"gate_agreement": tol.gate_agreement, "top1_agreement": tol.top1_agreement}
    if logits[0].shape != ref.stage1_logits.shape or logits[1].shape != ref.stage2_logits.shape:
        problems.append(
            "decisions not compared: the model's logits have another shape than the pack's (see logits)"
        )
        return LevelResult("labels", FAIL, tuple(problems), (), {}, tols)
    comp = _comparison(ref, logits, tau)
    gate, top = comp.gate.decision, comp.top1.decision
    scope, _ = top1_scope(comp.rule, len(ref.stage2_logits), ref.stage1_logits)
    ref_top, dev_top = comp.rule.top1(ref.stage2_logits), comp.rule.top1(logits[1])
    c = ref.stage2_logits.shape[1]
    agree_conf = np.zeros((c, c), np.int64)
    np.add.at(agree_conf, (ref_top[scope], dev_top[scope]), 1)
    metrics: dict[str, Any] = {
        "gate_agreement": gate.agreement if gate.rows else 1.0,
        "top1_agreement": top.agreement if top.rows else 1.0,
        "gate_agreement_excl_near_ties": gate.agreement_excl_near_ties if gate.rows else 1.0,
        "top1_agreement_excl_near_ties": top.agreement_excl_near_ties if top.rows else 1.0,
        "gate_near_tie_disagreements": gate.near_tie_disagreements,
        "top1_near_tie_disagreements": top.near_tie_disagreements,
        "top1_scope": top.scope,
        "top1_pairs": top.rows,
        "reference_vs_device": agree_conf.tolist(),
        "comparison": comp.to_dict(),
    }
    known = truth_label >= 0
    if known.any():
        ref_conf = classification_metrics(truth_label[known], ref_top[known], c).confusion
        dev_conf = classification_metrics(truth_label[known], dev_top[known], c).confusion
        metrics["confusion_delta_vs_truth"] = (dev_conf - ref_conf).tolist()
    problems += [
        p
        for p in (decision_problem(gate, tol.gate_agreement), decision_problem(top, tol.top1_agreement))
        if p
    ]
    return LevelResult("labels", FAIL if problems else PASS, tuple(problems), (), metrics, tols)


# -- 4. task --------------------------------------------------------------------------------------------
def task_scores(
    keys: np.ndarray,
    p: np.ndarray,
    label: np.ndarray,
    tau: float,
    truth_inter: np.ndarray,
    truth_label: np.ndarray,
    c: int,
) -> dict[str, float]:
    """Accuracy / MPCA / macro-F1 on the true interacting pairs and stage-1 pair F1 on pairs with known
    truth."""
    known = truth_inter >= 0
    scored = (truth_inter == 1) & (truth_label >= 0)
    m = classification_metrics(truth_label[scored], np.where(label[scored] >= 0, label[scored], -1), c)
    det = pair_detection(keys[known & (p >= tau)], keys[known & (truth_inter == 1)])
    return {
        "accuracy": m.accuracy,
        "mpca": m.mpca,
        "macro_f1": m.macro_f1,
        "pair_f1": det.f1,
        "scored_pairs": m.n,
    }


def task_level(
    ref_scores: dict[str, float] | None, dev_scores: dict[str, float] | None, tol: Tolerances
) -> LevelResult:
    """Level 4 from the reference's and the device's :func:`task_scores` (None: the pack has no truth)."""
    if ref_scores is None or dev_scores is None or not ref_scores["scored_pairs"]:
        return LevelResult(
            "task", SKIP, (), ("the pack has no truth for this clip: task metric not checked",)
        )
    problems = []
    metrics: dict[str, Any] = {"reference": ref_scores, "device": dev_scores, "delta": {}}
    for name, limit in tol.task_drop.items():
        delta, problem = metric_delta(name, ref_scores[name], dev_scores[name], limit, who="the device")
        metrics["delta"][name] = delta
        if problem:
            problems.append(problem)
    return LevelResult("task", FAIL if problems else PASS, tuple(problems), (), metrics, dict(tol.task_drop))
