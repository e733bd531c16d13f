"""The acceptance benchmark of issue 23: fp16, PTQ int8 and QAT int8 of the bundled model vs fp32, on held-out
data.

1. Calibrate (training seeds only): ``pairedge calibrate default --out TMP/ptq-readme --scenes
   static:0-3,moving:0-3`` (the README's arguments), ``--scenes static:0-1,moving:0-1`` and no source at all
   (the default set: training scenes of the model's recipe). calibrate's options are its defaults, chosen on
   selection seeds 6000-6011 by ``bench_calibrate.py``.
2. Held-out simulator scenes ``sim:static+moving+noisy:seeds=4000-4001:frames=150`` (seeds no training recipe
   (0-11), no calibration, no test (1000-1007), no link-setting (2000-2003) or calibration-method (2000-3002)
   choice uses) replayed once by the fp32 pipeline; every variant classifies exactly those features:
   fp16, PTQ int8 (both calibrations), and the QAT int8 shipped in the bundled folder when it is there. Every
   figure through :mod:`pairedge.compare.comparator` (:func:`pairedge.apps.bench.accuracy.score_variant`):
   stage-1 gate agreement, stage-2 top-1 agreement on the pair-frames the fp32 gate opens, near-ties counted,
   MPCA drop against the fp32 reference, max logit error; how many Gemm / MatMul nodes compute in int8;
   classifier latency at 100 people; judged against the issue's targets (QAT >= 99.5 % / <= 0.3 points, PTQ >=
   99 % / <= 0.5 points, fp16 >= 99.9 %, near-ties excepted). ``pairedge bench`` on the README-argument folder
   must print the same figures (checked).
3. Parity on held-out packs, ``pairedge parity pack`` + ``pairedge parity check --backend onnxruntime`` for
   every variant (fp32 vs itself included): simulator scenes ``static:4000``, ``moving:4001`` and
   ``noisy:4002`` (30 frames each, simulated detector boxes),
   PETS 2009 S2.L1 frames 0-29 and 400-429 (``--start 400``) with ``gt.txt`` and with the ACF ``det.txt``
   (``--pets``; no step of the default model's recipe, of calibration or of any choice uses PETS).

Writes ``benchmarks/results/bench_precisions.json`` and ``.md``. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_precisions.py      # about 4 minutes on 2 shared cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _precisions import int8_coverage, markdown, parity_summary, run_cli
from pairedge.apps.bench.accuracy import Gate, tau_summary
from pairedge.apps.bench.measure import classifier_latency
from pairedge.apps.bench.run import BenchOptions, reference_rows, run_bench
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.compare.comparator import AgreementTolerances
from pairedge.compare.parity.replay import load_pipeline, model_only_logits
from pairedge.compare.parity.verdict import json_safe
from pairedge.core.bundled import default_model_dir
from pairedge.runtime.deployment import Deployment

HERE = Path(__file__).resolve().parent
HELD_OUT = "sim:static+moving+noisy:seeds=4000-4001:frames=150"
CALIBRATIONS = {
    "ptq-readme": "static:0-3,moving:0-3",
    "ptq-small": "static:0-1,moving:0-1",
    "ptq-default": None,
}
#: Held-out simulator packs (simulated detector boxes): issue 38's static:4000 and moving:4001, and
#: noisy:4002.
PACK_SCENES, PACK_FRAMES = ("static:4000", "moving:4001", "noisy:4002"), 30
#: First frames of the PETS clips (a clip from the start of the video and a later one, with its stream state).
PETS_STARTS = (0, 400)
PETS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pets09_s2l1"
#: The issue's targets (fractions; near-ties excepted). fp16 names no MPCA target: bench's default 0.5 points.
TARGETS = {
    "fp32": AgreementTolerances(1.0, 1.0, 0.0),
    "fp16": AgreementTolerances(0.999, 0.999, 0.005),
    "ptq": AgreementTolerances(0.99, 0.99, 0.005),
    "qat": AgreementTolerances(0.995, 0.995, 0.003),
}


def calibrate(out: Path, scenes: str | None, log: Path) -> dict[str, Any]:
    args = ["calibrate", "default", "--out", str(out), *(["--scenes", scenes] if scenes else [])]
    start = time.time()
    rc = run_cli(args, log)
    if rc != 0:
        raise SystemExit(f"pairedge {' '.join(args)} failed (exit {rc}): {log.read_text()[-2000:]}")
    return {"command": ["pairedge", *args], "seconds": time.time() - start}


def variants(tmp: Path) -> dict[str, tuple[Path, str, str]]:
    """name -> (folder, precision, target kind)."""
    bundled = default_model_dir()
    out = {
        "fp32": (bundled, "fp32", "fp32"),
        "fp16": (tmp / "ptq-readme", "fp16", "fp16"),
        "int8 PTQ (README scenes)": (tmp / "ptq-readme", "int8", "ptq"),
        "int8 PTQ (static:0-1,moving:0-1)": (tmp / "ptq-small", "int8", "ptq"),
        "int8 PTQ (default set, no source)": (tmp / "ptq-default", "int8", "ptq"),
    }
    if (bundled / "stage1.int8.onnx").is_file() and (bundled / "stage2.int8.onnx").is_file():
        out["int8 QAT (bundled)"] = (bundled, "int8", "qat")
    return out


def _files(folder: Path, precision: str) -> list[Path]:
    suffix = "" if precision == "fp32" else f".{precision}"
    return [folder / f"stage{s}{suffix}.onnx" for s in (1, 2)]


def score_all(tmp: Path, repeats: int) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Every variant on the held-out rows: the comparator's figures, int8 coverage and classifier latency;
    the summary of the rows; the rows (fp32 replay)."""
    sources = parse_sources(HELD_OUT)
    reference = reference_rows(default_model_dir(), sources, None, lambda s: print(s, file=sys.stderr))
    ref, scored = reference.rows, reference.scored
    out: dict[str, Any] = {}
    pipes = []
    for name, (folder, precision, kind) in variants(tmp).items():
        pipe = load_pipeline(Deployment(folder, precision=precision, backend="onnxruntime"))
        logits = model_only_logits(pipe, ref.stage1_features, ref.stage2_features)
        t = TARGETS[kind]
        v = reference.score(logits, Gate(t.max_mpca_drop, t.min_top1_agreement, t.min_gate_agreement))
        files = _files(folder, precision)
        out[name] = {
            "files": f"{folder.name}/{{{','.join(f.name for f in files)}}}",
            "precision": precision,
            "target_kind": kind,
            "target": t.__dict__,
            "accuracy": v.accuracy,
            "agreement": v.agreement,
            "mpca_drop": v.mpca_drop,
            "reference_mpca": v.reference_mpca,
            "meets_target": v.passed,
            "problems": list(v.problems),
            "comparison": v.comparison,
            "int8_coverage": (
                {f"stage{s}": int8_coverage(f) for s, f in zip((1, 2), files, strict=True)}
                if precision == "int8"
                else None
            ),
        }
        pipes.append((name, pipe))
    for stage, width, n in (("stage1", ref.stage1_features, 4950), ("stage2", ref.stage2_features, 512)):
        stats = classifier_latency([getattr(p, stage) for _, p in pipes], width, (n,), repeats)
        for (name, _), s in zip(pipes, stats, strict=True):
            out[name]["speed_ms"] = out[name].get("speed_ms", 0.0) + s[n]["p50"]
    for _, p in pipes:
        p.close()
    summary = {
        "sources": reference.sources,
        "pair_frames": len(ref),
        "scored_pairs": int(scored.sum()),
        "tau_interact": tau_summary(reference.tau),
    }
    return out, summary, ref


def costs(tmp: Path, ref: Any) -> dict[str, Any]:
    """Per stage, :func:`pairedge.compare.cost.precision_costs` of the bundled fp32, the README calibration's
    fp16 and int8, and the bundled QAT int8 on the held-out rows: multiply-adds per pair (int8 share), bytes,
    ONNX Runtime CPU p50 ms at 1 / 64 / 512 / 4,950 pairs (one thread, interleaved)."""
    from pairedge.compare.cost import precision_costs

    bundled, readme = default_model_dir(), tmp / "ptq-readme"
    out: dict[str, Any] = {}
    for stage, X in ((1, ref.stage1_features), (2, ref.stage2_features)):
        files = {
            "fp32": bundled / f"stage{stage}.onnx",
            "fp16": readme / f"stage{stage}.fp16.onnx",
            "int8 PTQ (README scenes)": readme / f"stage{stage}.int8.onnx",
        }
        if (bundled / f"stage{stage}.int8.onnx").is_file():
            files["int8 QAT (bundled)"] = bundled / f"stage{stage}.int8.onnx"
        out[f"stage{stage}"] = precision_costs(files, np.ascontiguousarray(X, np.float32))
    return out


def bench_check(tmp: Path, scored_variants: dict[str, Any], repeats: int) -> tuple[bool, str, dict[str, Any]]:
    """``pairedge bench`` (library call) on the README-argument folder: do its rows print the comparator's
    figures of :func:`score_all`?"""
    result = run_bench(
        tmp / "ptq-readme",
        BenchOptions(data=HELD_OUT, repeats=repeats, people=(10, 100)),
        progress=lambda text: print(text, file=sys.stderr),
    )
    rows = {r.precision: r for r in result.rows if r.status == "ok"}
    pairs = {"fp32": "fp32", "fp16": "fp16", "int8": "int8 PTQ (README scenes)"}
    same = all(
        p in rows
        and rows[p].agreement == scored_variants[v]["agreement"]
        and np.isclose(rows[p].mpca_drop, scored_variants[v]["mpca_drop"], atol=1e-12)
        for p, v in pairs.items()
    )
    return same, result.recommendation, result.to_dict()


def parity(tmp: Path, pets: Path | None) -> dict[str, Any]:
    """Packs (simulator scenes, PETS gt.txt, PETS det.txt) and every variant's parity check on each."""
    packs: dict[str, dict[str, Any]] = {
        f"sim-{scene.replace(':', '-')}": {
            "label": f"sim {scene} ({PACK_FRAMES} frames, detector boxes)",
            "args": ["--scene", scene, "--boxes", "detections"],
        }
        for scene in PACK_SCENES
    }
    if pets is not None and (pets / "vtest.avi").is_file():
        for start in PETS_STARTS:
            for kind in ("gt", "det"):
                packs[f"pets-{kind}-{start}"] = {
                    "label": f"PETS S2.L1 {kind}.txt (frames {start}-{start + PACK_FRAMES - 1})",
                    "args": [
                        "--video",
                        str(pets / "vtest.avi"),
                        "--detections",
                        str(pets / "mot15" / kind / f"{kind}.txt"),
                        *(["--start", str(start)] if start else []),
                    ],
                }
    checks: dict[str, dict[str, Any]] = {}
    for key, p in packs.items():
        pack = tmp / f"{key}.npz"
        p["command"] = [
            "pairedge",
            "parity",
            "pack",
            "default",
            "--out",
            str(pack),
            "--frames",
            str(PACK_FRAMES),
            *p["args"],
        ]
        rc = run_cli(p["command"][1:], tmp / f"pack-{key}.log")
        checks[key] = {}
        for name, (folder, precision, _) in variants(tmp).items():
            js = tmp / f"parity-{key}-{len(checks[key])}.json"
            if rc != 0:
                checks[key][name] = {"verdict": "ERROR", "summary": f"pack failed (exit {rc})"}
                continue
            code = run_cli(
                [
                    "parity",
                    "check",
                    str(pack),
                    str(folder),
                    "--precision",
                    precision,
                    "--backend",
                    "onnxruntime",
                    "--json",
                    str(js),
                ],
                js.with_suffix(".log"),
            )
            checks[key][name] = parity_summary(js, code)
            print(f"parity {key} {name}: {checks[key][name]['verdict']}", file=sys.stderr)
    return {"packs": packs, "checks": checks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pets", type=Path, default=PETS, help="the pets09_s2l1 folder (skipped when absent)")
    ap.add_argument("--repeats", type=int, default=50, help="timed classifier calls per variant")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cals = {k: calibrate(tmp / k, scenes, tmp / f"{k}.log") for k, scenes in CALIBRATIONS.items()}
        scored, reference, rows = score_all(tmp, args.repeats)
        same, recommendation, bench = bench_check(tmp, scored, args.repeats)
        cost = costs(tmp, rows)
        par = parity(tmp, args.pets if args.pets.is_dir() else None)
    res = {
        "tmp": tmp_name,
        "data": HELD_OUT,
        "reference": reference,
        "variants": scored,
        "calibrations": cals,
        "bench_matches": same,
        "bench_recommendation": recommendation,
        "bench": bench,
        "parity": par,
        "cost": cost,
        "seconds": time.time() - start,
        "machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_safe(res), indent=2).replace(tmp_name, "TMP")
    (args.out / "bench_precisions.json").write_text(text + "\n")
    (args.out / "bench_precisions.md").write_text(markdown(res))
    for name, v in scored.items():
        print(
            f"{name}: gate {v['agreement']['gate']:.4f} top-1 {v['agreement']['top1']:.4f} "
            f"MPCA drop {v['mpca_drop'] * 100:+.2f} -> {'meets' if v['meets_target'] else 'MISSES'} its "
            "target"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
