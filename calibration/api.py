"""``pairedge calibrate``: one model folder in, the same folder plus fp16 / int8 models and a report out.

Steps (all on CPU with ONNX Runtime):

1. check the model folder (both stages, one feature spec) and collect samples through its fp32 pipeline;
2. reject what cannot calibrate (no samples, NaN/inf, one class, features of another spec or label set);
3. split by sequence into calibration rows and held-out rows, stratify the calibration rows by class and
   motion, warn about small strata (``strict``: fail);
4. per stage: pre-process, equalize ranges, quantize to QDQ int8; when the agreement with fp32 on the
   held-out rows is below ``target_agreement``, keep the most sensitive nodes in float (greedy search on
   the held-out rows); convert to fp16; lint the QDQ model against TensorRT's rules;
5. write everything into a temporary folder beside ``out``, register it in ``manifest.json``, then move
   it into place: nothing is written half-way.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.collect import Collected, collect_npz, collect_scenes, collect_video, merge
from pairedge.calibration.samples import StageSamples, check_stage
from pairedge.calibration.strata import counts, select, small_strata, stratify
from pairedge.errors import InputError, ModelError

#: The default calibration method (chosen on held-out data by benchmarks/bench_calibrate.py).
DEFAULT_METHOD = "minmax"


@dataclass(frozen=True)
class CalibrateOptions:
    """Options of :func:`calibrate`.

    Attributes:
        scenes: simulator scenes ``"static:0-3,moving:0-3"`` (None: none).
        video, detections: a video / image folder and its detection file (both or neither).
        features: features ``.npz`` files (training format).
        frames, stride, boxes: simulator frames per scene, keep every ``stride``-th frame, "detections"/"truth".
        max_frames: video frames to read (None: all).
        method: "minmax", "entropy" or "percentile".
        equalize: equalize channel ranges before quantizing (see :mod:`pairedge.calibration.equalize`).
        target_agreement: held-out decision agreement with fp32 each int8 stage must reach; below it the
            most sensitive nodes stay in float. None: quantize everything, no search.
        max_rows: calibration rows per stage (stratified subset).
        min_per_stratum: warn (``strict``: fail) below this many rows in a stratum.
        held_out: share of sequences held out for parity and clipping rates.
        strict: small strata are an error.
        seed: seed of the stratified subset.
    """

    scenes: str | None = None
    video: Path | None = None
    detections: Path | None = None
    features: tuple[Path, ...] = ()
    frames: int = 300
    stride: int = 3
    boxes: str = "detections"
    max_frames: int | None = None
    method: str = DEFAULT_METHOD
    equalize: bool = True
    target_agreement: float | None = 0.99
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
    from pairedge.calibration.quantize import QuantConfig
    from pairedge.default_model import resolve_model_dir
    from pairedge.runtime.loading import find_models

    options = options or CalibrateOptions()
    QuantConfig(method=options.method)  # an unknown method fails now, not after minutes of collecting
    scenes = check_scenes(options)  # the simulator work is bounded before any of it
    say = progress or (lambda _msg: None)
    folder = resolve_model_dir(model)
    models = find_models(folder)
    target = Path(out).expanduser()
    check_out(folder, target)
    if collected is None:
        say("collecting samples")
        collected = _collect(folder, models, options, scenes, say)
    _fill_predictions(collected, models)
    for st in (collected.stage1, collected.stage2):
        check_stage(st, source=", ".join(collected.sources))
    plans = {
        "stage1": (_plan(collected.stage1, options), models.stage1),
        "stage2": (_plan(collected.stage2, options), models.stage2),
    }
    warnings = [w for plan, _ in plans.values() for w in plan.warnings]
    if options.strict and warnings:
        raise InputError("calibration set too small (--strict): " + "; ".join(warnings))
    stages = {}
    for key, (plan, file) in plans.items():
        say(f"{key}: quantizing")
        stages[key] = _stage(plan, file.path, options, models.threshold("p_interact"))
    report = _report(folder, models, collected, options, stages)
    say("writing")
    files = _write(folder, target, stages, report)
    return CalibrationResult(target, files, report)


def check_scenes(options: CalibrateOptions) -> list[tuple[str, tuple[int, ...]]]:
    """The ``--scenes`` of ``options`` parsed, with the simulator work they ask for checked against
    :func:`pairedge.limits.check_sim_work` (every seed of every preset x ``frames``) before any rendering.

    Raises:
        InputError: a bad scene list, ``frames`` or ``stride`` below 1, or more work than the ceilings allow.
    """
    from pairedge import limits
    from pairedge.calibration.collect import parse_scenes

    if options.frames < 1 or options.stride < 1:
        raise InputError(f"--frames and --stride: expected at least 1, got {options.frames} and {options.stride}")
    scenes = parse_scenes(options.scenes) if options.scenes else []
    limits.check_sim_work(sum(len(seeds) for _, seeds in scenes), options.frames, "--scenes x --frames")
    return scenes


def _refuse_package_out(model: Path, out: Path) -> None:
    """Never write into the installed package (the bundled model's folder or anywhere else in it)."""
    from pairedge.default_model import in_installed_package, is_bundled

    where = out.expanduser().resolve()
    inside = in_installed_package(where)
    if inside is None:
        return
    what = "the bundled model's folder" if is_bundled(where) else f"inside the installed pairedge package ({inside})"
    hint = " (calibrate copies the bundled fp32 files into that folder)" if is_bundled(model) else ""
    raise InputError(
        f"--out {out}: {what}; calibrate never writes into the installed package: pass another --out, "
        f"e.g. a new folder{hint}"
    )


def check_out(model: Path, out: Path) -> None:
    """``out`` must be new, empty, the model folder itself, or a folder holding the same fp32 models, and
    never inside the installed package."""
    from pairedge.modelfolder import sha256_file

    _refuse_package_out(model, out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: expected a folder, got the existing file {out}")
    if not out.exists() or not any(out.iterdir()) or out.resolve() == model.resolve():
        return
    for name in ("stage1.onnx", "stage2.onnx"):
        theirs = out / name
        if not theirs.is_file() or sha256_file(theirs) != sha256_file(model / name):
            raise ModelError(
                f"--out {out} already holds other files (its {name} is missing or is not the model's); "
                "choose a new folder or the model folder itself"
            )


def _collect(folder: Path, models: Any, options: CalibrateOptions, scenes: list[tuple[str, tuple[int, ...]]],
             say: Progress) -> Collected:  # fmt: skip
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
            )  # fmt: skip
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
    return merge(parts)


def _fill_predictions(collected: Collected, models: Any) -> None:
    """Where the truth is unknown, the stratification class is the fp32 model's decision (in place)."""
    from pairedge.calibration.infer import decisions, logits, session

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


@dataclass(frozen=True)
class _Plan:
    """The rows of one stage: all, held out, the stratified calibration subset, and the warnings."""

    samples: StageSamples
    cal: StageSamples
    held: StageSamples
    chosen: StageSamples
    strata: Any
    chosen_strata: Any
    warnings: list[str]


def _plan(samples: StageSamples, options: CalibrateOptions) -> _Plan:
    cal_idx, held_idx = split_held_out(samples, options.held_out)
    cal, held = samples.subset(cal_idx), samples.subset(held_idx)
    strata = stratify(cal)
    chosen = cal.subset(select(cal, strata, options.max_rows, options.seed))
    warnings = small_strata(cal, strata, options.min_per_stratum)
    return _Plan(samples, cal, held, chosen, strata, stratify(chosen, strata.edges), warnings)


def _stage(plan: _Plan, path: Path, options: CalibrateOptions, tau: float) -> dict[str, Any]:
    import onnx
    from pairedge.calibration.equalize import equalize
    from pairedge.calibration.fp16 import to_fp16
    from pairedge.calibration.infer import agreement, logits, session
    from pairedge.calibration.qdq_rules import check_qdq_rules
    from pairedge.calibration.quantize import (
        QuantConfig,
        SearchResult,
        compute_nodes,
        preprocess,
        quantize,
        search_exclusions,
    )
    from pairedge.calibration.report import activation_ranges

    samples, cal, held, chosen_samples = plan.samples, plan.cal, plan.held, plan.chosen
    strata, chosen_strata, warnings = plan.strata, plan.chosen_strata, plan.warnings
    fp32 = onnx.load(str(path))
    pre = preprocess(fp32)
    equalized: dict[str, Any] = {}
    if options.equalize:
        pre, info = equalize(pre, chosen_samples.X)
        equalized = {k: {"channels": c, "scale_ratio": r} for k, (c, r) in info.producers.items()}
    config = QuantConfig(method=options.method)
    qdq = quantize(pre, chosen_samples.X, config)
    val = held if len(held) else chosen_samples
    reference = logits(session(fp32), val.X)
    search = SearchResult()
    first = agreement(samples.stage, reference, logits(session(qdq), val.X), tau)
    if options.target_agreement is not None and first.agreement < options.target_agreement:
        search = search_exclusions(
            pre, samples.stage, chosen_samples.X, val.X, config, options.target_agreement, tau
        )
        if search.excluded:
            config = QuantConfig(method=options.method, exclude=search.excluded)
            qdq = quantize(pre, chosen_samples.X, config)
    quantizable = [n for n in compute_nodes(pre) if search.sensitivity.get(n, 0.0) < 1.0]
    if config.exclude and quantizable and set(quantizable) <= set(config.exclude):
        warnings = [*warnings, f"stage {samples.stage}: every quantizable node had to stay in float to reach "
                    f"{options.target_agreement:.1%} agreement: stage{samples.stage}.int8.onnx computes in float "
                    "(lower --target-agreement, or fine-tune the model with quantization-aware training)"]  # fmt: skip
    issues = check_qdq_rules(qdq)
    if issues:
        raise ModelError(f"{path.name}: the QDQ model breaks TensorRT rules: " + "; ".join(map(str, issues)))
    fp16 = to_fp16(fp32)
    held_out = {
        "int8": agreement(samples.stage, reference, logits(session(qdq), val.X), tau).to_dict(),
        "fp16": agreement(samples.stage, reference, logits(session(fp16), val.X), tau).to_dict(),
    }
    report = {
        "rows": {
            "collected": len(samples),
            "calibration": len(chosen_samples),
            "held_out": len(held),
            "held_out_groups": int(len(np.unique(held.group))),
        },
        "motion_edges": list(strata.edges),
        "strata": {"collected": counts(cal, strata), "calibration": counts(chosen_samples, chosen_strata)},
        "warnings": warnings,
        "equalized": equalized,
        "excluded_nodes": list(config.exclude),
        "search": {
            "sensitivity": search.sensitivity,
            "steps": [asdict(s) for s in search.steps],
            "first_agreement": first.agreement,
        },
        "held_out": held_out,
        "tensors": activation_ranges(qdq, val.X),
        "qdq_issues": [],
    }
    return {"int8": qdq, "fp16": fp16, "fp32_path": path, "config": config, "report": report}


def _report(
    folder: Path, models: Any, collected: Collected, options: CalibrateOptions, stages: dict[str, Any]
) -> dict[str, Any]:
    import onnxruntime
    from pairedge import __version__
    from pairedge.modelfolder import sha256_file

    inputs = {str(folder / f"{k}.onnx"): sha256_file(folder / f"{k}.onnx") for k in ("stage1", "stage2")}
    for extra in (options.video, options.detections, *options.features):
        if extra is not None and Path(extra).is_file():
            inputs[str(extra)] = sha256_file(extra)
    opts = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
    opts["features"] = [str(p) for p in options.features]
    return {
        "pairedge_version": __version__,
        "onnxruntime_version": onnxruntime.__version__,
        "model": {
            "folder": str(folder),
            "feature_spec": models.spec.name,
            "labels": list(models.labels),
        },
        "method": options.method,
        "equalize": options.equalize,
        "target_agreement": options.target_agreement,
        "sources": list(collected.sources),
        "inputs_sha256": inputs,
        "options": opts,
        "stages": {k: v["report"] for k, v in stages.items()},
    }


def _write(model: Path, out: Path, stages: dict[str, Any], report: dict[str, Any]) -> dict[str, str]:
    import onnx
    from pairedge.calibration.quantize import stamp
    from pairedge.calibration.report import write_reports
    from pairedge.modelfolder import MANIFEST_NAME, register_files, sha256_file

    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    roles: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.calibrate-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        for key, st in stages.items():
            shutil.copy2(st["fp32_path"], tmp / f"{key}.onnx")
            roles[f"{key}.onnx"] = key
            fp32_sha = sha256_file(st["fp32_path"])
            info = {
                "method": st["config"].method,
                "excluded_nodes": list(st["config"].exclude),
                "equalized": sorted(st["report"]["equalized"]),
                "fp32_sha256": fp32_sha,
                "held_out_agreement": st["report"]["held_out"]["int8"]["agreement"],
            }
            onnx.save(stamp(st["int8"], "int8", info), str(tmp / f"{key}.int8.onnx"))
            fp16_info = {"fp32_sha256": fp32_sha, "io": "float32", "compute": "float16"}
            onnx.save(stamp(st["fp16"], "fp16", fp16_info), str(tmp / f"{key}.fp16.onnx"))
            roles[f"{key}.int8.onnx"] = f"{key}.int8"
            roles[f"{key}.fp16.onnx"] = f"{key}.fp16"
        write_reports(tmp, report)
        roles["calibration.json"] = "calibration"
        roles["calibration.md"] = "calibration.report"
        fresh = not out.exists() or (out.is_dir() and not any(out.iterdir()))
        if fresh:
            register_files(tmp, roles)
        _move_into_place(tmp, out)
        if not fresh:  # the model folder itself (or a copy): keep the other entries of its manifest
            register_files(out, roles)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {name: str(out / name) for name in [*roles, MANIFEST_NAME]}


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out`` (new or empty folder), else replace ``out``'s files one by one, manifest last."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
        return
    for path in sorted(tmp.iterdir()):
        if not (out / path.name).is_file() or path.name not in ("stage1.onnx", "stage2.onnx"):
            os.replace(path, out / path.name)


def describe(result: CalibrationResult) -> str:
    """A short JSON summary of a result (for logs)."""
    return json.dumps({k: v["held_out"] for k, v in result.report["stages"].items()}, indent=2)
