"""Stage 2's hidden units bounded at the source: which percentile, what it does to fp32, int8 and parity.

The bundled stage 2 is the shipped relation network with every hidden unit clipped at the ``unit_bound``
percentile of its own outputs on the pairs stage 2 sees in the training scenes and rewritten exactly as a
model with ``activation_bound=1`` (:mod:`pairedge.apps.recipes.bound_step`); its int8 file is the QAT
recipe's (:data:`pairedge.core.bundled.QAT_RECIPE`: the per-layer sensitivity sweep on the validation
sequences, at most 10 % of the multiply-adds float, then quantization-aware fine-tuning). This benchmark:

1. **chooses the percentile on the validation scenes** (seeds 2000-2003, every preset): for every candidate,
   from the unbounded stage 2 (the file before the step, ``--unbounded``), the bounded fp32 and its QAT int8
   exactly as the recipe makes them (ONNX files, ONNX Runtime's optimised CPU session): the fp32 mean MPCA
   change against the unbounded file and the int8 top-1 agreement with its own fp32 on the pairs the fp32
   gate opens. Rule: the highest agreement among the candidates whose fp32 validation mean MPCA is within
   :data:`MAX_MPCA_DROP` of the unbounded file's; the recipe's ``unit_bound`` must be that candidate;
2. **reports on held-out rows only**: int8 agreement and logit error on seeds 4000-4001, fp32 accuracy / MPCA
   per preset on the recipe's test seeds beside the unbounded file's, for every candidate (information: the
   choice is step 1's);
3. **parity of the shipped folder** on issue 38's held-out packs (``static:4000``, ``moving:4001``, PETS
   ``gt.txt`` from frames 0 and 400, PETS ``det.txt``; 150 frames): ``parity check --precision int8`` of the
   bundled QAT files, and of a copy calibrated by ``pairedge calibrate --scenes static:0-1,moving:0-1``
   (post-training int8) with its fp16 files (``--precision fp16``).

Writes ``benchmarks/results/bench_unit_bound.json`` and ``.md``. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_unit_bound.py        # about 40 minutes on one core
"""

from __future__ import annotations

import argparse
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _precisions import run_cli
from _train_bench import write
from bench_bounded_stage2 import PACKS, PRESETS
from bench_bounded_stage2 import figures as stage2_figures
from bench_precisions import PETS
from bench_qat import HELD_OUT, PACK_FRAMES, VALIDATION, parity
from pairedge.calibration.infer import logits, session
from pairedge.compare.comparator import DecisionRule
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.export.onnx_export import export_model
from pairedge.export.qat import config_of, export_int8, import_fp32, stage_info
from pairedge.export.qat.build import stage_rows
from pairedge.export.qat.data import recipe_rows, scene_rows
from pairedge.export.qat.sensitivity import float_sweep
from pairedge.export.qat.train import finetune
from pairedge.export.qat.unit_bound import bound_model

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CANDIDATES = (99.9, 99.5, 99.0, 98.0)
#: Largest drop of the fp32 validation mean MPCA a bound may cost (fraction: 0.25 point).
MAX_MPCA_DROP = 0.0025
#: The last commit whose bundled stage 2 is the unbounded file the step started from.
UNBOUNDED_COMMIT = "5d4e028"
#: ``pairedge calibrate``'s calibration set of the issue's acceptance.
CALIBRATION_SCENES = "static:0-1,moving:0-1"


def unbounded_file(given: Path | None, tmp: Path) -> Path:
    """The unbounded stage-2 fp32 file: ``given``, else the bundled file of :data:`UNBOUNDED_COMMIT`."""
    if given is not None:
        return given
    out = tmp / "stage2.unbounded.onnx"
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{UNBOUNDED_COMMIT}:sdk/models/default/stage2.onnx"],
        capture_output=True,
        check=False,
    )
    if blob.returncode != 0:
        raise SystemExit(
            f"error: --unbounded not given and git cannot show {UNBOUNDED_COMMIT}'s stage2.onnx "
            "(not a clone with history); pass the unbounded stage-2 file"
        )
    out.write_bytes(blob.stdout)
    return out


def rows_of(cache: Path | None) -> tuple[dict[str, Any], Any]:
    """The validation, held-out and test row sets and the recipe's training rows (from ``cache`` when it
    exists; written there otherwise)."""
    if cache is not None and cache.is_file():
        with cache.open("rb") as f:
            return pickle.load(f)  # noqa: S301 - a cache this script wrote
    sets = {
        "validation": scene_rows(RECIPE, [VALIDATION]),
        "held_out": scene_rows(RECIPE, [HELD_OUT]),
        "test": recipe_rows(RECIPE, "test"),
    }
    train = recipe_rows(RECIPE, "train")
    if cache is not None:
        with cache.open("wb") as f:
            pickle.dump((sets, train), f)
    return sets, train


def candidate(
    unbounded: Path, pct: float | None, X_train: np.ndarray, X_val: np.ndarray, tmp: Path, tau: float
) -> dict[str, Any]:
    """The bounded fp32 file (``pct`` None: the unbounded one) and its recipe QAT int8 file."""
    t = time.time()
    tag = "unbounded" if pct is None else f"p{pct:g}"
    fp32 = tmp / f"stage2-{tag}.onnx"
    if pct is None:
        shutil.copy2(unbounded, fp32)
        model, _ = import_fp32(fp32)
        record: dict[str, Any] = {}
    else:
        model, meta, record = bound_model(unbounded, pct, X_train)
        export_model(model, meta, fp32, check_inputs=X_train[:: max(1, len(X_train) // 4096)])
    config = config_of(QAT_RECIPE, "stage2")
    if pct is None:
        config = replace(config, hidden_strength=0.5)  # the unbounded file's recipe: half-way equalisation
    sweep = float_sweep(model, 2, X_train, X_val, config, tau)
    q = finetune(model, 2, X_train, X_val, replace(config, float_layers=sweep.float_layers), tau)
    int8 = tmp / f"stage2-{tag}.int8.onnx"
    info = stage_info(QAT_RECIPE, "stage2", q, sweep.to_dict())
    export_int8(fp32, q, int8, info, X_val[:: max(1, len(X_val) // 4096)])
    return {
        "fp32": fp32,
        "int8": int8,
        "bound": {k: v for k, v in record.items() if k != "bounds"},
        "sweep": sweep.to_dict(),
        "qat_best_epoch": q.best_epoch,
        "seconds": time.time() - t,
    }


def figures(run: dict[str, Any], sets: dict[str, Any], s1: dict[str, np.ndarray], rule: DecisionRule) -> dict:
    """bench_bounded_stage2's figures of one run's (fp32, int8) files plus the mean MPCA per row set."""
    out = stage2_figures(run["fp32"], run["int8"], sets, s1, rule)
    out["mean_mpca"] = {k: float(np.mean([v["mpca"] for v in q.values()])) for k, q in out["quality"].items()}
    return out


def choose(runs: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    """Step 1's rule: (the chosen candidate, the candidates within the MPCA bound)."""
    base = runs["unbounded"]["mean_mpca"]["validation"]
    within = [
        k
        for k, r in runs.items()
        if k != "unbounded" and base - r["mean_mpca"]["validation"] <= MAX_MPCA_DROP
    ]
    if not within:
        return "unbounded", []
    return max(within, key=lambda k: runs[k]["validation"]["top1_gated"]), within


def calibrated_copy(folder: Path, tmp: Path) -> tuple[Path, int]:
    """A new folder: the shipped fp32 files calibrated by ``pairedge calibrate --scenes --out`` (PTQ int8 and
    fp16), and calibrate's exit code."""
    out = tmp / "calibrated"
    args = ["calibrate", str(folder), "--out", str(out), "--scenes", CALIBRATION_SCENES]
    rc = run_cli(args, tmp / "cal.log")
    return out, rc


def _pct(v: float) -> str:
    return f"{100 * v:.2f} %"


def markdown(res: dict[str, Any]) -> str:
    runs = res["runs"]
    lines = [
        "# Stage 2's hidden units bounded at the source: the percentile, fp32, int8 and parity",
        "",
        f"Command: `{res['command']}` ({res['seconds']:.0f} s). Each candidate: the unbounded stage 2 "
        f"(`{res['unbounded']}`) with every hidden unit clipped at that percentile of its outputs on the QAT "
        "step's training rows and rewritten as `activation_bound` 1, then the QAT recipe (sensitivity sweep, "
        "fine-tuning), both written as ONNX and run on ONNX Runtime's optimised CPU session. Validation: "
        "seeds 2000-2003 (every preset), where the percentile is chosen; held out: seeds 4000-4001 (int8) "
        "and the recipe's test seeds (fp32), never used for a choice.",
        "",
        f"Rule: the highest validation int8 agreement (gated) among the candidates whose fp32 validation "
        f"mean MPCA is within {100 * MAX_MPCA_DROP:g} point of the unbounded file's. Within: "
        f"{', '.join(res['within']) or 'none'}. Chosen: **{res['chosen']}**; the recipe's `unit_bound` "
        f"({RECIPE['stage2']['unit_bound']:g}) is the chosen one: "
        f"**{'yes' if res['recipe_is_chosen'] else 'NO'}**.",
        "",
        "## int8 against its own fp32 (stage 2) and the layers kept float",
        "",
        "| stage 2 | float layers (share of MACs) | QAT epoch | validation top-1 gated / together | "
        "validation logit p99 / max | held-out top-1 gated / together | held-out logit p99 / max |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        v, h, sw = r["validation"], r["held_out"], r["sweep"]
        layers = ", ".join(sw["float_layers"]) or "none"
        lines.append(
            f"| {name} | {layers} ({100 * sw['float_mac_share']:.1f} %) | {r['qat_best_epoch']} | "
            f"{_pct(v['top1_gated'])} / {_pct(v['top1_together'])} | "
            f"{v['logit_p99']:.3f} / {v['logit_max']:.2f} | "
            f"{_pct(h['top1_gated'])} / {_pct(h['top1_together'])} | "
            f"{h['logit_p99']:.3f} / {h['logit_max']:.2f} |"
        )
    for key, title in (("validation", "validation scenes"), ("test", "the recipe's test seeds (held out)")):
        lines += ["", f"## fp32 accuracy / MPCA on {title}", ""]
        lines += [
            "| stage 2 | " + " | ".join(PRESETS) + " | mean MPCA |",
            "|---|" + "---:|" * (len(PRESETS) + 1),
        ]
        for name, r in runs.items():
            q = r["quality"][key]
            cells = [f"{q[p]['accuracy']:.3f} / {q[p]['mpca']:.3f}" if p in q else "-" for p in PRESETS]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['mean_mpca'][key]:.4f} |")
    lines += [
        "",
        f"## parity check on held-out packs ({PACK_FRAMES} frames, default tolerances)",
        "",
        "| files | pack | precision | verdict | first failure | stage-1 / stage-2 logit max | "
        "gate / top-1 agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for files, packs in res["parity"].items():
        for pack, by_precision in packs.items():
            for precision, p in by_precision.items():
                if p["verdict"] == "ERROR" or p.get("stage1_logit_max") is None:
                    lines.append(f"| {files} | {pack} | {precision} | {p['verdict']} | - | - | - |")
                    continue
                lines.append(
                    f"| {files} | {pack} | {precision} | {p['verdict']} | {p['first_failure'] or '-'} | "
                    f"{p['stage1_logit_max']:.3f} / {p['stage2_logit_max']:.3f} | "
                    f"{_pct(p['gate_agreement'])} / {_pct(p['top1_agreement'])} |"
                )
    lines += ["", f"Environment: {res['environment']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=default_model_dir(), help="the shipped model folder")
    ap.add_argument(
        "--unbounded", type=Path, help=f"the unbounded stage2.onnx (default: {UNBOUNDED_COMMIT}'s)"
    )
    ap.add_argument("--rows-cache", type=Path, help="a pickle of the rendered rows (read, or written)")
    ap.add_argument("--skip-parity", action="store_true", help="only the percentile and the int8 figures")
    ap.add_argument("--out", type=Path, default=HERE / "results", help="where the results go")
    args = ap.parse_args(argv)
    t0 = time.time()
    folder = args.model
    for name in ("stage1.onnx", "stage1.int8.onnx", "stage2.onnx", "stage2.int8.onnx", "recipe.json"):
        if not (folder / name).is_file():
            raise SystemExit(f"error: --model {folder}: expected a model folder with {name}")
    with tempfile.TemporaryDirectory(prefix="bench-unit-bound-") as tmp_name:
        tmp = Path(tmp_name)
        unbounded = unbounded_file(args.unbounded, tmp)
        s1_model, meta1 = import_fp32(folder / "stage1.onnx")
        _, meta2 = import_fp32(unbounded)
        tau = float(meta1.thresholds.get("p_interact", 0.5))
        rule = DecisionRule(tau=tau)
        sets, train = rows_of(args.rows_cache)
        s1_session = session(folder / "stage1.onnx")
        s1 = {k: logits(s1_session, sets[k].stage1.X) for k in ("validation", "held_out")}
        gate_floor = config_of(QAT_RECIPE, "stage2").gate_floor
        X_train, X_val = stage_rows(
            train, {"stage1": s1_model}, {"stage1": meta1, "stage2": meta2}, gate_floor
        )["stage2"]
        runs: dict[str, dict[str, Any]] = {}
        for pct in (None, *CANDIDATES):
            run = candidate(unbounded, pct, X_train, X_val, tmp, tau)
            name = "unbounded" if pct is None else f"{pct:g}"
            runs[name] = {
                **{k: v for k, v in run.items() if k not in ("fp32", "int8")},
                **figures(run, sets, s1, rule),
            }
            print(
                name, runs[name]["validation"]["top1_gated"], runs[name]["held_out"]["top1_gated"], flush=True
            )
        chosen, within = choose(runs)
        res: dict[str, Any] = {
            "command": "OMP_NUM_THREADS=1 python benchmarks/bench_unit_bound.py",
            "unbounded": str(args.unbounded or f"git {UNBOUNDED_COMMIT}:sdk/models/default/stage2.onnx"),
            "candidates": list(CANDIDATES),
            "runs": runs,
            "chosen": chosen,
            "within": within,
            "recipe_is_chosen": chosen == f"{RECIPE['stage2']['unit_bound']:g}",
            "parity": {},
        }
        if not args.skip_parity:
            packs = {k: a for k, a in PACKS.items() if "--video" not in a or (PETS / "vtest.avi").is_file()}
            for sub in ("qat", "ptq"):
                (tmp / sub).mkdir()
            res["parity"]["bundled (QAT int8)"] = parity(folder, tmp / "qat", packs, ("int8",))
            calibrated, rc = calibrated_copy(folder, tmp)
            res["calibrate_exit_code"] = rc
            name = f"calibrate --scenes {CALIBRATION_SCENES}"
            if rc != 0:  # never parity of files calibrate did not write
                error = {"verdict": "ERROR", "summary": (tmp / "cal.log").read_text()[-500:]}
                res["parity"][name] = {pack: {"int8": error, "fp16": error} for pack in packs}
            else:
                res["parity"][name] = parity(calibrated, tmp / "ptq", packs, ("int8", "fp16"))
    for packs in res["parity"].values():  # one shape: pack -> precision -> summary
        for pack, got in packs.items():
            if "verdict" in got:
                packs[pack] = {"int8": got}
    res["seconds"] = time.time() - t0
    res["environment"] = f"Python {sys.version.split()[0]}, numpy {np.__version__}"
    text = markdown(res)
    write("bench_unit_bound", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
