"""``pairedge run`` on real video: PETS 2009 S2.L1 (768 x 576, 795 frames) with ground-truth tracks and with
raw detections through the built-in tracker; latency, and per-person flow agreement with the box motion.

1. The run library (:func:`pairedge.runtime.runner.run.run_files`, what ``pairedge run`` calls) with the
   bundled model over the whole video, once with the MOT ground truth ``mot15/gt/gt.txt`` (ids given; 1-based
   frames mapped to video index + 1) and once with the raw ACF detections ``mot15/det/det.txt`` (ids -1: the
   built-in tracker assigns them). Frames completed, per-stage latency, FPS, tracks, drops.
2. Flow agreement, as in the simulator's flow check (``pairedge.measure.sim.flowcheck``): for every
   ground-truth person present in two consecutive frames, the median of the runtime's flow (same backend and
   settings, vectors scaled back to full-resolution pixels) inside the person's previous box, against the
   box-centre
   displacement; over the whole box and over the inner box the ``pairedge`` features pool (15 % of the width
   and 5 % of the height trimmed on each side). The error of "zero flow" (= |displacement|) is the baseline;
   the "gain" is the median flow's component along the displacement divided by the displacement (1 = the
   flow sees the whole box motion). Real boxes are hand-annotated, so part of the error is the annotation's
   own jitter, reported as the median second difference of the ground-truth box centres.

Writes ``benchmarks/results/bench_pets.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_pets.py                        # data in ../shared/data, about a minute
    python benchmarks/bench_pets.py /path/to/pets09_s2l1 --flows dis:fast:0.5,dis:medium:1.0
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from bench_runtime import FlowSetting, flow_label, machine, parse_flows
from pairedge.core.bundled import default_model_dir
from pairedge.core.io.mot import read_mot
from pairedge.measure.sim.flowcheck import summary as error_summary
from pairedge.runtime import PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.memory import tune_allocator
from pairedge.runtime.runner.inputs import FrameSource
from pairedge.runtime.runner.run import RunOptions, RunSummary, run_files

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"
INSET = (0.15, 0.05)


def run_case(video: Path, detections: Path, model: Path, flow: FlowSetting) -> dict[str, Any]:
    """One full ``pairedge run`` over the video; the summary without file paths."""
    with tempfile.TemporaryDirectory() as tmp:
        options = RunOptions(
            deployment=Deployment(model, flow=flow.backend),
            config=PipelineConfig(flow=flow.config),
            video=False,
        )
        summary: RunSummary = run_files(video, detections, tmp, options)
    out = summary.to_dict()
    out.pop("files")
    return out


def box_flow_errors(video: Path, gt: Path, flow: FlowSetting, max_frames: int | None) -> dict[str, Any]:
    """Per person and frame pair: |median flow in the previous box - box-centre displacement| (px)."""
    options = {
        "scale": flow.scale or 0.5,
        **({"preset": flow.preset or "fast"} if flow.backend == "dis" else {}),
    }
    stream = FlowStream(get_flow_backend(flow.backend, **options))
    scale = stream.scale
    truth = read_mot(gt).by_frame()
    errors: dict[str, list[float]] = {"box": [], "inner": [], "displacement": [], "inner_gain": []}
    prev: dict[int, np.ndarray] = {}
    for index, image in FrameSource(video):
        if max_frames is not None and index >= max_frames:
            break
        field = stream.push(image)
        dets = truth.get(index + 1)
        now = (
            {}
            if dets is None
            else dict(zip(dets.track_ids.tolist(), dets.boxes.astype(np.float64), strict=True))
        )
        if field is not None:
            for tid, b1 in now.items():
                b0 = prev.get(tid)
                if b0 is None:
                    continue
                disp = (b1[:2] + b1[2:] / 2) - (b0[:2] + b0[2:] / 2)
                for key, inset in (("box", (0.0, 0.0)), ("inner", INSET)):
                    med = _median_flow(field, b0, scale, inset)
                    if med is not None:
                        errors[key].append(float(np.hypot(*(med - disp))))
                    if key == "inner" and med is not None and np.hypot(*disp) > 1.0:
                        errors["inner_gain"].append(float(med @ disp / (disp @ disp)))  # flow along / |disp|
                errors["displacement"].append(float(np.hypot(*disp)))
        prev = now
    arrays = {k: np.asarray(v) for k, v in errors.items()}
    return {
        "flow": flow_label(flow),
        **{k: error_summary(v) for k, v in arrays.items() if k != "inner_gain"},
        "inner_gain_moving": error_summary(arrays["inner_gain"]),
        "moving_inner": error_summary(arrays["inner"][arrays["displacement"] > 1.0]),
        "displacement_moving": error_summary(arrays["displacement"][arrays["displacement"] > 1.0]),
    }


def annotation_jitter(gt: Path) -> dict[str, float]:
    """|c(k+1) - 2 c(k) + c(k-1)| of the ground-truth box centres (px): how unsteady the annotation is."""
    table = read_mot(gt)
    order = np.lexsort((table.frame, table.track_id))
    ids, frames = table.track_id[order], table.frame[order]
    c = table.boxes[order, :2].astype(np.float64) + table.boxes[order, 2:] / 2
    run = (ids[2:] == ids[:-2]) & (frames[2:] - frames[:-2] == 2)
    second = np.hypot(*(c[2:] - 2 * c[1:-1] + c[:-2])[run].T)
    return error_summary(second)


def _median_flow(
    field: np.ndarray, box: np.ndarray, scale: float, inset: tuple[float, float]
) -> np.ndarray | None:
    """Median flow vector (full-resolution px) inside ``box`` trimmed by ``inset``, None when empty."""
    x, y, w, h = box
    x, y, w, h = x + w * inset[0], y + h * inset[1], w * (1 - 2 * inset[0]), h * (1 - 2 * inset[1])
    fh, fw = field.shape[:2]
    x0, x1 = int(np.clip(x * scale, 0, fw)), int(np.clip((x + w) * scale, 0, fw))
    y0, y1 = int(np.clip(y * scale, 0, fh)), int(np.clip((y + h) * scale, 0, fh))
    patch = field[y0:y1, x0:x1].reshape(-1, 2)
    return np.median(patch, axis=0) / scale if len(patch) else None


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# pairedge run on PETS 2009 S2.L1 (real video)",
        "",
        f"Machine: {res['machine']}",
        "",
        f"Video: {res['video']} ({res['video_frames']} frames announced); model: {res['model']}.",
        "",
    ]
    for flow_name, cases in res["runs"].items():
        lines += [
            f"## Runs with flow {flow_name}",
            "",
            "| detections | frames | people / frame | tracks | interacting pair-frames | validate | track | "
            "flow | "
            "features | stage 1 | stage 2 | total p50 / p99 ms | FPS pipeline / end to end | dropped "
            "detections |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for name, s in cases.items():
            lat = s["latency_ms"]
            stages = " | ".join(
                f"{lat[k]['p50']:.2f}" for k in ("validate", "track", "flow", "features", "stage1", "stage2")
            )
            dropped = ", ".join(f"{v} {k}" for k, v in s["detections_dropped"].items()) or "none"
            lines.append(
                f"| {name} | {s['frames']} | {s['people_per_frame']:.1f} | {s['tracks']} | "
                f"{s['interacting']} | "
                f"{stages} | {lat['total']['p50']:.2f} / {lat['total']['p99']:.2f} | {s['fps']:.0f} / "
                f"{s['wall_fps']:.0f} | {dropped} |"
            )
            if s["error"]:
                lines.append(f"| (error: {s['error']}) |")
        lines.append("")
    lines += [
        "## Flow vs ground-truth box motion (px per frame, full resolution)",
        "",
        "| flow | person-frames | box displacement median | zero-flow error median | whole box: median / p90 "
        "| "
        "inner box: median / p90 | inner box, moving (> 1 px): median / p90 | flow along the motion / "
        "displacement (moving, median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in res["flow_check"]:
        d, b, i, m = f["displacement"], f["box"], f["inner"], f["moving_inner"]
        lines.append(
            f"| {f['flow']} | {d['count']} | {d['median']:.2f} | {d['median']:.2f} | {b['median']:.2f} / "
            f"{b['p90']:.2f} | {i['median']:.2f} / {i['p90']:.2f} | {m['median']:.2f} / {m['p90']:.2f} "
            f"({m['count']}) | "
            f"{f['inner_gain_moving']['median']:.2f} |"
        )
    j = res["annotation_jitter"]
    lines += [
        "",
        f"Annotation jitter (median / p90 second difference of the ground-truth box centres): "
        f"{j['median']:.2f} / {j['p90']:.2f} px.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument("--flows", default="dis:fast:0.5", help="flows of the runs (backend:preset:scale list)")
    ap.add_argument("--check-flows", default="dis:fast:0.5,dis:medium:0.5,dis:medium:1.0,farneback:-:1.0")
    ap.add_argument("--max-frames", type=int, default=None, help="limit the flow check (the runs use all)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    tune_allocator()
    video, mot = args.data / "vtest.avi", args.data / "mot15"
    res: dict[str, Any] = {
        "machine": machine(),
        "video": str(video),
        "model": str(args.model),
        "video_frames": FrameSource(video).frame_count,
        "runs": {},
    }
    for flow in parse_flows(args.flows):
        res["runs"][flow_label(flow)] = {
            "ground truth (gt.txt, ids)": run_case(video, mot / "gt" / "gt.txt", args.model, flow),
            "raw ACF detections (det.txt) + built-in tracker": run_case(
                video, mot / "det" / "det.txt", args.model, flow
            ),
        }
    res["annotation_jitter"] = annotation_jitter(mot / "gt" / "gt.txt")
    res["flow_check"] = [
        box_flow_errors(video, mot / "gt" / "gt.txt", f, args.max_frames)
        for f in parse_flows(args.check_flows)
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_pets.json").write_text(json.dumps(res, indent=2) + "\n")
    text = markdown(res)
    (args.out / "bench_pets.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
