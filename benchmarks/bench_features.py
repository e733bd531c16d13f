"""Cost and correctness of the two feature specs, and the choice of the ego-motion method.

1. Features per frame at 640 x 480 for 10 and 100 people (45 / 4,950 pairs), for both specs:
   * ``liang2026``: the extractor (flow pooled over each pair's box union with integral images) versus the
     mask-based reference (one boolean union mask per pair); the reference is timed on a subset of pairs
     and extrapolated linearly, and its values are compared with the fast path (max abs difference).
   * ``pairedge``: the extractor with flow at scale 0.5 (per-person pooling with integral images, affine
     ego-motion), the same with per-box slicing instead of integral images, box-only mode, and box-only mode
     of spec v3 (+ the long-horizon / group context of :mod:`pairedge.core.features.context`).
2. Ego-motion: on synthetic flow fields (320 x 240, i.e. scale 0.5 of 640 x 480) with known camera motion
   (static, pan, forward motion, roll + pan), people with their own motion, flow noise and an
   independently moving background object, the RMS error of the ego-compensated person motion for the
   methods ``none``, ``median`` and ``affine``, and their cost.
3. The same on rendered frames: the simulator's ``moving`` preset (lawnmower ego-motion), DIS flow at
   scale 0.5, estimated camera motion versus the simulator's true one at the people's centres.
4. Optional real check (``--data``): DIS flow on the first frames of the PETS 2009 S2.L1 video (static
   camera): the estimated camera motion should be close to zero.

Writes ``benchmarks/results/bench_features.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_features.py                 # about half a minute on 2 cores
    python benchmarks/bench_features.py --data ../shared/data --frames 10
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
W, H = 640, 480


def smooth_flow(rng: np.random.Generator, h: int, w: int, amp: float = 2.0) -> np.ndarray:
    """A smooth random (h, w, 2) float32 flow with magnitudes around ``amp`` pixels."""
    coarse = rng.normal(0, amp, (max(h // 16, 2), max(w // 16, 2), 2)).astype(np.float32)
    return cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)


def people(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 4) float64 person-like boxes inside a 640 x 480 image."""
    h = rng.uniform(60, 200, n)
    w = 0.4 * h
    return np.stack([rng.uniform(0, W - w), rng.uniform(0, H - h), w, h], axis=1)


def per_frame(fn, frames: int) -> dict[str, float]:
    times = []
    for k in range(frames):
        start = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - start)
    return {"median_ms": 1e3 * statistics.median(times), "best_ms": 1e3 * min(times), "frames": frames}


def bench_liang(n: int, frames: int, ref_pairs: int, seed: int) -> dict[str, Any]:
    from pairedge.core.features import frame_pairs, get_spec
    from pairedge.core.features.liang2026 import stage1_features, stage2_features_reference
    from pairedge.core.types import Detections

    rng = np.random.default_rng(seed)
    boxes = people(rng, n)
    flow = smooth_flow(rng, H, W)
    dets = Detections.from_arrays(boxes, np.arange(n))
    ex = get_spec("liang2026").make_extractor()
    fast = per_frame(lambda k: ex.step(dets, k / 30, (W, H), flow, 1.0), frames)
    out = ex.step(dets, 0.0, (W, H), flow, 1.0)
    _, index = frame_pairs(dets)
    m = min(ref_pairs, len(index))
    ba, bb = boxes[index[:m, 0]], boxes[index[:m, 1]]

    def reference(_: int) -> None:
        stage1_features(ba, bb, W, H)
        stage2_features_reference(ba, bb, W, H, flow)

    ref = per_frame(reference, 1)
    ref_full_ms = ref["median_ms"] * len(index) / m
    diff = np.abs(stage2_features_reference(ba, bb, W, H, flow) - out.stage2[:m]).max()
    return {
        "people": n,
        "pairs": len(index),
        "integral_ms": fast["median_ms"],
        "integral_best_ms": fast["best_ms"],
        "reference_ms": ref_full_ms,
        "reference_timed_pairs": m,
        "reference_extrapolated": m < len(index),
        "speedup": ref_full_ms / fast["median_ms"],
        "max_abs_diff_vs_reference": float(diff),
    }


def bench_pairedge(n: int, frames: int, seed: int) -> dict[str, Any]:
    from pairedge.core.features import flowpool, get_spec
    from pairedge.core.features.edge import PairedgeExtractor
    from pairedge.core.types import Detections

    rng = np.random.default_rng(seed)
    boxes0 = people(rng, n)
    vel = rng.normal(0, 2, (n, 2))
    scale = 0.5
    flows = [smooth_flow(rng, int(H * scale), int(W * scale)) for _ in range(4)]
    spec = get_spec("pairedge")

    def run(
        config: dict[str, Any], use_flow: bool, pooling=flowpool.pool_flow, context: bool = False
    ) -> dict[str, float]:
        ex = PairedgeExtractor(spec.make_config(config), pooling=pooling, context=context)

        def one(k: int) -> None:
            b = boxes0.copy()
            b[:, :2] += vel * k
            dets = Detections.from_arrays(b, np.arange(n))
            ex.step(dets, k / 30, (W, H), flows[k % 4] if use_flow and k else None, scale)

        for k in range(3):  # warm the history
            one(k)
        return per_frame(lambda k: one(k + 3), frames)

    timings = {
        "flow_affine": run({"ego_motion": "affine"}, True),
        "flow_median": run({"ego_motion": "median"}, True),
        "flow_affine_slicing": run({"ego_motion": "affine"}, True, flowpool.pool_flow_reference),
        "box_only": run({"motion": "boxes"}, False),
        "box_only_v3": run({"motion": "boxes"}, False, context=True),
    }
    res: dict[str, Any] = {"people": n, "pairs": n * (n - 1) // 2}
    for key, t in timings.items():
        res[f"{key}_ms"] = t["median_ms"]
        res[f"{key}_best_ms"] = t["best_ms"]
    ego = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    a = flowpool.pool_flow(flows[0], boxes0, scale, ego, 1 / 30)
    b = flowpool.pool_flow_reference(flows[0], boxes0, scale, ego, 1 / 30)
    res["pool_max_abs_diff_vs_slicing"] = float(
        max(np.abs(a.velocity - b.velocity).max(), np.abs(a.spread - b.spread).max())
    )
    return res


def camera(kind: str, h: int, w: int) -> np.ndarray:
    """(2, 3) camera map in flow pixels for a scenario."""
    c = np.array([w / 2 + 10, h / 2 - 5])
    if kind == "static":
        return np.array([[1.0, 0, 0], [0, 1.0, 0]])
    if kind == "pan":
        return np.array([[1.0, 0, 6.0], [0, 1.0, -1.0]])
    if kind == "forward":
        s = 1.02
        return np.array([[s, 0, (1 - s) * c[0] + 1.0], [0, s, (1 - s) * c[1]]])
    if kind == "roll_pan":
        a = np.deg2rad(0.5)
        r = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        return np.hstack([r, (c - r @ c + [4.0, 0.0])[:, None]])
    raise ValueError(kind)


def bench_egomotion(trials: int, seed: int) -> dict[str, Any]:
    from pairedge.core.features import egomotion
    from pairedge.core.features.flowpool import pool_flow

    rng = np.random.default_rng(seed)
    scale = 0.5
    h, w = int(H * scale), int(W * scale)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([xs.ravel(), ys.ravel()], axis=1)
    out: dict[str, Any] = {}
    for kind in ("static", "pan", "forward", "roll_pan"):
        cam = camera(kind, h, w)
        errs: dict[str, list[float]] = {m: [] for m in egomotion.METHODS}
        costs: dict[str, list[float]] = {m: [] for m in egomotion.METHODS}
        for _ in range(trials):
            flow = egomotion.displacement(cam, pts).reshape(h, w, 2)
            boxes = people(rng, 10)  # one per 64-pixel column, so no two people overlap
            boxes[:, 3] = np.minimum(boxes[:, 3], 150)
            boxes[:, 2] = 0.4 * boxes[:, 3]
            boxes[:, 0] = np.arange(10) * 64 + rng.uniform(0, 64 - boxes[:, 2])
            boxes[:, 1] = rng.uniform(0, H - boxes[:, 3])
            own = rng.normal(0, 2.0, (10, 2))  # own motion, full-image pixels per frame
            for (x, y, bw, bh), u in zip(boxes * scale, own, strict=True):
                flow[int(y) : int(y + bh), int(x) : int(x + bw)] += u * scale
            sb = boxes * scale
            for _ in range(100):  # a moving car somewhere in the background, not covering people
                ox, oy = rng.integers(0, w - 60), rng.integers(0, h - 40)
                if not (
                    (ox < sb[:, 0] + sb[:, 2])
                    & (sb[:, 0] < ox + 60)
                    & (oy < sb[:, 1] + sb[:, 3])
                    & (sb[:, 1] < oy + 40)
                ).any():
                    flow[oy : oy + 40, ox : ox + 60] += rng.normal(0, 6, 2)
                    break
            flow += rng.normal(0, 0.3, flow.shape)
            flow = flow.astype(np.float32)
            for m in egomotion.METHODS:
                start = time.perf_counter()
                ego = egomotion.estimate(flow, boxes, scale, m)
                costs[m].append(time.perf_counter() - start)
                got = pool_flow(flow, boxes, scale, ego, 1.0, inset=(0.0, 0.0)).velocity * boxes[:, 3:4]
                errs[m].append(float(np.sqrt(((got - own) ** 2).sum(axis=1).mean())))
        out[kind] = {
            m: {"rms_error_px": float(np.mean(errs[m])), "ms": 1e3 * statistics.median(costs[m])}
            for m in egomotion.METHODS
        }
    return out


def bench_pets(data: Path, frames: int) -> dict[str, Any]:
    from pairedge.core.features import egomotion
    from pairedge.core.io.cvml import read_cvml

    video = data / "pets09_s2l1" / "vtest.avi"
    xml = data / "pets09_s2l1" / "PETS2009-S2L1.xml"
    if not video.exists() or not xml.exists():
        return {"skipped": f"{video} or {xml} not found"}
    tracks = read_cvml(xml)
    cap = cv2.VideoCapture(str(video))
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    prev, shifts = None, {m: [] for m in ("median", "affine")}
    for k in range(frames + 1):
        ok, frame = cap.read()
        if not ok:
            break
        gray = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), None, fx=0.5, fy=0.5)
        if prev is not None:
            flow = dis.calc(prev, gray, None)
            boxes = tracks.detections(k).boxes
            corners = np.array([[0, 0], [767, 0], [0, 575], [767, 575]], np.float64)
            for m in shifts:
                ego = egomotion.estimate(flow, boxes, 0.5, m)
                shifts[m].append(float(np.abs(egomotion.displacement(ego, corners)).max()))
        prev = gray
    cap.release()
    if not shifts["median"]:
        return {"skipped": f"could not decode {video}"}
    return {
        "frames": len(shifts["median"]),
        **{f"{m}_max_corner_shift_px": float(np.max(v)) for m, v in shifts.items()},
        **{f"{m}_median_corner_shift_px": float(np.median(v)) for m, v in shifts.items()},
    }


def bench_sim_egomotion(frames: int, seeds: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
    """Estimated vs true camera motion at the people's centres on the simulator's ``moving`` preset."""
    try:
        from pairedge.measure.sim import simulate
    except ImportError as exc:
        return {"skipped": f"pairedge.measure.sim unavailable ({exc})"}
    from pairedge.core.features import egomotion

    errors: dict[str, list[float]] = {m: [] for m in egomotion.METHODS}
    true_shift: list[float] = []
    size = None
    for seed in seeds:
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        prev = None
        for frame in simulate("moving", seed=seed, frames=frames):
            size = frame.image.shape[1::-1]
            gray = cv2.resize(cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY), None, fx=0.5, fy=0.5)
            if prev is not None and len(frame.truth):
                flow = dis.calc(prev, gray, None)
                centres = frame.truth.boxes[:, :2] + frame.truth.boxes[:, 2:] / 2
                true = egomotion.displacement(frame.camera_motion, centres)
                true_shift.append(float(np.hypot(*true.T).mean()))
                for m in egomotion.METHODS:
                    est = egomotion.estimate(flow, frame.detections.boxes, 0.5, m)
                    errors[m].append(float(np.hypot(*(egomotion.displacement(est, centres) - true).T).mean()))
            prev = gray
    return {
        "frames": len(true_shift),
        "image": list(size) if size else None,
        "true_camera_shift_px": float(np.mean(true_shift)),
        **{f"{m}_error_px": float(np.mean(v)) for m, v in errors.items()},
    }


def markdown(res: dict[str, Any]) -> str:
    lines = ["# Feature extraction benchmark", "", f"Machine: {res['machine']}", ""]
    lines += [
        "## liang2026 at 640 x 480 (full-resolution flow)",
        "",
        "| people | pairs | integral images ms/frame | mask reference ms/frame | speed-up | max abs diff |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["liang2026"]:
        note = (
            f" (extrapolated from {r['reference_timed_pairs']} pairs)" if r["reference_extrapolated"] else ""
        )
        lines.append(
            f"| {r['people']} | {r['pairs']} | {r['integral_ms']:.2f} ({r['integral_best_ms']:.2f}) "
            f"| {r['reference_ms']:.0f}{note} | {r['speedup']:.0f}x | {r['max_abs_diff_vs_reference']:.1e} |"
        )
    lines += [
        "",
        "## pairedge at 640 x 480 (flow at scale 0.5)",
        "",
        "| people | pairs | flow, affine ego ms | flow, median ego ms | same with per-box slicing ms "
        "| box-only ms | box-only, spec v3 (+ context) ms | pooling diff vs slicing |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["pairedge"]:
        cells = " | ".join(
            f"{r[k + '_ms']:.2f} ({r[k + '_best_ms']:.2f})"
            for k in ("flow_affine", "flow_median", "flow_affine_slicing", "box_only", "box_only_v3")
        )
        lines.append(f"| {r['people']} | {r['pairs']} | {cells} | {r['pool_max_abs_diff_vs_slicing']:.1e} |")
    lines += [
        "",
        "Times are the median (best) over the timed frames; they exclude computing the flow itself (a flow",
        "backend's cost, see the runtime benchmarks). The machine is shared: medians vary with its load.",
        "",
        f"## Ego-motion methods ({res['ego_trials']} synthetic frames per scenario, 320 x 240 flow)",
        "",
        "RMS error (full-image pixels per frame) of the ego-compensated person motion against the true own",
        "motion; 10 non-overlapping people, flow noise 0.3 px, one independently moving background object",
        "(a car, 120 x 80 pixels, not covering people) that the background estimate must ignore.",
        "",
        "| camera | none | median | affine | median ms | affine ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, r in res["egomotion"].items():
        lines.append(
            f"| {kind} | {r['none']['rms_error_px']:.2f} | {r['median']['rms_error_px']:.2f} "
            f"| {r['affine']['rms_error_px']:.2f} | {r['median']['ms']:.2f} | {r['affine']['ms']:.2f} |"
        )
    simr = res.get("sim_moving")
    if simr:
        lines += ["", "## Simulator `moving` preset (lawnmower camera), DIS flow at scale 0.5", ""]
        if "skipped" in simr:
            lines.append(f"Skipped: {simr['skipped']}")
        else:
            lines.append(
                f"{simr['frames']} frames of {simr['image'][0]} x {simr['image'][1]}; true camera-induced "
                f"motion at the people's centres {simr['true_camera_shift_px']:.2f} px/frame. Mean error of "
                f"the estimate there: none {simr['none_error_px']:.2f}, median "
                f"{simr['median_error_px']:.2f}, affine {simr['affine_error_px']:.2f} px/frame."
            )
    pets = res.get("pets")
    if pets:
        lines += ["", "## PETS 2009 S2.L1 (static camera), DIS flow at scale 0.5", ""]
        if "skipped" in pets:
            lines.append(f"Skipped: {pets['skipped']}")
        else:
            lines.append(
                f"{pets['frames']} frame pairs; largest camera displacement at the image corners: median "
                f"method {pets['median_max_corner_shift_px']:.2f} px (median over frames "
                f"{pets['median_median_corner_shift_px']:.2f}), affine "
                f"{pets['affine_max_corner_shift_px']:.2f} px (median "
                f"{pets['affine_median_corner_shift_px']:.2f})."
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20, help="timed frames per configuration")
    parser.add_argument("--ref-pairs", type=int, default=200, help="pairs timed with the mask reference")
    parser.add_argument("--ego-trials", type=int, default=20)
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    res: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, "
        f"numpy {np.__version__}, OpenCV {cv2.__version__}, 1 OpenCV thread",
        "image": [W, H],
        "liang2026": [bench_liang(n, args.frames, args.ref_pairs, args.seed) for n in (10, 100)],
        "pairedge": [bench_pairedge(n, args.frames, args.seed) for n in (10, 100)],
        "ego_trials": args.ego_trials,
        "egomotion": bench_egomotion(args.ego_trials, args.seed),
        "sim_moving": bench_sim_egomotion(args.frames),
    }
    if args.data.is_dir():
        res["pets"] = bench_pets(args.data, min(args.frames, 30))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_features.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (args.out / "bench_features.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
