"""Acceptance of ``pairedge calibrate``: how its defaults were chosen, INT8 / FP16 parity on held-out data,
latency.

The bundled default model (recipe: trained on seeds 0-11, tested on 1000-1007, link settings chosen on
2000-2003; ``sdk/models/default/recipe.json``). Simulator seeds, each set used for one purpose only:

* **calibration sets**: the README's ``static:0-3,moving:0-3``, the smaller ``static:0-1,moving:0-1`` and the
  default set calibrate takes from the model's recipe when no source is given (training seeds);
* **selection** (``--val``): seeds 6000-6007 of static / moving / noisy, 6008-6011 of noisy and 6000-6003 of
  surveillance (calibrate reserves 6000-6999 for choices): every candidate of :data:`CANDIDATES` (range
  method x headroom, plain int8: every Gemm int8, read once) calibrated on each calibration set and scored on
  these rows only: decision agreement with fp32 (stage 2 on the pairs the fp32 gate opens, what parity
  judges), the MPCA drop on the truth-labelled stage-2 rows, and the windows of 30 kept frames (as many
  pair-frames as a 30-frame parity pack; calibrate keeps every 3rd frame) that parity's int8 tolerances
  would fail: logits (max 1.0, p99 0.25) or labels (gate / top-1 agreement >= 99 %, near-ties excepted).
  :func:`select` applies the rule: on every calibration set every agreement >= 99.5 % and an MPCA drop <= 0.25
  points (half the targets' margins), then the fewest failing windows, then the highest agreement; calibrate's
  defaults must be the rule's winner (the report says whether). Every candidate has the same cost (the fp32
  Gemm shapes in int8), so cost is no criterion here; it is reported per variant below;
* **test**: seeds ``--test-seeds`` (4000-4001, those of ``bench_precisions.py``) and ``--test2-seeds``
  (3000-3002) of static / moving / noisy, and parity packs of held-out scenes (``--packs``, 60 frames,
  default tolerances): the headline, per calibration set. Never used for training, calibration or a choice.

Variants per calibration set: ``naive`` (ONNX Runtime's own Q/DQ placement, MinMax, no equalization, no
search: what a plain ``quantize_static`` gives), ``all-int8`` (calibrate's defaults without the
    mixed-precision sweep:
every Gemm int8) and ``default`` (what ``pairedge calibrate`` writes: the sweep may keep Gemms worth at most
10 % of the multiply-adds in fp16). Per variant: multiply-adds per pair, bytes and ONNX Runtime CPU latency
(:func:`pairedge.compare.cost.precision_costs`, the same code ``calibrate`` and ``bench`` report with).

    OMP_NUM_THREADS=1 python benchmarks/bench_calibrate.py --cache /tmp/bench_cal_cache   # ~10 min, 2 cores
    python benchmarks/bench_calibrate.py --quick                                          # fewer candidates

Writes ``benchmarks/results/bench_calibrate.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _calibrate_bench import evaluate, latency, load_rows, macs, parity_checks, save_rows, selection_scores
from _calibrate_report import markdown
from _train_bench import environment, write
from pairedge.calibration.api import (
    DEFAULT_HEADROOM,
    DEFAULT_METHOD,
    DEFAULT_PERCENTILE,
    DEFAULT_STRENGTH,
    CalibrateOptions,
    calibrate,
)
from pairedge.calibration.collect import Collected, merge, parse_scenes
from pairedge.calibration.infer import logits, session
from pairedge.core.bundled import default_model_dir
from pairedge.core.seeds import parse_seeds

CAL_SETS = {"readme": "static:0-3,moving:0-3", "small": "static:0-1,moving:0-1", "default": None}
SELECTION_ROWS = (("static,moving,noisy", "6000-6007"), ("noisy", "6008-6011"), ("surveillance", "6000-6003"))
HEADROOM = ((1.0, 1.0), (1.25, 1.25), (1.5, 1.5), (2.0, 2.0))
CANDIDATES: dict[str, dict[str, Any]] = {
    **{f"minmax, headroom {h[0]:g}/{h[1]:g}": {"method": "minmax", "headroom": h} for h in HEADROOM},
    **{
        f"percentile {q:g}": {"method": "percentile", "percentile": q, "headroom": (1.0, 1.0)}
        for q in (99.9, 99.99, 99.999)
    },
    "entropy": {"method": "entropy", "headroom": (1.0, 1.0)},
}
QUICK = ("minmax, headroom 1/1", "percentile 99.99", "minmax, headroom 1.5/1.5")
#: Every selection agreement (both stages, every calibration set) must reach this, and no MPCA drop exceed
#: MAX_SELECTION_MPCA_DROP points, for a candidate to be eligible.
MIN_SELECTION_AGREEMENT, MAX_SELECTION_MPCA_DROP = 0.995, 0.25
#: calibrate's defaults as a candidate's options (the percentile only counts for the percentile method).
DEFAULT = {
    "method": DEFAULT_METHOD,
    "headroom": DEFAULT_HEADROOM,
    **({"percentile": DEFAULT_PERCENTILE} if DEFAULT_METHOD == "percentile" else {}),
}
VARIANTS = {
    "naive": {"method": "minmax", "placement": "all", "equalize": False, "target_agreement": None},
    "all-int8": {"target_agreement": None},
    "default": {},
}
TARGETS = {
    "int8_stage2_agreement": 0.99,
    "int8_stage1_agreement": 0.99,
    "int8_mpca_drop_points": 0.5,
    "fp16_agreement": 0.999,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=None, help="model folder (default: the bundled model)")
    p.add_argument("--presets", default="static,moving,noisy", help="presets of the test seeds")
    p.add_argument("--test-seeds", default="4000-4001")
    p.add_argument("--test2-seeds", default="3000-3002")
    p.add_argument("--packs", default="static:4000,moving:4000,noisy:4001,noisy:5000")
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--quick", action="store_true", help=f"only the candidates {QUICK}, no second test set")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--cache", type=Path, default=None, help="keep the collected rows here for reruns")
    return p.parse_args(argv)


def scenes(model: Path, presets: list[str], seeds: str, frames: int, cache: Path | None = None) -> Collected:
    """Rows of ``presets`` x ``seeds`` through the fp32 pipeline (kept in ``cache`` keyed by model and
    scenes)."""
    t = time.perf_counter()
    file = None
    if cache is not None:
        from pairedge.core.modelfolder import sha256_file

        key = "-".join(sha256_file(model / f"stage{s}.onnx")[:12] for s in (1, 2))
        file = cache / f"{key}-{'+'.join(presets)}-{seeds}-{frames}.npz"
        if file.is_file():
            return load_rows(file)
    from pairedge.calibration.collect import collect_scenes

    out = collect_scenes(model, [(p, parse_seeds(seeds)) for p in presets], frames=frames)
    if file is not None:
        save_rows(file, out)
    print(
        f"  {presets} seeds {seeds}: {len(out.stage1)} / {len(out.stage2)} rows, "
        f"{time.perf_counter() - t:.0f} s"
    )
    return out


def cal_rows(model: Path, text: str, frames: int, cache: Path | None) -> Collected:
    """Rows of a ``--scenes`` text, one cached part per preset."""
    parts = []
    for preset, seeds in parse_scenes(text):
        parts.append(scenes(model, [preset], ",".join(str(s) for s in seeds), frames, cache))
    return merge(parts)


def _options(spec: dict[str, Any], **extra: Any) -> CalibrateOptions:
    return CalibrateOptions(equalize_strength=DEFAULT_STRENGTH, **{**spec, **extra})


def selection(
    model: Path, cals: dict[str, Collected], val: Collected, work: Path, names: tuple[str, ...], kept: int
) -> dict[str, Any]:
    """Every candidate, calibrated on every calibration set (every Gemm int8), scored on the selection rows
    (``kept``: frames each selection scene's rows come from)."""
    ref = {
        1: logits(session(model / "stage1.onnx"), val.stage1.X),
        2: logits(session(model / "stage2.onnx"), val.stage2.X),
    }
    out: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {"options": CANDIDATES[name], "sets": {}}
        for set_name, cal in cals.items():
            folder = work / "sel"
            calibrate(model, folder, _options(CANDIDATES[name], target_agreement=None), collected=cal)
            entry["sets"][set_name] = selection_scores(folder, val, ref, kept)
            entry["macs"] = macs(folder)
            for f in folder.iterdir():
                f.unlink()
        s = [v[f"stage{k}"] for v in entry["sets"].values() for k in (1, 2)]
        entry["min_agreement"] = min(x["agreement"] for x in s)
        entry["max_mpca_drop_points"] = max(v["mpca_drop_points"] for v in entry["sets"].values())
        entry["failing_windows"] = sum(x["failing_windows"] for x in s)
        entry["windows"] = sum(x["windows"] for x in s)
        out[name] = entry
        print(
            f"  selection {name}: min agreement {entry['min_agreement']:.4f}, max MPCA drop "
            f"{entry['max_mpca_drop_points']:+.2f}, failing windows "
            f"{entry['failing_windows']}/{entry['windows']}"
        )
    return out


def select(scores: dict[str, Any]) -> str | None:
    """The rule (module docstring): eligible by agreement and MPCA drop, then fewest failing windows, then the
    highest agreement. When no candidate reaches the agreement bound (:func:`rule_met` is False for all), the
    same order among those within the MPCA drop (the bound is dropped, not the rule's order); None when every
    candidate drops MPCA too far."""
    eligible = [n for n, e in scores.items() if rule_met(e)] or [
        n for n, e in scores.items() if e["max_mpca_drop_points"] <= MAX_SELECTION_MPCA_DROP
    ]
    return min(
        eligible, key=lambda n: (scores[n]["failing_windows"], -scores[n]["min_agreement"]), default=None
    )


def rule_met(entry: dict[str, Any]) -> bool:
    """Whether a candidate's selection scores meet the rule's agreement and MPCA-drop bounds."""
    return (
        entry["min_agreement"] >= MIN_SELECTION_AGREEMENT
        and entry["max_mpca_drop_points"] <= MAX_SELECTION_MPCA_DROP
    )


def headline(
    model: Path, cals: dict[str, Collected], tests: dict[str, Collected], packs: list[str], work: Path
) -> dict[str, Any]:
    """Every variant of every calibration set on the test seeds; parity packs for the defaults."""
    results: dict[str, Any] = {}
    for set_name, cal in cals.items():
        for variant, spec in VARIANTS.items():
            name = f"{set_name}/{variant}"
            t = time.perf_counter()
            result = calibrate(model, work / name.replace("/", "-"), CalibrateOptions(**spec), collected=cal)
            entry: dict[str, Any] = {
                "folder": str(result.out),
                "seconds": round(time.perf_counter() - t, 1),
                "float_nodes": {
                    k: v.get("float_nodes", {}).get("gemms_in_float", v["excluded_nodes"])
                    for k, v in result.report["stages"].items()
                },
                "macs": {
                    k: v.get("layers", {}).get("macs_per_pair") for k, v in result.report["stages"].items()
                },
                "calibrate_report_rows": {k: v["held_out"] for k, v in result.report["stages"].items()},
                "test": {seeds: evaluate(result.out, rows) for seeds, rows in tests.items()},
            }
            if variant == "default":
                entry["parity"] = parity_checks(model, result.out, packs, work / "packs")
            results[name] = entry
            for seeds, e in entry["test"].items():
                i = e["int8"]
                print(
                    f"  {name} test {seeds}: stage 1 {i['stage1']['agreement']:.4f}, stage 2 gated "
                    f"{i['stage2_gated']['agreement']:.4f}, MPCA drop {i['mpca_drop_points']:+.2f}"
                )
    return results


def default_model_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from pairedge.calibration.default_set import default_source
    from pairedge.runtime.loading import find_models

    model = (args.model or default_model_dir()).expanduser()
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    sets = {k: v or default_source(find_models(model)) for k, v in CAL_SETS.items()}
    print("collecting rows through the fp32 pipeline")
    cals = {k: cal_rows(model, v, args.frames, args.cache) for k, v in sets.items()}
    val = merge([scenes(model, p.split(","), seeds, args.frames, args.cache) for p, seeds in SELECTION_ROWS])
    test_sets = [args.test_seeds] if args.quick else [args.test_seeds, args.test2_seeds]
    tests = {
        seeds: merge([scenes(model, [p], seeds, args.frames, args.cache) for p in presets])
        for seeds in test_sets
    }
    report: dict[str, Any] = {
        "model": str(model),
        "calibration_sets": sets,
        "presets": presets,
        "selection_rows": [f"{p}:{s}" for p, s in SELECTION_ROWS],
        "frames": args.frames,
        "test_seeds": list(tests),
        "default_options": DEFAULT,
        "packs": args.packs,
        "min_selection_agreement": MIN_SELECTION_AGREEMENT,
        "max_selection_mpca_drop_points": MAX_SELECTION_MPCA_DROP,
    }
    names = QUICK if args.quick else tuple(CANDIDATES)
    kept = -(-args.frames // CalibrateOptions().stride)
    report["selection"] = selection(model, cals, val, work, names, kept)
    report["selected"] = select(report["selection"])
    report["rule_met"] = report["selected"] is not None and rule_met(report["selection"][report["selected"]])
    chosen = CANDIDATES.get(report["selected"] or "", {})
    report["default_is_selected"] = bool(chosen) and all(chosen.get(k) == v for k, v in DEFAULT.items())
    report["results"] = headline(model, cals, tests, args.packs.split(","), work)
    report["latency_ms"] = latency(
        Path(report["results"]["readme/default"]["folder"]), next(iter(tests.values()))
    )
    return report


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp:
        report: dict[str, Any] = {
            "command": "python benchmarks/bench_calibrate.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "targets": TARGETS,
            "default": default_model_part(args, Path(tmp)),
        }
    report["environment"] = environment()
    report["seconds"] = round(time.perf_counter() - t0)
    paths = write("bench_calibrate", report, markdown(report), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)
    json.dumps(report)  # the report is plain JSON


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
