"""Camera height from the boxes (``pairedge.runtime.viewpoint``) and the operating point ``auto`` picks.

For every simulator preset, validation scenes (seeds 2000-2007, never used for training or held-out scoring;
the bound of 1.3 body heights was set from geometry — a camera above 2.3 m looks down on people — before
this ran) are streamed through :class:`~pairedge.runtime.viewpoint.ElevationEstimator` with the simulated
detector's boxes; the estimate after ``--frames`` frames is compared with the true camera height and the
bound. PETS 2009 S2.L1 (ground-truth tracks and raw detections) is the real-camera check. Writes
``benchmarks/results/bench_camera_height.json`` / ``.md``::

    python benchmarks/bench_camera_height.py            # about 1-2 minutes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _train_bench import DEFAULT_DATA, RESULTS, write
from pairedge.measure.sim import get_preset, simulate
from pairedge.measure.sim.config import PERSON_HEIGHT_M
from pairedge.runtime.runner.inputs import read_detections
from pairedge.runtime.viewpoint import ElevationEstimator

BOUND = 1.3  # the bundled model's surveillance point: min_camera_height (body heights)
PRESETS = ("static", "moving", "noisy", "crowd", "surveillance")


def sim_case(preset: str, seed: int, frames: int) -> dict[str, Any]:
    est = ElevationEstimator()
    for frame in simulate(preset, seed=seed, frames=frames):
        if len(frame.detections):
            est.update(frame.detections.boxes, (frame.image.shape[1], frame.image.shape[0]))
    got = est.estimate()
    true = get_preset(preset, seed).camera.height_m / PERSON_HEIGHT_M
    return {
        "seed": seed,
        "true": true,
        "estimate": got.body_heights if got.known else None,
        "boxes": got.boxes,
    }


def pets_case(path: Path, size: tuple[int, int] = (768, 576)) -> dict[str, Any]:
    dets, est = read_detections(path), ElevationEstimator()
    first = None
    for index in range(795):
        d = dets.get(index)
        if d is not None and len(d):
            est.update(d.boxes, size)
        got = est.estimate()
        if first is None and got.known and got.body_heights >= BOUND:
            first = index
    got = est.estimate()
    return {
        "estimate": got.body_heights if got.known else None,
        "boxes": got.boxes,
        "first_frame_above": first,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="2000-2007")
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.seeds.split("-"))
    res: dict[str, Any] = {
        "command": "python benchmarks/bench_camera_height.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "bound": BOUND,
        "frames": args.frames,
        "presets": {},
        "pets": {},
    }
    for preset in PRESETS:
        rows = [sim_case(preset, s, args.frames) for s in range(lo, hi + 1)]
        est = np.array([np.nan if r["estimate"] is None else r["estimate"] for r in rows])
        true = np.array([r["true"] for r in rows])
        res["presets"][preset] = {
            "rows": rows,
            "true_above": int((true >= BOUND).sum()),
            "picked_elevated": int((est >= BOUND).sum()),
            "correct": int(((est >= BOUND) == (true >= BOUND)).sum()),
            "median_ratio": float(np.nanmedian(est / true)) if np.isfinite(est).any() else float("nan"),
        }
        print(preset, res["presets"][preset]["picked_elevated"], "of", len(rows), flush=True)
    pets = args.data / "pets09_s2l1" / "mot15"
    for key in ("gt", "det"):
        if (pets / key / f"{key}.txt").is_file():
            res["pets"][key] = pets_case(pets / key / f"{key}.txt")
    lines = [
        "# Camera height from boxes and the operating point `auto` picks",
        "",
        f"`{res['command']}` — estimate after {args.frames} frames of the simulated detector's boxes, "
        f"validation seeds {args.seeds}; `auto` picks the `surveillance` point at >= {BOUND} body heights.",
        "",
        "| preset | scenes | true camera height (body heights) | estimate | picked `surveillance` | right "
        "side of the bound | estimate / true (median) |",
        "|---|---:|---|---|---:|---:|---:|",
    ]
    for preset, p in res["presets"].items():
        t = [r["true"] for r in p["rows"]]
        e = [r["estimate"] for r in p["rows"] if r["estimate"] is not None]  # none yet: too few boxes
        span = f"{min(e):.2f}-{max(e):.2f}" if e else "none"
        lines.append(
            f"| {preset} | {len(p['rows'])} | {min(t):.2f}-{max(t):.2f} | {span} | "
            f"{p['picked_elevated']} | {p['correct']} / {len(p['rows'])} | {p['median_ratio']:.2f} |"
        )
    for key, p in res["pets"].items():
        est = "none" if p["estimate"] is None else f"{p['estimate']:.2f}"
        lines.append(
            f"\nPETS 2009 S2.L1 ({key}.txt, the real-camera check): estimate {est} body "
            f"heights from {p['boxes']} boxes; above the bound from frame {p['first_frame_above']}."
        )
    print("wrote", *write("bench_camera_height", res, "\n".join(lines) + "\n", args.out))


if __name__ == "__main__":
    main()
