"""From a camera with a real detector to interactions: PETS 2009 S2.L1 end to end, per detector and tracker.

For each box source (``bundled``: the bundled YOLOX-Nano, no detection file; ``hog``: OpenCV's HOG,
``--detector hog``; ``det``: PETS's ACF detections ``mot15/det/det.txt``; ``gt``: the ground-truth tracks
``mot15/gt/gt.txt``, ids given) and tracker (``iou``: built in; ``bytetrack`` / ``botsort``: Roboflow's
``trackers``, its defaults), this runs exactly what ``pairedge run vtest.avi ...`` runs
(:func:`pairedge.runtime.runner.run.run_files`, the bundled classifier model) and measures:

* the detector alone: decode + detect every frame on one thread, ms per frame and frames per second;
* the whole pipeline, end to end (decode, detect, track, flow, features, classifiers, results written), frames
  per second on one thread (``overlap`` off) and on two (the detector of the next frame on a second thread,
  :mod:`pairedge.runtime.prefetch`); ``--threads 1,2``; OpenCV on one thread, ONNX Runtime one intra-op
  thread, so "two" means the two threads of the overlap and nothing more;
* tracking against ``gt.txt``: MOTA, IDF1, HOTA, ID switches
  (:func:`pairedge.measure.metrics.tracking.tracking_metrics`, every reported person, coasted ones included;
  cross-checked with py-motmetrics where installed);
* pairs against the pairs of the ``gt.txt`` run (the same pipeline on the true tracks): pair precision,
  recall, F1 and the share of correct links whose label (walking / standing together) matches, with the
  detector's people matched to the true ones first (``pairedge score -p pairwise --pred results.jsonl --gold
  <gt run>/results.jsonl --match-boxes gt.txt --tau 0``, the same code in process); and, for reference,
  against the ground-plane "together" truth of ``bench_real_video.py``.

Every figure is given for the first half of the video (frames 0-397: the built-in tracker's settings were
chosen on it, with simulator validation scenes), the second half (398-794: held out) and the whole. Writes
``benchmarks/results/bench_camera.json`` / ``.md``::

    python benchmarks/bench_camera.py [/path/to/pets09_s2l1] [--sources bundled,hog,det,gt]
        [--trackers iou,bytetrack,botsort] [--threads 1,2] [--frames N] [--out DIR] [--work DIR]

About 1 minute a run with the bundled detector, 3 with HOG.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _matching import match_to_truth
from _train_bench import write
from bench_real_video import Together, ground_positions, ground_speeds, together_matrix
from bench_tracking import motmetrics_agrees, read_results, tracks_to_mot, write_gold
from pairedge.core.io.mot import read_mot
from pairedge.measure.metrics import pairwise
from pairedge.measure.metrics.box_matching import MIN_IOU
from pairedge.measure.metrics.tracking import tracking_metrics

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"
SOURCES = ("bundled", "hog", "det", "gt")
#: (name, first frame, last frame + 1) of the reported splits; None: to the end.
SPLITS = (("first half (chosen on)", 0, 398), ("second half (held out)", 398, None), ("whole video", 0, None))


def detector_alone(video: Path, spec: str, frames: int | None) -> dict[str, float]:
    """Decode and detect every frame on one thread: ms per frame of the detector, frames per second of
    both."""
    from pairedge.runtime.detectors import open_detector

    cap = cv2.VideoCapture(str(video))
    times, start, n = [], time.perf_counter(), 0
    with open_detector(spec) as det:
        while frames is None or n < frames:
            ok, image = cap.read()
            if not ok:
                break
            t0 = time.perf_counter()
            det.detect(image)
            times.append(time.perf_counter() - t0)
            n += 1
    cap.release()
    wall = time.perf_counter() - start
    return {
        "frames": n,
        "detector_ms_mean": 1000 * float(np.mean(times)),
        "detector_ms_p50": 1000 * float(np.median(times)),
        "fps_decode_and_detect": n / wall,
    }


def run(
    video: Path,
    detections: Path | None,
    detector: str,
    tracker: str,
    overlap: bool,
    out: Path,
    frames: int | None,
) -> dict[str, Any]:
    """One ``pairedge run`` in process; its summary figures."""
    from pairedge.runtime.runner.run import RunOptions, run_files

    options = RunOptions(overlap=overlap, video=False, max_frames=frames).with_settings(
        detector=detector, tracker=tracker
    )
    start = time.perf_counter()
    summary = run_files(video, detections, out, options)
    wall = time.perf_counter() - start
    return {
        "frames": summary.frames,
        "fps_end_to_end": summary.frames / wall,
        "pipeline_fps": summary.fps,
        "step_ms_p50": summary.latency_ms["total"]["p50"],
        "detector": summary.detector,
        "wall_s": wall,
    }


def subset_jsonl(path: Path, lo: int, hi: int | None, dest: Path) -> Path:
    """The header and the frame records of ``path`` with ``lo <= frame < hi``."""
    with path.open() as src, dest.open("w") as dst:
        for line in src:
            obj = json.loads(line)
            if "frame" not in obj or (obj["frame"] >= lo and (hi is None or obj["frame"] < hi)):
                dst.write(line)
    return dest


def subset_mot(path: Path, lo: int, hi: int | None, dest: Path) -> Path:
    """The rows of a MOT file (1-based frames) of video frames ``lo <= frame - 1 < hi``."""
    rows = [ln for ln in path.read_text().splitlines() if ln.strip()]
    keep = [
        ln
        for ln in rows
        if lo <= int(float(ln.split(",")[0])) - 1 and (hi is None or int(float(ln.split(",")[0])) - 1 < hi)
    ]
    dest.write_text("\n".join(keep) + "\n")
    return dest


def scores(work: Path, results: Path, gt_run: Path, gt: Path, together: Path) -> dict[str, Any]:
    """Tracking and pair figures of one run, per split (cut at the frames the run processed)."""
    records = read_results(results)
    mot = work / "tracks.txt"
    tracks_to_mot(records, mot, coasted=True)
    processed = max(r["frame"] for r in records) + 1
    out: dict[str, Any] = {}
    for name, lo, end in SPLITS:
        hi = processed if end is None else min(end, processed)
        if hi <= lo:
            continue
        tag = f"{lo}-{hi}"
        m = tracking_metrics(
            subset_mot(mot, lo, hi, work / f"tracks_{tag}.txt"),
            subset_mot(gt, lo, hi, work / f"gt_{tag}.txt"),
        )
        pred = subset_jsonl(results, lo, hi, work / f"pred_{tag}.jsonl")
        gold = subset_jsonl(gt_run, lo, hi, work / f"gold_{tag}.jsonl")
        vs_gt_run = pairwise.score_files(pred, gold, tau=0.0, match_boxes=gt)
        ground = pairwise.score_files(
            pred, subset_jsonl(together, lo, hi, work / f"together_{tag}.jsonl"), tau=0.0, match_boxes=gt
        )
        out[name] = {
            "tracking": {
                k: m[k]
                for k in (
                    "mota",
                    "idf1",
                    "hota",
                    "deta",
                    "assa",
                    "id_switches",
                    "false_positives",
                    "misses",
                    "pred_tracks",
                    "gt_tracks",
                )
            },
            "pairs_vs_gt_run": {
                k: vs_gt_run.summary[k]
                for k in ("pair_precision", "pair_recall", "pair_f1", "accuracy_scored")
            },
            "pairs_vs_ground_plane": {
                k: ground.summary[k] for k in ("pair_precision", "pair_recall", "pair_f1")
            },
            "links": link_breakdown(results, gt_run, gt, lo, hi),
        }
        if end is None and lo == 0:  # the whole video: how much of the gap is box agreement
            by_iou = {}
            for t in MATCH_IOUS:  # the MOT convention's 0.5 is the headline just scored
                summary = (
                    vs_gt_run.summary
                    if t == MIN_IOU
                    else pairwise.score_files(pred, gold, tau=0.0, match_boxes=gt, match_iou=t).summary
                )
                by_iou[f"{t:g}"] = {k: summary[k] for k in ("pair_precision", "pair_recall", "pair_f1")}
            out[name]["pairs_vs_gt_run_by_match_iou"] = by_iou
    whole = subset_mot(gt, 0, processed, work / "gt_processed.txt")
    out["motmetrics_agrees"] = motmetrics_agrees(mot, whole, tracking_metrics(mot, whole))
    return out


#: Box-matching IoUs of the diagnostic table (the headline is the MOT convention, 0.5).
MATCH_IOUS = (MIN_IOU, 0.4, 0.3)


#: A predicted link within this many frames of the gt.txt run's link of the same two people is "early or
#: late".
NEAR_FRAMES = 10


def link_breakdown(results: Path, gt_run: Path, gt: Path, lo: int, hi: int | None) -> dict[str, int]:
    """Why linked pair-frames are not in the gt.txt run, recomputed independently (scipy matching, IoU >=
    0.5): one of the two boxes matches no true person; the gt.txt run links the same two people within
    :data:`NEAR_FRAMES` frames (early or late); it links them at another time; it never links them. And why
    the gt run's pair-frames are missed: one person not reported (no matching box), or both reported, not
    linked."""
    truth = read_mot(gt).by_frame()

    def links(path: Path, mapped: bool) -> tuple[dict[int, set], dict[int, set]]:
        out, people = {}, {}
        for r in read_results(path):
            f = r["frame"]
            if f < lo or (hi is not None and f >= hi):
                continue
            gid: dict[int, int] = {}
            t = truth.get(f + 1)
            if mapped and t is not None and r.get("tracks"):
                boxes = np.array([tr["box"] for tr in r["tracks"]], np.float64)
                gid = dict(
                    zip(
                        [tr["id"] for tr in r["tracks"]],
                        match_to_truth(boxes, t.boxes, t.track_ids).tolist(),
                        strict=True,
                    )
                )
            people[f] = set(gid.values()) - {-1} if mapped else {tr["id"] for tr in r.get("tracks", [])}
            pairs = set()
            for it in r["interactions"]:
                a, b = (gid.get(i, -1) for i in it["ids"]) if mapped else it["ids"]
                pairs.add((min(a, b), max(a, b)))
            out[f] = pairs
        return out, people

    gold, _ = links(gt_run, False)
    pred, present = links(results, True)
    ever = set().union(*gold.values()) if gold else set()
    out = {
        "correct": 0,
        "a box matching no true person": 0,
        f"early or late (<= {NEAR_FRAMES} frames)": 0,
        "the two linked at another time": 0,
        "never linked by the gt.txt run": 0,
        "missed: a person not reported": 0,
        "missed: both reported, not linked": 0,
    }
    for f, pairs in pred.items():
        for p in pairs:
            if p in gold.get(f, set()):
                key = "correct"
            elif -1 in p:
                key = "a box matching no true person"
            elif any(p in gold.get(g, set()) for g in range(f - NEAR_FRAMES, f + NEAR_FRAMES + 1)):
                key = f"early or late (<= {NEAR_FRAMES} frames)"
            else:
                key = "the two linked at another time" if p in ever else "never linked by the gt.txt run"
            out[key] += 1
    for f, pairs in gold.items():
        for p in pairs - pred.get(f, set()):
            both = p[0] in present.get(f, set()) and p[1] in present.get(f, set())
            out["missed: both reported, not linked" if both else "missed: a person not reported"] += 1
    return out


def plan(sources: str, trackers: str, threads: str) -> list[tuple[str, str, bool]]:
    """(source, tracker, overlap) runs: every tracker on the bundled detector, the built-in one on the others,
    each thread count on the bundled detector with the built-in tracker (the others on one thread)."""
    names = [s.strip() for s in sources.split(",") if s.strip()]
    bad = [n for n in names if n not in SOURCES]
    if bad:
        raise SystemExit(f"error: unknown source(s) {bad}; expected some of {', '.join(SOURCES)}")
    counts = sorted({int(t) for t in threads.split(",") if t.strip()})
    if not counts or not set(counts) <= {1, 2}:
        raise SystemExit(f"error: --threads: expected 1 and / or 2, got {threads!r}")
    out = []
    for name in names:
        for tracker in (
            [t.strip() for t in trackers.split(",") if t.strip()] if name == "bundled" else ["iou"]
        ):
            for n in counts if (name, tracker) == ("bundled", "iou") else [counts[-1]]:
                out.append((name, tracker, n == 2))
    return out


def fmt(v: Any, digits: int = 3) -> str:
    return "-" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def per_source_tracker(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first run of each (source, tracker): the thread counts share their scores."""
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in runs:
        first.setdefault((r["source"], r["tracker"]), r)
    return list(first.values())


def markdown(res: dict[str, Any]) -> str:
    alone = res["detector_alone"]
    lines = [
        "# From a camera to interactions on PETS 2009 S2.L1: detector, tracker, pipeline",
        "",
        f"`{res['command']}`. Every run is `pairedge run vtest.avi` in process (`run_files`, the bundled "
        "model); pairs are scored against the pairs of the `gt.txt` run (the same pipeline on the true "
        "tracks; the detector's people matched to the true ones by IoU >= 0.5) and against the ground-plane "
        "together truth of `bench_real_video.py`. Tracking against `gt.txt` (every reported person, coasted "
        "ones included). The built-in tracker's settings were chosen on the first half (frames 0-397) and "
        "simulator validation scenes; the second half is held out.",
        "",
        "## Detector alone (decode + detect, one thread)",
        "",
        "| detector | frames | detector ms mean | p50 | decode + detect fps |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, a in alone.items():
        lines.append(
            f"| {name} | {a['frames']} | {a['detector_ms_mean']:.1f} | {a['detector_ms_p50']:.1f} | "
            f"{a['fps_decode_and_detect']:.1f} |"
        )
    lines += [
        "",
        "## End to end",
        "",
        "| source | tracker | threads | fps end to end | vs detector alone | step ms p50 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in res["runs"]:
        base = alone.get(r["source"], {}).get("fps_decode_and_detect")
        ratio = f"{r['fps_end_to_end'] / base:.2f}x" if base else "-"
        lines.append(
            f"| {r['source']} | {r['tracker']} | {2 if r['overlap'] else 1} | {r['fps_end_to_end']:.1f} | "
            f"{ratio} | {r['step_ms_p50']:.2f} |"
        )
    for split in [s[0] for s in SPLITS]:
        lines += [
            "",
            f"## {split}",
            "",
            "| source | tracker | IDF1 | ID switches | MOTA | HOTA | pair P / R / F1 vs gt.txt run | labels "
            "right "
            "| pair P / R / F1 vs ground plane |",
            "|---|---|---:|---:|---:|---:|---|---:|---|",
        ]
        for r in per_source_tracker(res["runs"]):
            s = r["scores"].get(split)
            if s is None:
                continue
            t, p, g = s["tracking"], s["pairs_vs_gt_run"], s["pairs_vs_ground_plane"]
            lines.append(
                f"| {r['source']} | {r['tracker']} | {fmt(t['idf1'])} | {t['id_switches']} | "
                f"{fmt(t['mota'])} | "
                f"{fmt(t['hota'])} | {fmt(p['pair_precision'])} / {fmt(p['pair_recall'])} / "
                f"{fmt(p['pair_f1'])} | "
                f"{fmt(p['accuracy_scored'])} | {fmt(g['pair_precision'])} / {fmt(g['pair_recall'])} / "
                f"{fmt(g['pair_f1'])} |"
            )
    keys = list(res["runs"][0]["scores"]["whole video"]["links"])
    lines += [
        "",
        "## Linked pair-frames against the gt.txt run, whole video (independent recount)",
        "",
        "| source | tracker | " + " | ".join(keys) + " |",
        "|---|---|" + "---:|" * len(keys),
    ]
    for r in per_source_tracker(res["runs"]):
        b = r["scores"]["whole video"]["links"]
        lines.append(f"| {r['source']} | {r['tracker']} | " + " | ".join(str(b[k]) for k in keys) + " |")
    lines += [
        "",
        "## Pairs against the gt.txt run by box-matching IoU, whole video (diagnostic)",
        "",
        "The headline above matches a reported person to a true one at IoU >= 0.5 (the MOT convention). In "
        "groups of small people (20-30 px wide) PETS's `gt.txt` box is often a third of a width off the "
        "person while the detector's box is on them (seen by eye on frames 125 and 310): both the pair-frame "
        "and the true one it would match then count as errors. The lower thresholds show how much of the gap "
        "to the `gt.txt` run is box agreement rather than wrong people; they are not the headline.",
        "",
        "| source | tracker | " + " | ".join(f"P / R / F1 at IoU {t:g}" for t in MATCH_IOUS) + " |",
        "|---|---|" + "---|" * len(MATCH_IOUS),
    ]
    for r in per_source_tracker(res["runs"]):
        by = r["scores"]["whole video"]["pairs_vs_gt_run_by_match_iou"]
        cells = [
            f"{fmt(by[f'{t:g}']['pair_precision'])} / {fmt(by[f'{t:g}']['pair_recall'])} / "
            f"{fmt(by[f'{t:g}']['pair_f1'])}"
            for t in MATCH_IOUS
        ]
        lines.append(f"| {r['source']} | {r['tracker']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"py-motmetrics agrees on every run: {res['motmetrics_agrees']}.",
        "",
        f"Environment: {res['environment']}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--sources", default=",".join(SOURCES), help="bundled, hog, det, gt (comma-separated)")
    ap.add_argument("--trackers", default="iou,bytetrack,botsort", help="trackers on the bundled detector")
    ap.add_argument(
        "--threads", default="1,2", help="thread counts of the bundled detector with the built-in tracker"
    )
    ap.add_argument("--frames", type=int, default=None, help="only the first N frames (a quick run)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--work", type=Path, default=None, help="keep the runs here (default: a temporary folder)"
    )
    args = ap.parse_args(argv)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    if args.frames is not None and args.frames < 2:
        raise SystemExit(f"error: --frames: expected at least 2, got {args.frames}")
    runs = plan(args.sources, args.trackers, args.threads)
    cv2.setNumThreads(1)
    video, gt, det = (
        args.data / "vtest.avi",
        args.data / "mot15" / "gt" / "gt.txt",
        args.data / "mot15" / "det" / "det.txt",
    )
    from pairedge.runtime.detectors.bundled import DEFAULT_DETECTOR

    detector_of = {"bundled": DEFAULT_DETECTOR, "hog": "hog"}
    files: dict[str, Path | None] = {"bundled": None, "hog": None, "det": det, "gt": gt}
    command = " ".join(["python benchmarks/bench_camera.py", *(sys.argv[1:] if argv is None else argv)])
    res: dict[str, Any] = {
        "command": command,
        "detector_alone": {},
        "runs": [],
        "environment": f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, "
        f"numpy {np.__version__}, OpenCV {cv2.__version__}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in dict.fromkeys(n for n, _, _ in runs):
            if name in detector_of:
                res["detector_alone"][name] = detector_alone(video, detector_of[name], args.frames)
                print(f"{name} alone: {res['detector_alone'][name]}", flush=True)
        gt_out = work / "gt-run"
        run(video, gt, DEFAULT_DETECTOR, "iou", False, gt_out, args.frames)
        together = work / "together.jsonl"
        rule = Together()
        pos, _ = ground_positions(gt)
        header = json.loads((gt_out / "results.jsonl").open().readline())
        write_gold(
            together,
            together_matrix(pos, 10.0, rule),
            ground_speeds(pos, 10.0, rule.window),
            header["labels"],
            795 if args.frames is None else args.frames,
            rule,
        )
        for name, tracker, overlap in runs:
            out = work / f"{name}-{tracker}-{2 if overlap else 1}"
            r = run(
                video,
                files[name],
                detector_of.get(name, DEFAULT_DETECTOR),
                tracker,
                overlap,
                out,
                args.frames,
            )
            r.update(source=name, tracker=tracker, overlap=overlap)
            r["scores"] = scores(out, out / "results.jsonl", gt_out / "results.jsonl", gt, together)
            res["runs"].append(r)
            whole = r["scores"]["whole video"]  # noqa: F841 - printed below
            print(
                f"{name}/{tracker}/{2 if overlap else 1} thread(s): {r['fps_end_to_end']:.1f} fps; IDF1 "
                f"{whole['tracking']['idf1']:.3f} switches {whole['tracking']['id_switches']} MOTA "
                f"{whole['tracking']['mota']:.3f}; pairs vs gt run P "
                f"{whole['pairs_vs_gt_run']['pair_precision']:.3f} "
                f"R {whole['pairs_vs_gt_run']['pair_recall']:.3f}",
                flush=True,
            )
    res["motmetrics_agrees"] = all(r["scores"]["motmetrics_agrees"] is not False for r in res["runs"])
    text = markdown(res)
    write("bench_camera", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
