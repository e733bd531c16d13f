"""``pairedge calibrate``: one model folder in, the same folder plus fp16 / int8 models and a report out.

Steps (all on CPU with ONNX Runtime):

1. check the model folder (both stages, one feature spec) and collect samples through its fp32 pipeline
   (no source given: the default set of :mod:`pairedge.calibration.default_set`, scenes of the model's
   own training recipe);
2. reject what cannot calibrate (no samples, NaN/inf, one class, features of another spec or label set);
3. split by sequence into calibration rows and held-out rows, and the held-out rows into *search* rows
   (every choice: whether and which nodes to keep in float) and *report* rows (the figures in the report,
   never used for a choice); stratify the calibration rows by class and motion, warn about small strata
   (``strict``: fail);
4. per stage: pre-process, absorb per-column scales before every quantized Gemm
   (:mod:`pairedge.calibration.equalize`), quantize to QDQ int8 with Q/DQ on the Gemm inputs; when the
   agreement with fp32 on the search rows is below ``target_agreement``, keep the most sensitive Gemms in
   float (greedy search on the search rows); convert to fp16; lint the QDQ model against TensorRT's rules;
   agreement with fp32 on the report rows through :func:`pairedge.calibration.infer.agreement`, the
   arithmetic ``bench`` and ``parity check`` use (stage 2 also on the rows the fp32 gate passes, the rows
   parity judges);
5. write everything into a temporary folder beside ``out``, register it in ``manifest.json``, then move
   it into place: nothing is written half-way (:mod:`pairedge.calibration.output`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.collect import (
    Collected,
    collect_cad,
    collect_npz,
    collect_scenes,
    collect_video,
    merge,
    parse_scenes,
)
from pairedge.calibration.default_set import default_source
from pairedge.calibration.equalize import equalize
from pairedge.calibration.fp16 import to_fp16
from pairedge.calibration.infer import agreement, decisions, logits, session
from pairedge.calibration.output import folder_report, write_folder
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.calibration.quantize import (
    QuantConfig,
    SearchResult,
    calibrate_ranges,
    preprocess,
    quantize,
    search_exclusions,
)
from pairedge.calibration.report import activation_ranges, float_nodes, layer_plans_report
from pairedge.calibration.samples import StageSamples, check_stage
from pairedge.calibration.strata import counts, select, small_strata, stratify
from pairedge.compare.cost import gemm_macs, precision_costs
from pairedge.core import artefacts, limits
from pairedge.core.bundled import in_installed_package, is_bundled, resolve_model_dir
from pairedge.core.errors import InputError, ModelError
from pairedge.core.modelfolder import sha256_file
from pairedge.runtime.loading import find_models

#: The default calibration method, equalization strength and range headroom (first layers, others), chosen on
#: the selection seeds (6000-6011, never reported on) by benchmarks/bench_calibrate.py; the percentile is the
#: one ``--method percentile`` keeps.
DEFAULT_METHOD = "percentile"
DEFAULT_PERCENTILE = 99.9
DEFAULT_STRENGTH = 0.5
DEFAULT_HEADROOM = (1.0, 1.0)
#: The agreement the mixed-precision search must reach on the search rows. They are few and come from the
#: calibration scenes, so the search needs a margin over the 99 % that the deployed files are held to: on the
#: selection seeds (6000-6011), ``--scenes static:0-1,moving:0-1`` gives stage-2 top-1 agreement 98.57 %
#: at a 0.99 target (all int8) and 99.43 % at 0.995 (the first layers float, 7.3 % of the multiply-adds);
#: QAT's sweep uses the same 0.995 (``QatConfig.float_target``). ``benchmarks/bench_calibrate.py`` reports it.
DEFAULT_TARGET_AGREEMENT = 0.995


@dataclass(frozen=True)
class CalibrateOptions:
    """Options of :func:`calibrate`.

    Attributes:
        scenes: simulator scenes ``"static:0-3,moving:0-3"`` (None: none; with no other source either, the
            default set of the model's recipe, :func:`pairedge.calibration.default_set.default_source`).
        video, detections: a video / image folder and its detection file (both or neither).
        features: features ``.npz`` files (training format).
        cad: a folder of Collective Activity ``annoNN.mat`` files (or one) through the model's pipeline
            (box-only models; every pair the runtime scores).
        frames, stride, boxes: simulator frames per scene, keep every ``stride``-th frame,
        "detections"/"truth".
        max_frames: video frames to read (None: all).
        method: "minmax", "entropy" or "percentile"; percentile: the percentile kept by "percentile".
        equalize: absorb per-column scales before every quantized Gemm (:mod:`pairedge.calibration.equalize`);
            equalize_strength: the exponent of its factors.
        placement: Q/DQ on the inputs of Gemm / MatMul only ("gemm") or ONNX Runtime's placement ("all").
        headroom: "gemm": the ranges of (the first layers, the other layers) as multiples of the calibrated
            ones (:mod:`pairedge.calibration.ranges`).
        target_agreement: held-out decision agreement with fp32 each int8 stage must reach; below it the
            most sensitive nodes stay in float. None: quantize everything, no search.
        max_float_share: at most this share of a stage's multiply-adds may stay in float for the target (the
            search stops at the last step within it, and the report warns when the target is not reached).
        max_rows: calibration rows per stage (stratified subset).
        min_per_stratum: warn (``strict``: fail) below this many rows in a stratum.
        held_out: share of sequences held out (half for the search, half for the report).
        strict: small strata are an error.
        seed: seed of the stratified subset.
    """

    scenes: str | None = None
    video: Path | None = None
    detections: Path | None = None
    features: tuple[Path, ...] = ()
    cad: Path | None = None
    frames: int = 300
    stride: int = 3
    boxes: str = "detections"
    max_frames: int | None = None
    method: str = DEFAULT_METHOD
    percentile: float = DEFAULT_PERCENTILE
    equalize: bool = True
    equalize_strength: float = DEFAULT_STRENGTH
    placement: str = "gemm"
    headroom: tuple[float, float] = DEFAULT_HEADROOM
    target_agreement: float | None = DEFAULT_TARGET_AGREEMENT
    max_float_share: float = 0.10
    max_rows: int = 4096
    min_per_stratum: int = 20
    held_out: float = 0.25
    strict: bool = False
    seed: int = 0


@dataclass(frozen=True)
class CalibrationResult:
    """What :func:`calibrate` wrote: the folder, its files and the report (as in ``calibration.json``)."""

    out: Path
    files: dict[str, str]
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return [w for st in self.report.get("stages", {}).values() for w in st.get("warnings", [])]


Progress = Callable[[str], None]


def calibrate(
    model: str | Path,
    out: str | Path,
    options: CalibrateOptions | None = None,
    progress: Progress | None = None,
    collected: Collected | None = None,
) -> CalibrationResult:
    """Calibrate the model folder ``model`` into ``out`` (see the module docstring).

    ``collected``: samples collected before (e.g. by :func:`pairedge.calibration.collect.collect_scenes`,
    to compare several options on the same rows); None collects them from the sources in ``options``.

    Raises:
        InputError: bad samples or options (nothing written). ModelError: unusable model folder, or ``out``
            holds another model.
    """

    options = options or CalibrateOptions()
    quant_config(options)  # a bad method, placement or headroom fails now, not after collecting
    scenes = check_scenes(options)  # the simulator work is bounded before any of it
    say = progress or (lambda _msg: None)
    folder = resolve_model_dir(model)
    models = find_models(folder)
    target = Path(out).expanduser()
    check_out(folder, target)
    if collected is None and not has_source(options):
        from dataclasses import replace

        options = replace(options, scenes=default_source(models))
        scenes = check_scenes(options)
        say(f"no source given: the default set of the model's recipe, --scenes {options.scenes}")
    if collected is None:
        say("collecting samples")
        collected = _collect(folder, models, options, scenes, say)
    _fill_predictions(collected, models)
    for st in (collected.stage1, collected.stage2):
        check_stage(st, source=", ".join(collected.sources))
    one, two = artefacts.stage_artefacts(
        "fp32"
    )  # stages are keyed by their fp32 role, as the report shows them
    plans = {
        one.role: (_plan(collected.stage1, options), models.stage1),
        two.role: (_plan(collected.stage2, options), models.stage2),
    }
    warnings = [w for plan, _ in plans.values() for w in plan.warnings]
    if options.strict and warnings:
        raise InputError("calibration set too small (--strict): " + "; ".join(warnings))
    stages = {}
    for key, (plan, file) in plans.items():
        say(f"{key}: quantizing")
        stages[key] = _stage(plan, file.path, options, models.threshold("p_interact"))
    report = folder_report(folder, models, collected, options, stages)
    say("writing")
    files = write_folder(folder, target, stages, report)
    return CalibrationResult(target, files, report)


def parse_pair(text: str, option: str, kind: type) -> tuple[Any, Any]:
    """``"2,1.5"`` -> (2.0, 1.5) (``"2"`` -> (2.0, 2.0)) for ``--headroom``; ``kind`` int or float.

    Raises:
        InputError: not one or two numbers of that kind.
    """
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2):
        raise InputError(
            f"{option}: expected FIRST[,OTHERS] ({kind.__name__}s), e.g. "
            f"{'4,2' if kind is int else '2,1.5'}, got {text!r}"
        )
    return values[0], values[-1]


def has_source(options: CalibrateOptions) -> bool:
    """Whether ``options`` names a calibration source (scenes, a video with detections, features)."""
    return bool(options.scenes or options.video or options.detections or options.features or options.cad)


def quant_config(options: CalibrateOptions, exclude: tuple[str, ...] = ()) -> Any:
    """The :class:`~pairedge.calibration.quantize.QuantConfig` of ``options`` (``exclude``: nodes in float).

    Raises:
        InputError: an unknown method or placement, headroom out of bounds.
    """

    return QuantConfig(
        method=options.method,
        percentile=options.percentile,
        exclude=exclude,
        placement=options.placement,
        input_headroom=options.headroom[0],
        hidden_headroom=options.headroom[1],
    )


def check_scenes(options: CalibrateOptions) -> list[tuple[str, tuple[int, ...]]]:
    """The ``--scenes`` of ``options`` parsed, with the simulator work they ask for checked against
    :func:`pairedge.core.limits.check_sim_work` (every seed of every preset x ``frames``) before any
    rendering.

    Raises:
        InputError: a bad scene list, ``frames`` or ``stride`` below 1, or more work than the ceilings allow.
    """

    if options.frames < 1 or options.stride < 1:
        raise InputError(
            f"--frames and --stride: expected at least 1, got {options.frames} and {options.stride}"
        )
    scenes = parse_scenes(options.scenes) if options.scenes else []
    limits.check_sim_work(sum(len(seeds) for _, seeds in scenes), options.frames, "--scenes x --frames")
    return scenes


def _refuse_package_out(model: Path, out: Path) -> None:
    """Never write into the installed package (the bundled model's folder or anywhere else in it)."""

    where = out.expanduser().resolve()
    inside = in_installed_package(where)
    if inside is None:
        return
    what = (
        "the bundled model's folder"
        if is_bundled(where)
        else f"inside the installed pairedge package ({inside})"
    )
    hint = " (calibrate copies the bundled fp32 files into that folder)" if is_bundled(model) else ""
    raise InputError(
        f"--out {out}: {what}; calibrate never writes into the installed package: pass another --out, "
        f"e.g. a new folder{hint}"
    )


def check_out(model: Path, out: Path) -> None:
    """``out`` must be new, empty, the model folder itself, or a folder holding the same fp32 models, and
    never inside the installed package."""

    _refuse_package_out(model, out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: expected a folder, got the existing file {out}")
    if not out.exists() or not any(out.iterdir()) or out.resolve() == model.resolve():
        return
    for name in artefacts.stage_files("fp32"):
        theirs = out / name
        if not theirs.is_file() or sha256_file(theirs) != sha256_file(model / name):
            raise ModelError(
                f"--out {out} already holds other files (its {name} is missing or is not the model's); "
                "choose a new folder or the model folder itself"
            )


def _collect(
    folder: Path,
    models: Any,
    options: CalibrateOptions,
    scenes: list[tuple[str, tuple[int, ...]]],
    say: Progress,
) -> Collected:
    if (options.video is None) != (options.detections is None):
        raise InputError("--video and --detections go together (the same inputs as `pairedge run`)")
    parts = []
    if scenes:
        parts.append(
            collect_scenes(
                folder,
                scenes,
                frames=options.frames,
                stride=options.stride,
                boxes=options.boxes,
                on_scene=lambda g: say(f"scene {g}"),
            )
        )
    if options.video is not None and options.detections is not None:
        parts.append(
            collect_video(
                folder,
                options.video,
                options.detections,
                stride=options.stride,
                max_frames=options.max_frames,
            )
        )
    if options.features:
        labels = {1: tuple(models.stage1.labels), 2: tuple(models.stage2.labels)}
        parts.append(collect_npz(list(options.features), models.spec, labels))
    if options.cad is not None:
        say(f"Collective Activity {options.cad}")
        parts.append(collect_cad(folder, options.cad, stride=options.stride))
    return merge(parts)


def _fill_predictions(collected: Collected, models: Any) -> None:
    """Where the truth is unknown, the stratification class is the fp32 model's decision (in place)."""

    tau = models.threshold("p_interact")
    for st, file in ((collected.stage1, models.stage1), (collected.stage2, models.stage2)):
        unknown = st.cls < 0
        if unknown.any() and np.isfinite(st.X).all():
            st.cls[unknown] = decisions(st.stage, logits(session(file.path), st.X[unknown]), tau)


def split_held_out(samples: StageSamples, share: float) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (calibration, held out): whole sequences held out; one sequence: its last rows."""
    groups = np.unique(samples.group)
    if len(groups) >= 2:
        k = min(len(groups) - 1, max(1, round(share * len(groups))))
        rng = np.random.default_rng(len(groups))
        held = set(rng.choice(groups, size=k, replace=False).tolist())
        mask = np.isin(samples.group, list(held))
    else:
        mask = np.zeros(len(samples), bool)
        mask[int(round((1 - share) * len(samples))) :] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def split_search_report(held: StageSamples) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the held-out rows (search, report): half of the held-out sequences each (the first half
    of the rows and the second when one sequence is held out). Choices are made on the search rows; the
    report's figures come from the report rows alone."""
    groups = np.unique(held.group)
    if len(groups) >= 2:
        rng = np.random.default_rng(len(groups) + 1)
        search = set(rng.choice(groups, size=len(groups) // 2, replace=False).tolist())
        mask = np.isin(held.group, list(search))
    else:
        mask = np.zeros(len(held), bool)
        mask[: len(held) // 2] = True
    return np.flatnonzero(mask), np.flatnonzero(~mask)


@dataclass(frozen=True)
class _Plan:
    """The rows of one stage: all, calibration (and its stratified subset), search, report, and warnings."""

    samples: StageSamples
    cal: StageSamples
    search: StageSamples
    report: StageSamples
    chosen: StageSamples
    strata: Any
    chosen_strata: Any
    warnings: list[str]


def _plan(samples: StageSamples, options: CalibrateOptions) -> _Plan:
    cal_idx, held_idx = split_held_out(samples, options.held_out)
    cal, held = samples.subset(cal_idx), samples.subset(held_idx)
    search_idx, report_idx = split_search_report(held)
    strata = stratify(cal)
    chosen = cal.subset(select(cal, strata, options.max_rows, options.seed))
    warnings = small_strata(cal, strata, options.min_per_stratum)
    return _Plan(
        samples,
        cal,
        held.subset(search_idx),
        held.subset(report_idx),
        chosen,
        strata,
        stratify(chosen, strata.edges),
        warnings,
    )


def _int8(plan: _Plan, pre: Any, options: CalibrateOptions, tau: float) -> tuple[Any, Any, Any, Any, Any]:
    """(QDQ model, its QuantConfig, the search result, the first agreement on the search rows, the ranges)."""

    stage, X = plan.samples.stage, plan.chosen.X
    val = plan.search if len(plan.search) else plan.chosen
    config = quant_config(options)
    ranges = calibrate_ranges(pre, X, config)
    qdq = quantize(pre, X, config, ranges)
    first = agreement(stage, logits(session(pre), val.X), logits(session(qdq), val.X), tau)
    search = SearchResult()
    if options.target_agreement is not None and first.agreement < options.target_agreement:
        search = search_exclusions(pre, stage, X, val.X, config, options.target_agreement, tau, ranges=ranges)
        search = within_float_budget(pre, search, options.max_float_share)
        if search.excluded:
            config = quant_config(options, search.excluded)
            qdq = quantize(pre, X, config, ranges)
    return qdq, config, search, first, ranges


def within_float_budget(model: Any, search: Any, share: float) -> Any:
    """``search`` cut at its last step whose float Gemms do at most ``share`` of the multiply-adds."""
    from dataclasses import replace as replace_

    macs = {name: m for name, (m, _) in gemm_macs(model).items()}
    total = sum(macs.values()) or 1
    steps = [st for st in search.steps if sum(macs.get(n, 0) for n in st.excluded) / total <= share + 1e-12]
    return replace_(search, steps=tuple(steps or search.steps[:1]))


def _held_out(plan: _Plan, models: dict[str, Any], tau: float) -> dict[str, Any]:
    """Agreement of every precision of ``models`` (precision -> ModelProto, in the report's order) with its
    fp32 model on the report rows (stage 2 also on the gated ones)."""

    stage, rows = plan.samples.stage, plan.report
    reference = logits(session(models["fp32"]), rows.X)
    out: dict[str, Any] = {}
    for name in (n for n in models if n != "fp32"):
        got = logits(session(models[name]), rows.X)
        out[name] = agreement(stage, reference, got, tau).to_dict()
        if stage == 2 and rows.gated is not None:
            g = rows.gated
            out[f"{name}_gated"] = agreement(stage, reference[g], got[g], tau).to_dict()
    return out


def _stage(plan: _Plan, path: Path, options: CalibrateOptions, tau: float) -> dict[str, Any]:
    import onnx

    samples, warnings = plan.samples, list(plan.warnings)
    fp32 = onnx.load(str(path))
    pre = preprocess(fp32)
    equalized: dict[str, Any] = {}
    if options.equalize:
        pre, info = equalize(pre, plan.chosen.X, strength=options.equalize_strength)
        equalized = {
            k: {"channels": c, "scale_ratio": r, "folded_into": info.folded.get(k, "")}
            for k, (c, r) in info.producers.items()
        }
    qdq, config, search, first, ranges = _int8(plan, pre, options, tau)
    floats = float_nodes(pre, qdq, config, search)
    if floats["gemms_in_float"] and floats["gemms_in_float"] == floats["gemms"]:
        int8_file = artefacts.artefact(samples.stage, "int8").onnx
        warnings.append(
            f"stage {samples.stage}: every Gemm had to stay in float to reach "
            f"{options.target_agreement:.1%} agreement: {int8_file} computes in float "
            "(lower --target-agreement, or fine-tune the model with quantization-aware training)"
        )
    issues = check_qdq_rules(qdq)
    if issues:
        raise ModelError(f"{path.name}: the QDQ model breaks TensorRT rules: " + "; ".join(map(str, issues)))
    fp16 = to_fp16(fp32)
    report = {
        "rows": {
            "collected": len(samples),
            "calibration": len(plan.chosen),
            "held_out": len(plan.search) + len(plan.report),
            "search": len(plan.search),
            "report": len(plan.report),
            "held_out_groups": int(len(np.unique(np.concatenate([plan.search.group, plan.report.group])))),
            "report_groups": sorted(np.unique(plan.report.group).tolist()),
        },
        "motion_edges": list(plan.strata.edges),
        "strata": {
            "collected": counts(plan.cal, plan.strata),
            "calibration": counts(plan.chosen, plan.chosen_strata),
        },
        "warnings": warnings,
        "equalized": equalized,
        "excluded_nodes": list(config.exclude),
        "float_nodes": floats,
        "layers": layer_plans_report(pre, ranges, config),
        "search": {
            "sensitivity": search.sensitivity,
            "steps": [asdict(s) for s in search.steps],
            "first_agreement": first.agreement,
            "rows": "search" if len(plan.search) else "calibration",
        },
        "held_out": _held_out(plan, {"fp32": fp32, "int8": qdq, "fp16": fp16}, tau),
        "mixed_precision": _mixed(floats, search, options),
        "cost": stage_costs(
            {"fp32": fp32, "fp16": fp16, "int8": qdq}, plan.report.X if len(plan.report) else plan.chosen.X
        ),
        "tensors": activation_ranges(qdq, plan.report.X if len(plan.report) else plan.chosen.X),
        "qdq_issues": [],
    }
    return {"int8": qdq, "fp16": fp16, "fp32_path": path, "config": config, "report": report}


def _mixed(floats: dict[str, Any], search: Any, options: CalibrateOptions) -> dict[str, Any]:
    """Which Gemms stay in float (fp16 on TensorRT), why, and their share of the multiply-adds."""
    kept = list(floats.get("gemms_in_float", []))
    why = (
        "none: every Gemm int8 reaches the target agreement"
        if not kept
        else f"the per-layer sensitivity sweep on the search rows kept them in float to reach "
        f"{options.target_agreement:.1%} agreement"
    )
    return {
        "float_gemms": kept,
        "float_macs_share": 1.0 - float(floats.get("int8_macs_share", 1.0)),
        "why": why,
        "sensitivity": dict(search.sensitivity),
    }


def stage_costs(models: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """:func:`pairedge.compare.cost.precision_costs` of in-memory ModelProtos (written to a temporary
    folder)."""
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory(prefix="pairedge-cost-") as tmp:
        files = {}
        for name, model in models.items():
            files[name] = Path(tmp) / f"{name}.onnx"
            onnx.save(model, str(files[name]))
        return precision_costs(files, rows)


def describe(result: CalibrationResult) -> str:
    """A short JSON summary of a result (for logs)."""
    return json.dumps({k: v["held_out"] for k, v in result.report["stages"].items()}, indent=2)
