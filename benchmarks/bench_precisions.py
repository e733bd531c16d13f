"""fp32 / fp16 / int8 of the bundled model on ONNX Runtime CPU: `pairedge bench` plus parity checks.

1. Calibrate (unless ``--model`` already holds ``stage{1,2}.{fp16,int8}.onnx``):
   ``pairedge calibrate sdk/models/default --out TMP --scenes static:0-3,moving:0-3,noisy:0-3`` — seeds the
   default model was trained on (0-11), never the held-out ones below.
2. ``pairedge bench`` (library call :func:`pairedge.bench.run.run_bench`) on held-out simulator scenes
   ``sim:static+moving+noisy:seeds=4000-4001:frames=150`` (seeds that no training recipe, no calibration and no
   choice of calibrate's default method used — bench_calibrate chose it on 2000-2001):
   MPCA / macro-F1 / agreement per precision, latency at 1 / 64 / 512 / 4,950 pairs, pipeline FPS at 10 / 100
   people, the recommendation.
3. ``pairedge parity pack`` on held-out scene ``noisy:4002`` (30 frames) and ``pairedge parity check`` of each
   precision with the default tolerances: the verdict and the first failing level.

Writes ``benchmarks/results/bench_precisions.json`` and ``.md``. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_precisions.py            # ~5 minutes on 2 cores
    python benchmarks/bench_precisions.py --model /path/calibrated --data sim:static:seeds=4000:frames=60
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pairedge.bench.report import markdown as bench_markdown
from pairedge.bench.run import BenchOptions, run_bench
from pairedge.default_model import default_model_dir
from pairedge.evaluation.sources import parse_scene
from pairedge.runtime.parity import CheckOptions, check_pack
from pairedge.runtime.parity.build import build_pack

HERE = Path(__file__).resolve().parent
CAL_SCENES = "static:0-3,moving:0-3,noisy:0-3"
HELD_OUT = "sim:static+moving+noisy:seeds=4000-4001:frames=150"
PACK_SCENE = "noisy:4002"


def calibrate(out: Path, scenes: str) -> list[str]:
    cmd = ["pairedge", "calibrate", str(default_model_dir()), "--out", str(out), "--scenes", scenes]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return cmd


def parity(model: Path, tmp: Path) -> dict[str, Any]:
    pack = tmp / "pack.npz"
    build_pack(default_model_dir(), parse_scene(PACK_SCENE, 30, "detections"), pack, frames=30)
    out: dict[str, Any] = {"pack_scene": PACK_SCENE, "frames": 30, "boxes": "detections", "checks": {}}
    for precision in ("fp32", "fp16", "int8"):
        report = check_pack(pack, model, CheckOptions(backend="onnxruntime", precision=precision))
        levels = {lv.name: {"status": lv.status, "problems": list(lv.problems), "metrics": lv.metrics} for lv in report.levels}
        out["checks"][precision] = {"verdict": report.verdict(), "passed": report.passed, "levels": levels}
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [bench_markdown_from(res), "## Parity checks (pairedge parity check, default tolerances)", "",
             f"Pack: held-out scene `{res['parity']['pack_scene']}`, {res['parity']['frames']} frames, simulated detector boxes.", "",
             "| precision | verdict | stage-2 logit max / p99 | gate agreement | top-1 agreement | MPCA delta |",
             "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for p, chk in res["parity"]["checks"].items():
        lv = chk["levels"]
        lg, lb, tk = lv["logits"]["metrics"], lv["labels"]["metrics"], lv["task"]["metrics"]
        s2 = lg.get("stage2", {})
        delta = tk.get("delta", {}).get("mpca")
        lines.append(f"| {p} | {chk['verdict'].replace('|', '/')} | {s2.get('max', float('nan')):.3g} / "
                     f"{s2.get('p99', float('nan')):.3g} | {lb.get('gate_agreement', float('nan')):.4f} | "
                     f"{lb.get('top1_agreement', float('nan')):.4f} | {'-' if delta is None else f'{delta:+.4f}'} |")  # fmt: skip
    lines += ["", f"Calibration: `{' '.join(res['calibrate_command']) if res['calibrate_command'] else 'given --model'}`",
              f"Total wall time: {res['seconds']:.0f} s.", ""]  # fmt: skip
    return "\n".join(lines)


def bench_markdown_from(res: dict[str, Any]) -> str:
    return res["bench_markdown"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="an already calibrated model folder (default: calibrate now)")
    ap.add_argument("--scenes", default=CAL_SCENES, help="calibration scenes (training seeds)")
    ap.add_argument("--data", default=HELD_OUT, help="held-out sources for the accuracy columns")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        model, cmd = args.model, None
        if model is None:
            model = Path(tmp) / "calibrated"
            cmd = calibrate(model, args.scenes)
            print(f"calibrated in {time.time() - start:.0f} s", file=sys.stderr)
        result = run_bench(model, BenchOptions(data=args.data, repeats=args.repeats),
                           progress=lambda text: print(text, file=sys.stderr))  # fmt: skip
        par = parity(model, Path(tmp))
    res = {"bench": result.to_dict(), "bench_markdown": bench_markdown(result), "parity": par,
           "calibrate_command": cmd, "seconds": time.time() - start}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_precisions.json").write_text(json.dumps({k: v for k, v in res.items() if k != "bench_markdown"}, indent=2) + "\n")
    (args.out / "bench_precisions.md").write_text(markdown(res))
    print(result.recommendation)
    for p, chk in par["checks"].items():
        print(f"parity {p}: {chk['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
