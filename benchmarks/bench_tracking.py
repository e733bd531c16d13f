"""The tracker backends on PETS 2009 S2.L1: tracking metrics and pair F1 after box matching.

For each input (``det``: the raw ACF detections ``mot15/det/det.txt``, ids assigned by each tracker of
``--trackers``; ``gt``: the ground-truth tracks ``mot15/gt/gt.txt`` as a reference, ids given; ``hog``, with
``--inputs``: no detection file, people found by the HOG default detector, tracked by each of
``--hog-trackers``), this runs the real CLI::

    pairedge run vtest.avi [--detections <file>] [--tracker <name>] --out <tmp>/<input>-<tracker> --no-video

The trackers (``iou``: built in; ``bytetrack``, ``ocsort``, ``botsort``: Roboflow's ``trackers`` library,
its defaults; ``botsort`` compensates camera motion from the video frames, which here stand still) are run as
they ship: no parameter is chosen on PETS.

then

1. writes the run's ``tracks`` as a MOT file (``tracks.txt``, frame = run frame + 1; every reported person,
   coasted ones included, and a second file without the coasted boxes) and scores it against ``gt.txt`` with
   :func:`pairedge.measure.metrics.tracking.tracking_metrics` (MOTA, ID switches, IDF1 at IoU >= 0.5; HOTA,
   DetA, AssA over IoU 0.05 .. 0.95), and cross-checks MOTA / IDF1 / ID switches / the counts against
   py-motmetrics on the same file when it is installed (``motmetrics_agrees``);
2. scores the run's pairs against the ground-plane "together" of ``bench_real_video.py`` (its functions, its
   default rule) written as a pairwise ground truth (``pets_together.jsonl``: every video frame, each
   together pair labelled ``standing_together`` when both people are slower than the rule's ``still``
   speed, else ``walking_together``), with box matching:
   :func:`pairedge.measure.metrics.pairwise.score_files` ``(..., match_boxes=gt.txt, tau=0)`` (``tau`` 0:
   every pair the run reported counts; the run applied its own gate);
3. runs ``pairedge score -p pairwise --pred results.jsonl --gold pets_together.jsonl --match-boxes gt.txt
   --tau 0`` as a subprocess and checks that its pair F1 is the in-process one (the acceptance of issue 28);
4. recomputes pair precision / recall independently, as ``bench_real_video.py`` does (scipy's
   ``linear_sum_assignment`` on IoU, then IoU >= 0.5: ``benchmarks/_matching.py``), as a cross-check.

Writes ``benchmarks/results/bench_tracking.json`` / ``.md``. Run from the repository root (about 20 s a
``det`` run, 4 minutes a ``hog`` run)::

    python benchmarks/bench_tracking.py [/path/to/pets09_s2l1] [--inputs det,gt,hog]
        [--trackers iou,bytetrack,ocsort,botsort] [--hog-trackers iou] [--out DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from _matching import match_to_truth
from _train_bench import write
from bench_real_video import Together, ground_positions, ground_speeds, together_matrix
from pairedge.core.io.mot import read_mot, write_mot
from pairedge.measure.metrics import pairwise
from pairedge.measure.metrics.tracking import tracking_metrics

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"
FPS = 10.0


def pairedge_cli() -> list[str]:
    """The ``pairedge`` command of this interpreter."""
    return [sys.executable, "-m", "pairedge.apps.cli"]


def read_results(path: Path) -> list[dict[str, Any]]:
    """The frame records of a run's ``results.jsonl`` (header skipped)."""
    out = []
    with path.open() as fh:
        for line in fh:
            obj = json.loads(line)
            if "frame" in obj:
                out.append(obj)
    return out


def tracks_to_mot(records: list[dict[str, Any]], path: Path, *, coasted: bool) -> int:
    """Write the runs' tracks as MOT (frame + 1); ``coasted`` False leaves the tracker's predicted boxes
    out."""
    rows = [
        (r["frame"] + 1, t["id"], t["box"])
        for r in records
        for t in r.get("tracks", [])
        if coasted or not t.get("coasted")
    ]
    write_mot(
        path,
        np.array([r[0] for r in rows], np.int64),
        np.array([r[1] for r in rows], np.int64),
        np.array([r[2] for r in rows], np.float64).reshape(-1, 4),
    )
    return len(rows)


def write_gold(
    path: Path, together: np.ndarray, speeds: np.ndarray, labels: list[str], frames: int, rule: Together
) -> int:
    """The together pairs as a pairwise ground truth over video frames 0 .. ``frames`` - 1; returns the
    pairs."""
    n = 0
    with path.open("w") as fh:
        fh.write(json.dumps({"labels": labels}) + "\n")
        for f in range(frames):
            inter = []
            if f < len(together):
                for i, j in zip(*np.nonzero(np.triu(together[f], 1)), strict=True):
                    still = max(speeds[f, i], speeds[f, j]) < rule.still
                    inter.append(
                        {
                            "ids": [int(i), int(j)],
                            "label": "standing_together" if still else "walking_together",
                        }
                    )
            n += len(inter)
            fh.write(json.dumps({"frame": f, "interactions": inter}) + "\n")
    return n


def independent_pairs(
    records: list[dict[str, Any]], truth: dict[int, Any], together: np.ndarray
) -> dict[str, float]:
    """Pair precision / recall / F1 recomputed the way ``bench_real_video.py`` matches boxes (scipy)."""
    linked = hits = 0
    recalled: set[tuple[int, int, int]] = set()
    for r in records:
        f = r["frame"]
        t = truth.get(f + 1)
        ids = [tr["id"] for tr in r.get("tracks", [])]
        gid = {}
        if t is not None and ids:
            boxes = np.array([tr["box"] for tr in r["tracks"]], np.float64)
            gid = dict(zip(ids, match_to_truth(boxes, t.boxes, t.track_ids).tolist(), strict=True))
        for inter in r["interactions"]:
            linked += 1
            a, b = (gid.get(i, -1) for i in inter["ids"])
            if a >= 0 and b >= 0 and f < len(together) and together[f, a, b]:
                hits += 1
                recalled.add((f, min(a, b), max(a, b)))
    total = int(np.triu(together, 1).sum())
    p = hits / linked if linked else 0.0
    rec = len(recalled) / total if total else 0.0
    return {"precision": p, "recall": rec, "f1": 2 * p * rec / (p + rec) if p + rec else 0.0}


def motmetrics_agrees(mot: Path, gt: Path, m: dict[str, Any]) -> bool | None:
    """Whether py-motmetrics gives the same MOTA, MOTP, IDF1, ID switches, FP and misses (1e-9) on the
    same files (its own IoU, at distance 1 - IoU <= 0.5); None when it is not installed."""
    try:
        if not hasattr(np, "asfarray"):  # motmetrics 1.4.0 still calls it (removed in numpy 2)
            np.asfarray = lambda a, dtype=float: np.asarray(a, dtype=dtype)  # type: ignore[attr-defined]
        import motmetrics as mm
    except ImportError:
        return None
    from pairedge.measure.metrics.tracking import read_tracks

    pred, truth = read_tracks(mot, truth=False), read_tracks(gt, truth=True)
    acc = mm.MOTAccumulator(auto_id=False)
    none = (np.zeros(0, np.int64), np.zeros((0, 4)))
    for f in sorted(set(pred) | set(truth)):
        t = (truth[f].ids, truth[f].boxes) if f in truth else none
        p = (pred[f].ids, pred[f].boxes) if f in pred else none
        acc.update(t[0], p[0], mm.distances.iou_matrix(t[1], p[1], max_iou=0.5), frameid=f)
    names = ["mota", "motp", "idf1", "num_switches", "num_false_positives", "num_misses"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = mm.metrics.create().compute(acc, metrics=names).iloc[0]
    close = [abs(m["mota"] - r["mota"]), abs(1 - m["motp"] - r["motp"]), abs(m["idf1"] - r["idf1"])]
    counts = (m["id_switches"], m["false_positives"], m["misses"])
    return bool(max(close) < 1e-9 and counts == tuple(int(r[k]) for k in names[3:]))


def run_input(
    name: str,
    video: Path,
    detections: Path | None,
    gt: Path,
    work: Path,
    together: np.ndarray,
    speeds: np.ndarray,
    truth: dict[int, Any],
    rule: Together,
    tracker: str = "iou",
) -> dict[str, Any]:
    """One ``pairedge run --tracker <tracker>`` (``detections`` None: no detection file, the HOG default
    detector) and its scores."""
    out = work / f"{name}-{tracker}"
    found = ["--detections", str(detections)] if detections is not None else []
    cmd = [*pairedge_cli(), "run", str(video), *found, "--tracker", tracker, "--out", str(out), "--no-video"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd[2:])} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    results = out / "results.jsonl"
    header = json.loads(results.open().readline())
    records = read_results(results)
    summary = json.loads((out / "summary.json").read_text())
    res: dict[str, Any] = {
        "input": name,
        "tracker": tracker,
        "frames": len(records),
        "fps": summary.get("fps"),
        "tracks_distinct": summary.get("tracks"),
        "run_s": time.perf_counter() - start,
        "track_ms_p50": summary.get("latency_ms", {}).get("track", {}).get("p50"),
    }
    for key, coasted in (("tracking", True), ("tracking_without_coasted", False)):
        mot = out / ("tracks.txt" if coasted else "tracks_detected.txt")
        res[f"{key}_boxes"] = tracks_to_mot(records, mot, coasted=coasted)
        res[key] = tracking_metrics(mot, gt)
    res["motmetrics_agrees"] = motmetrics_agrees(out / "tracks.txt", gt, res["tracking"])
    gold = work / "pets_together.jsonl"
    frames = max(len(together), max(r["frame"] for r in records) + 1)
    res["gold_pairs"] = write_gold(gold, together, speeds, header["labels"], frames, rule)
    rep = pairwise.score_files(results, gold, tau=0.0, match_boxes=gt)
    res["pairs"] = {
        k: rep.summary[k] for k in ("pair_precision", "pair_recall", "pair_f1", "accuracy", "mpca")
    }
    res["box_matching"] = rep.details["box_matching"]
    cli_json = out / "score.json"
    score_cmd = [
        "score",
        "-p",
        "pairwise",
        "--pred",
        str(results),
        "--gold",
        str(gold),
        "--match-boxes",
        str(gt),
        "--tau",
        "0",
        "--json",
        str(cli_json),
    ]
    subprocess.run([*pairedge_cli(), *score_cmd], check=True, capture_output=True, text=True)
    cli_f1 = json.loads(cli_json.read_text())["summary"]["pair_f1"]
    res["cli_pair_f1"] = cli_f1
    res["cli_agrees"] = bool(abs(cli_f1 - rep.summary["pair_f1"]) < 1e-12)
    res["independent_pairs"] = independent_pairs(records, truth, together)
    return res


def markdown(res: dict[str, Any]) -> str:
    runs = res["inputs"]
    n_gt = next(iter(runs.values()))["tracking"]["gt_tracks"]
    lines = [
        "# Tracker backends on PETS 2009 S2.L1: tracking metrics and pair F1 after box matching",
        "",
        f"`{res['command']}` — {res['together_pair_frames']} together pair-frames in the ground truth (the "
        "ground-plane rule of `bench_real_video.py`, its defaults). Trackers: `iou` built in (its defaults); "
        "`bytetrack`, `ocsort`, `botsort` from Roboflow's `trackers` "
        f"{res['trackers_version']} with the library's defaults (no parameter chosen on PETS; their "
        "confidence thresholds 0.6 / 0.7 meet ACF scores of 0 to 139, so nearly every box counts as "
        "confident); `botsort` compensates camera motion (the camera here is fixed). CLEAR MOT / IDF1 at "
        "IoU >= 0.5 (Hungarian); HOTA, DetA, AssA: TrackEval's definition, mean over IoU 0.05 .. 0.95. "
        "Tracks: every person the run reported (the built-in tracker's coasted boxes included); in "
        "brackets without them. motmetrics: py-motmetrics gives the same MOTA, MOTP, IDF1, ID switches, "
        "FP and misses on the same file (1e-9).",
        "",
        "| input | tracker | distinct ids | IDF1 | HOTA | DetA | AssA | ID switches | MOTA | MOTP (IoU) | "
        "FP | "
        f"misses | MT / ML of {n_gt} | track ms p50 | motmetrics |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs.values():
        m, w = r["tracking"], r["tracking_without_coasted"]
        mm = {True: "agrees", False: "DIFFERS", None: "not installed"}[r["motmetrics_agrees"]]
        ms = "" if r["track_ms_p50"] is None else f"{r['track_ms_p50']:.2f}"
        lines.append(
            f"| {r['input']} | {r['tracker']} | {m['pred_tracks']} | {m['idf1']:.3f} ({w['idf1']:.3f}) | "
            f"{m['hota']:.3f} ({w['hota']:.3f}) | {m['deta']:.3f} | {m['assa']:.3f} | {m['id_switches']} "
            f"({w['id_switches']}) | {m['mota']:.3f} ({w['mota']:.3f}) | {m['motp']:.3f} | "
            f"{m['false_positives']} "
            f"| {m['misses']} | {m['mostly_tracked']} / {m['mostly_lost']} | {ms} | {mm} |"
        )
    lines += [
        "",
        "Pairs after box matching (`pairedge score -p pairwise --pred results.jsonl --gold "
        "pets_together.jsonl --match-boxes gt.txt --tau 0`; the same in-process; and recomputed the way "
        "`bench_real_video.py` matches, scipy then IoU >= 0.5):",
        "",
        "| input | tracker | pair precision | pair recall | pair F1 | CLI pair F1 (agrees) | independent P / "
        "R / F1 "
        "| predicted people-frames matched |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs.values():
        p, ind, bm = r["pairs"], r["independent_pairs"], r["box_matching"]
        lines.append(
            f"| {r['input']} | {r['tracker']} | {p['pair_precision']:.4f} | {p['pair_recall']:.4f} | "
            f"{p['pair_f1']:.4f} | {r['cli_pair_f1']:.4f} ({'yes' if r['cli_agrees'] else 'NO'}) | "
            f"{ind['precision']:.4f} / {ind['recall']:.4f} / {ind['f1']:.4f} | {bm['matched']} / "
            f"{bm['pred']} |"
        )
    lines += ["", f"Environment: {res['environment']}"]
    return "\n".join(lines) + "\n"


def plan(inputs: str, trackers: str, hog_trackers: str) -> list[tuple[str, str]]:
    """(input, tracker) runs: ``det`` with each of ``trackers``, ``hog`` with each of ``hog_trackers``,
    ``gt`` once (its ids are given: no tracker runs)."""
    names = [n.strip() for n in inputs.split(",") if n.strip()]
    per = {"det": trackers, "hog": hog_trackers, "gt": "iou"}
    bad = [n for n in names if n not in per]
    if bad:
        raise SystemExit(f"error: unknown input(s) {bad}; expected det, gt, hog")
    return [(n, t.strip()) for n in names for t in per[n].split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--work", type=Path, default=None, help="keep the runs here (default: a temporary folder)"
    )
    ap.add_argument(
        "--inputs",
        default="det,gt",
        help="det (det.txt + each --trackers), gt (gt.txt tracks), hog (no detection file: the HOG "
        "default detector + each --hog-trackers, about 4 minutes a run); comma-separated",
    )
    ap.add_argument("--trackers", default="iou,bytetrack,ocsort,botsort", help="tracker backends on det")
    ap.add_argument("--hog-trackers", default="iou", help="tracker backends on hog")
    args = ap.parse_args(argv)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    video, gt = args.data / "vtest.avi", args.data / "mot15" / "gt" / "gt.txt"
    files: dict[str, Path | None] = {"det": args.data / "mot15" / "det" / "det.txt", "gt": gt, "hog": None}
    runs = plan(args.inputs, args.trackers, args.hog_trackers)
    rule = Together()
    pos, _ = ground_positions(gt)
    together = together_matrix(pos, FPS, rule)
    speeds = ground_speeds(pos, FPS, rule.window)
    truth = read_mot(gt).by_frame()
    import cv2

    try:
        from importlib.metadata import version

        trackers_version = version("trackers")
    except Exception:  # noqa: BLE001 - PackageNotFoundError: not installed
        trackers_version = "(not installed)"
    command = " ".join(
        [
            "python benchmarks/bench_tracking.py",
            f"--inputs {args.inputs}",
            f"--trackers {args.trackers}",
            f"--hog-trackers {args.hog_trackers}",
        ]
    )
    res: dict[str, Any] = {
        "command": command,
        "trackers_version": trackers_version,
        "together_rule": rule.__dict__,
        "together_pair_frames": int(np.triu(together, 1).sum()),
        "inputs": {},
        "environment": f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"OpenCV {cv2.__version__}, trackers {trackers_version}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name, tracker in runs:
            r = run_input(name, video, files[name], gt, work, together, speeds, truth, rule, tracker)
            res["inputs"][f"{name}/{tracker}"] = r
            m = r["tracking"]
            print(
                f"{name}/{tracker}: IDF1 {m['idf1']:.3f} HOTA {m['hota']:.3f} switches {m['id_switches']} "
                f"MOTA {m['mota']:.3f} pair F1 {r['pairs']['pair_f1']:.4f} (CLI {r['cli_pair_f1']:.4f}) "
                f"motmetrics {r['motmetrics_agrees']} {r['run_s']:.0f} s",
                flush=True,
            )
    text = markdown(res)
    write("bench_tracking", res, text, args.out)
    print(text)
    ok = all(r["cli_agrees"] and r["motmetrics_agrees"] is not False for r in res["inputs"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
