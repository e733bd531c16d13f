"""fp32 against itself on every box source: ``parity pack`` then ``parity check`` of the same model, same
machine.

The drift must be exactly zero: the check replays the pack's clip through the same fp32 pipeline, so any
difference is state the pack failed to carry. Sources: simulator scenes (ground-truth boxes; the simulated
detector, whose boxes the built-in tracker ids and coasts), an elevated camera whose operating point
switches to ``surveillance`` inside the clip and a clip that starts after that switch (``--start``), the box-
shape modes ``off`` / ``ignore``, a ROS 2 log (``pairedge simulate --bag mcap``), and PETS 2009 S2.L1 with its
annotated tracks (``gt.txt``) and the raw ACF detector (``det.txt``: fixed-ratio boxes, box shape ignored
once the monitor decides) at 30 and 60 frames and mid-stream.

For each: the check's verdict, the largest feature drift over every column (units of the model's std), the
largest |p_interact| difference and label disagreements over the replayed pair-frames, what the reference
decided (frames with box shape ignored, gate thresholds), and, for comparison, the drift when the device
decides again on the clip alone (``replay_pack(exact=False)``: what a check did before pack layout v3).

Seeds 4100-4102 are held out: no training, calibration or choice uses them. Writes
``benchmarks/results/bench_parity_determinism.json`` / ``.md``::

    OMP_NUM_THREADS=1 python benchmarks/bench_parity_determinism.py            # about 3 minutes on one core
    python benchmarks/bench_parity_determinism.py --data ../shared/data --frames 30
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.bench.env import environment
from pairedge.apps.evaluation.sources import parse_scene, parse_sources
from pairedge.compare.parity import ParityPack, check_pack, load_pack
from pairedge.compare.parity.build import build_pack
from pairedge.compare.parity.check import reference_config, replay_pack
from pairedge.compare.parity.replay import load_pipeline
from pairedge.core.bundled import default_model_dir
from pairedge.runtime.deployment import Deployment

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Case:
    """One pack: a name, the source (made in ``tmp``), and ``build_pack`` options."""

    name: str
    source: Callable[[Path, int], Any]
    options: dict[str, Any] = field(default_factory=dict)
    frames: int | None = None  # None: --frames
    needs_data: bool = False


def _pets(data: Path, boxes: str) -> Callable[[Path, int], Any]:
    base = data / "pets09_s2l1"
    return lambda tmp, n: parse_sources(
        str(base / "vtest.avi"), detections=base / "mot15" / boxes / f"{boxes}.txt"
    )[0]


def _bag(tmp: Path, n: int) -> Any:
    out = tmp / "sim_bag"
    cmd = [
        sys.executable,
        "-c",
        "from pairedge.apps.cli import main; main()",
        "simulate",
        "--preset",
        "moving",
        "--seed",
        "4101",
        "--frames",
        str(n),
        "--out",
        str(out),
        "--bag",
        "mcap",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return parse_sources(str(out / "log"))[0]


def cases(data: Path) -> list[Case]:
    def scene(text: str, boxes: str) -> Callable[[Path, int], Any]:
        return lambda tmp, n: parse_scene(text, n, boxes)

    return [
        Case("sim static:4100, truth boxes", scene("static:4100", "truth")),
        Case("sim noisy:4100, simulated detector", scene("noisy:4100", "detections")),
        Case("sim surveillance:4102, switch inside the clip", scene("surveillance:4102", "detections")),
        Case(
            "sim surveillance:4102, --start 20 (after the switch)",
            scene("surveillance:4102", "detections"),
            {"start": 20},
            frames=10,
        ),
        Case(
            "sim static:4100 detector, --box-shape off",
            scene("static:4100", "detections"),
            {"box_shape": "off"},
        ),
        Case(
            "sim static:4100 detector, --box-shape ignore",
            scene("static:4100", "detections"),
            {"box_shape": "ignore"},
        ),
        Case("ROS 2 log (simulate moving:4101 --bag mcap)", _bag),
        Case("PETS gt.txt", _pets(data, "gt"), needs_data=True),
        Case("PETS det.txt", _pets(data, "det"), needs_data=True),
        Case("PETS det.txt, 60 frames", _pets(data, "det"), frames=60, needs_data=True),
        Case("PETS det.txt, --start 100", _pets(data, "det"), {"start": 100}, needs_data=True),
        Case("PETS det.txt, --box-shape off", _pets(data, "det"), {"box_shape": "off"}, needs_data=True),
    ]


def rows_of(pk: ParityPack, exact: bool) -> Any:
    flow = pk.reference["flow"]
    name = flow["name"] if flow["name"] != "none" else "auto"
    with load_pipeline(
        Deployment(default_model_dir(), backend="onnxruntime", flow=name),
        config=reference_config(pk.reference),
        flow_preset=flow.get("preset"),
        flow_scale=flow.get("scale"),
    ) as pipe:
        return replay_pack(pk, pipe, exact=exact)


def drift(pk: ParityPack, dev: Any) -> dict[str, Any]:
    """Largest differences of ``dev`` from the pack's rows on the pair-frames both have."""
    from pairedge.compare.parity.check import match_rows

    ri, di = match_rows(pk.rows.keys(), dev.keys())
    ref = pk.rows
    std = np.maximum(np.asarray(pk.identity["norm"]["stage2"]["std"], np.float64), 1e-6)
    z = np.abs(dev.stage2_features[di].astype(np.float64) - ref.stage2_features[ri]) / std
    col = int(z.max(axis=0).argmax()) if z.size else 0
    return {
        "pairs_reference": len(ref),
        "pairs_device": len(dev),
        "pairs_matched": len(ri),
        "stage1_feature_max": float(
            np.abs(dev.stage1_features[di] - ref.stage1_features[ri]).max(initial=0.0)
        ),
        "stage2_feature_max_z": float(z.max(initial=0.0)),
        "worst_column": pk.identity["stage2_feature_names"][col] if z.size and z.max() > 0 else None,
        "p_interact_max": float(np.abs(dev.p_interact[di] - ref.p_interact[ri]).max(initial=0.0)),
        "label_disagreements": int((dev.label[di] != ref.label[ri]).sum()),
    }


def run_case(case: Case, frames: int, tmp: Path) -> dict[str, Any]:
    n = case.frames or frames
    start = int(case.options.get("start", 0))
    source = case.source(tmp, start + n)
    t0 = time.perf_counter()
    build_pack(default_model_dir(), source, tmp / "pack.npz", frames=n, **case.options)
    t1 = time.perf_counter()
    pk = load_pack(tmp / "pack.npz")
    report = check_pack(pk, Deployment(default_model_dir(), backend="onnxruntime"))
    t2 = time.perf_counter()
    columns = report.levels[0].metrics.get("columns", {})
    states = pk.frame_states
    taus = [s.tau_interact for s in states]
    return {
        "case": case.name,
        "source": pk.reference["source"],
        "frames": pk.num_frames,
        "start": start,
        "options": case.options,
        "verdict": "PASS" if report.passed else "FAIL",
        "summary": report.verdict(),
        "check_feature_max_z": max((s["max"] for s in columns.values()), default=0.0),
        "exact": drift(pk, rows_of(pk, exact=True)),
        "decide_again": drift(pk, rows_of(pk, exact=False)),
        "box_shape_ignored_frames": sum(s.box_shape_ignored for s in states),
        "gate_thresholds": sorted(set(taus)),
        "gate_switch_frames": [k for k in range(1, n) if taus[k] != taus[k - 1]],
        "seconds": {"pack": t1 - t0, "check": t2 - t1},
    }


def markdown(results: list[dict[str, Any]], env: dict[str, Any], command: str) -> str:
    lines = [
        "# parity: fp32 against itself on every box source",
        "",
        "`parity pack` then `parity check` of the bundled fp32 model on the same machine. *exact*: the "
        "check's replay (the pack's per-frame decisions and stream state); *decide again*: the device "
        "decides box shape and operating point on the clip alone (before pack layout v3).",
        "",
        f"Command: `{command}`. Machine: {env.get('cpu')}.",
        "",
        "| source | frames | verdict | feature drift max (std) | p_interact max | label diffs | box shape "
        "ignored | gate | decide again: drift max (column), label diffs |",
        "|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        e, d = r["exact"], r["decide_again"]
        gate = ", ".join(f"{t:g}" for t in r["gate_thresholds"]) + (
            f" (switch at {r['gate_switch_frames']})" if r["gate_switch_frames"] else ""
        )
        again = f"{d['stage2_feature_max_z']:.3g} ({d['worst_column'] or '-'}), {d['label_disagreements']}"
        frames = f"{r['start']}-{r['start'] + r['frames'] - 1}" if r["start"] else str(r["frames"])
        lines.append(
            f"| {r['case']} | {frames} | {r['verdict']} | "
            f"{max(r['check_feature_max_z'], e['stage2_feature_max_z']):.3g} | "
            f"{e['p_interact_max']:.3g} | {e['label_disagreements']} | {r['box_shape_ignored_frames']} | "
            f"{gate} | {again} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", type=Path, default=ROOT.parent / "shared" / "data", help="../shared/data (PETS rows)"
    )
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    results = []
    for case in cases(args.data):
        if case.needs_data and not (args.data / "pets09_s2l1").is_dir():
            print(f"skip {case.name}: no PETS data at {args.data}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            r = run_case(case, args.frames, Path(tmp))
        print(
            f"{r['case']}: {r['verdict']}, drift {r['exact']['stage2_feature_max_z']:.3g}, "
            f"decide again {r['decide_again']['stage2_feature_max_z']:.3g}"
        )
        results.append(r)
    env = environment()
    command = "OMP_NUM_THREADS=1 python benchmarks/bench_parity_determinism.py" + (
        f" --frames {args.frames}" if args.frames != 30 else ""
    )
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"command": command, "environment": env, "results": results}
    (args.out / "bench_parity_determinism.json").write_text(json.dumps(payload, indent=2) + "\n")
    (args.out / "bench_parity_determinism.md").write_text(markdown(results, env, command))
    return 0 if all(r["verdict"] == "PASS" and is_exact(r["exact"]) for r in results) else 1


def is_exact(d: dict[str, Any]) -> bool:
    """Every pair-frame replayed, with identical features, probability and label."""
    same_rows = d["pairs_reference"] == d["pairs_device"] == d["pairs_matched"]
    zero = d["stage1_feature_max"] == d["stage2_feature_max_z"] == d["p_interact_max"] == 0
    return same_rows and zero and d["label_disagreements"] == 0


if __name__ == "__main__":
    raise SystemExit(main())
