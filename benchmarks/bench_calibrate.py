"""Acceptance of ``pairedge calibrate``: INT8 / FP16 parity with fp32 on held-out data, and CPU latency.

The bundled default model (recipe: trained on seeds 0-11, tested on 1000-1007, link settings chosen on
2000-2003; ``sdk/models/default/recipe.json``). Simulator seeds, each set used for one purpose only:

* **calibration sets**: the README's ``static:0-3,moving:0-3``, the smaller ``static:0-1,moving:0-1`` and the
  default set calibrate takes from the model's recipe when no source is given (training seeds);
* **selection**: seeds ``--val-seeds`` (default 6000-6007, presets static / moving / noisy): the method and
  equalization strength of the default are chosen here, on the README's calibration set, never the headline;
* **test**: seeds ``--test-seeds`` (default 4000-4001, the seeds ``bench_precisions.py`` reports on) and
  ``--test2-seeds`` (3000-3002): the headline, per calibration set and variant. Never used for training,
  calibration or any choice. Parity packs of held-out scenes (``--packs``, 60 frames) are checked with
  ``parity check``'s default tolerances.

Variants per calibration set: ``naive`` (ONNX Runtime's Q/DQ placement, MinMax, no equalization, no search:
what a plain ``quantize_static`` gives), ``all-int8`` (the default method with every Gemm in int8, no
search) and ``default`` (what ``pairedge calibrate`` writes: the same plus the mixed-precision search on
its held-out search rows). Rows are collected through the fp32 runtime pipeline (flow, features, stage-1
gate): stage 1 = every scored pair, stage 2 = the gated pairs plus the truth-labelled pairs; agreement
through :func:`pairedge.calibration.infer.agreement` per row, MPCA over the truth-labelled stage-2 rows.

    OMP_NUM_THREADS=1 python benchmarks/bench_calibrate.py --cache /tmp/bench_cal_cache   # ~10 min, 2 cores
    python benchmarks/bench_calibrate.py --quick                                          # fewer seeds

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
from _calibrate_bench import cad_model, evaluate, latency, load_rows, markdown, parity_checks, save_rows
from _train_bench import DEFAULT_DATA, environment, write
from pairedge.calibration.api import (
    DEFAULT_METHOD,
    DEFAULT_PERCENTILE,
    DEFAULT_STRENGTH,
    CalibrateOptions,
    calibrate,
)
from pairedge.calibration.collect import Collected, merge, parse_scenes
from pairedge.datasets.sources import parse_seeds
from pairedge.default_model import default_model_dir

CAL_SETS = {"readme": "static:0-3,moving:0-3", "small": "static:0-1,moving:0-1", "default": None}
DEFAULT = {"method": DEFAULT_METHOD, "percentile": DEFAULT_PERCENTILE, "equalize_strength": DEFAULT_STRENGTH}
VARIANTS = {
    "naive": {"method": "minmax", "placement": "all", "equalize": False, "target_agreement": None},
    "all-int8": {**DEFAULT, "target_agreement": None},
    "default": {**DEFAULT},
}
SELECTION = {f"{m}{'' if p is None else f' {p}'} / strength {st}": {"method": m, "percentile": p or 99.999,
             "equalize_strength": st, "target_agreement": None}
             for m, p in (("minmax", None), ("percentile", 99.99), ("percentile", 99.999), ("entropy", None))
             for st in (0.5, 1.0)}  # fmt: skip
TARGETS = {"int8_stage2_agreement": 0.99, "int8_stage1_agreement": 0.99, "int8_mpca_drop_points": 0.5,
           "fp16_agreement": 0.999}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=None, help="model folder (default: the bundled model)")
    p.add_argument("--presets", default="static,moving,noisy", help="presets of the selection and test seeds")
    p.add_argument("--val-seeds", default="6000-6007")
    p.add_argument("--test-seeds", default="4000-4001")
    p.add_argument("--test2-seeds", default="3000-3002")
    p.add_argument("--packs", default="static:4000,moving:4000,noisy:4001")
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--cad", action="store_true", help="also the CAD box-only model (trains one, minutes)")
    p.add_argument("--quick", action="store_true", help="selection 6000-6001, no second test set")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--cache", type=Path, default=None, help="keep the collected rows here for reruns")
    return p.parse_args(argv)


def scenes(model: Path, presets: list[str], seeds: str, frames: int, cache: Path | None = None) -> Collected:
    """Rows of ``presets`` x ``seeds`` through the fp32 pipeline (kept in ``cache`` keyed by model and scenes)."""
    t = time.perf_counter()
    file = None
    if cache is not None:
        from pairedge.modelfolder import sha256_file

        key = "-".join(sha256_file(model / f"stage{s}.onnx")[:12] for s in (1, 2))
        file = cache / f"{key}-{'+'.join(presets)}-{seeds}-{frames}.npz"
        if file.is_file():
            return load_rows(file)
    from pairedge.calibration.collect import collect_scenes

    out = collect_scenes(model, [(p, parse_seeds(seeds)) for p in presets], frames=frames)
    if file is not None:
        save_rows(file, out)
    print(f"  {presets} seeds {seeds}: {len(out.stage1)} / {len(out.stage2)} rows, {time.perf_counter() - t:.0f} s")
    return out


def cal_rows(model: Path, text: str, frames: int, cache: Path | None) -> Collected:
    """Rows of a ``--scenes`` text, one cached part per preset."""
    parts = []
    for preset, seeds in parse_scenes(text):
        parts.append(scenes(model, [preset], "+".join(str(s) for s in seeds).replace("+", ","), frames, cache))
    return merge(parts)


def _summary(e: dict[str, Any]) -> str:
    i = e["int8"]
    return (f"stage 1 {i['stage1']['agreement']:.4f}, stage 2 {i['stage2']['agreement']:.4f}, MPCA drop "
            f"{i['mpca_drop_points']:+.2f}, float nodes {i['float_nodes']}")  # fmt: skip


def selection(model: Path, cal: Collected, val: Collected, work: Path) -> dict[str, Any]:
    """Every candidate default (method x equalization strength, all Gemms int8) scored on the selection seeds."""
    out: dict[str, Any] = {}
    for name, options in SELECTION.items():
        folder = work / ("sel-" + name.replace(" ", "").replace("/", "-"))
        calibrate(model, folder, CalibrateOptions(**options), collected=cal)
        out[name] = evaluate(folder, val)
        print(f"  selection {name}: {_summary(out[name])}")
    return out


def default_model_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from pairedge.calibration.default_set import default_source
    from pairedge.runtime.loading import find_models

    model = (args.model or default_model_dir()).expanduser()
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    sets = {k: v or default_source(find_models(model)) for k, v in CAL_SETS.items()}
    print("collecting rows through the fp32 pipeline")
    cals = {k: cal_rows(model, v, args.frames, args.cache) for k, v in sets.items()}
    val = scenes(model, presets, args.val_seeds, args.frames, args.cache)
    test_sets = {args.test_seeds: args.test_seeds} if args.quick else {args.test_seeds: 0, args.test2_seeds: 0}
    tests = {seeds: merge([scenes(model, [p], seeds, args.frames, args.cache) for p in presets]) for seeds in test_sets}
    report: dict[str, Any] = {"model": str(model), "calibration_sets": sets, "selection_seeds": args.val_seeds,
                              "test_seeds": list(tests), "presets": presets, "frames": args.frames,
                              "default_options": DEFAULT, "packs": args.packs}  # fmt: skip
    report["selection"] = selection(model, cals["readme"], val, work)
    results: dict[str, Any] = {}
    for set_name, cal in cals.items():
        for variant, options in VARIANTS.items():
            name = f"{set_name}/{variant}"
            t = time.perf_counter()
            result = calibrate(model, work / name.replace("/", "-"), CalibrateOptions(**options), collected=cal)
            entry: dict[str, Any] = {
                "folder": str(result.out),
                "seconds": round(time.perf_counter() - t, 1),
                "float_nodes": {k: v.get("float_nodes", {}).get("gemms_in_float", v["excluded_nodes"])
                                for k, v in result.report["stages"].items()},  # fmt: skip
                "calibrate_report_rows": {k: v["held_out"] for k, v in result.report["stages"].items()},
                "test": {seeds: evaluate(result.out, rows) for seeds, rows in tests.items()},
            }
            if variant == "default":
                entry["parity"] = parity_checks(model, result.out, args.packs.split(","), work / "packs")
            results[name] = entry
            for seeds, e in entry["test"].items():
                print(f"  {name} test {seeds}: {_summary(e)}")
    report["results"] = results
    first = results["readme/default"]
    report["latency_ms"] = latency(Path(first["folder"]), next(iter(tests.values())))
    return report


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.quick:
        args.val_seeds = "6000-6001"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp:
        report: dict[str, Any] = {
            "command": "python benchmarks/bench_calibrate.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "targets": TARGETS,
            "default": default_model_part(args, Path(tmp)),
        }
        if args.cad:
            folder = args.data / "cad_choi" / "annotations"
            if folder.is_dir():
                print("CAD box-only model")
                report["cad"] = cad_model(folder, Path(tmp) / "cad")
            else:
                report["cad"] = {"skipped": f"{folder} not found"}
    report["environment"] = environment()
    report["seconds"] = round(time.perf_counter() - t0)
    paths = write("bench_calibrate", report, markdown(report, TARGETS), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)
    json.dumps(report)  # the report is plain JSON


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
