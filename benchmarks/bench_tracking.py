"""The built-in tracker on PETS 2009 S2.L1: tracking metrics and pair F1 after box matching.

For each input (``det``: the raw ACF detections ``mot15/det/det.txt``, ids assigned by the built-in tracker;
``gt``: the ground-truth tracks ``mot15/gt/gt.txt`` as a reference, ids given; ``hog``, with ``--inputs``: no
detection file, people found by the HOG default detector), this runs the real CLI::

    pairedge run vtest.avi [--detections <file>] --out <tmp>/<input> --no-video

then

1. writes the run's ``tracks`` as a MOT file (``tracks.txt``, frame = run frame + 1; every reported person,
   coasted ones included, and a second file without the coasted boxes) and scores it against ``gt.txt`` with
   :func:`pairedge.core.metrics.tracking.tracking_metrics` (MOTA, ID switches, IDF1; IoU >= 0.5);
2. scores the run's pairs against the ground-plane "together" of ``bench_real_video.py`` (its functions, its
   default rule) written as a pairwise ground truth (``pets_together.jsonl``: every video frame, each
   together pair labelled ``standing_together`` when both people are slower than the rule's ``still``
   speed, else ``walking_together``), with box matching:
   :func:`pairedge.core.metrics.pairwise.score_files` ``(..., match_boxes=gt.txt, tau=0)`` (``tau`` 0: every
   pair the run reported counts; the run applied its own gate);
3. runs ``pairedge score -p pairwise --pred results.jsonl --gold pets_together.jsonl --match-boxes gt.txt
   --tau 0`` as a subprocess and checks that its pair F1 is the in-process one (the acceptance of issue 28);
4. recomputes pair precision / recall independently, as ``bench_real_video.py`` does (scipy's
   ``linear_sum_assignment`` on IoU, then IoU >= 0.5: ``benchmarks/_matching.py``), as a cross-check.

Writes ``benchmarks/results/bench_tracking.json`` / ``.md``. Run from the repository root (about 30 s)::

    python benchmarks/bench_tracking.py [/path/to/pets09_s2l1] [--out DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from _matching import match_to_truth
from _train_bench import write
from bench_real_video import Together, ground_positions, ground_speeds, together_matrix
from pairedge.core.io.mot import read_mot, write_mot
from pairedge.core.metrics import pairwise
from pairedge.core.metrics.tracking import tracking_metrics

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
    """Write the runs' tracks as MOT (frame + 1); ``coasted`` False leaves the tracker's predicted boxes out."""
    rows = [(r["frame"] + 1, t["id"], t["box"]) for r in records for t in r.get("tracks", [])
            if coasted or not t.get("coasted")]  # fmt: skip
    write_mot(path, np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64),
              np.array([r[2] for r in rows], np.float64).reshape(-1, 4))  # fmt: skip
    return len(rows)


def write_gold(path: Path, together: np.ndarray, speeds: np.ndarray, labels: list[str], frames: int,
               rule: Together) -> int:  # fmt: skip
    """The together pairs as a pairwise ground truth over video frames 0 .. ``frames`` - 1; returns the pairs."""
    n = 0
    with path.open("w") as fh:
        fh.write(json.dumps({"labels": labels}) + "\n")
        for f in range(frames):
            inter = []
            if f < len(together):
                for i, j in zip(*np.nonzero(np.triu(together[f], 1)), strict=True):
                    still = max(speeds[f, i], speeds[f, j]) < rule.still
                    inter.append({"ids": [int(i), int(j)], "label": "standing_together" if still else "walking_together"})
            n += len(inter)
            fh.write(json.dumps({"frame": f, "interactions": inter}) + "\n")
    return n


def independent_pairs(records: list[dict[str, Any]], truth: dict[int, Any], together: np.ndarray) -> dict[str, float]:
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


def run_input(name: str, video: Path, detections: Path | None, gt: Path, work: Path, together: np.ndarray,
              speeds: np.ndarray, truth: dict[int, Any], rule: Together) -> dict[str, Any]:  # fmt: skip
    """One ``pairedge run`` (``detections`` None: no detection file, the HOG default detector) and its scores."""
    out = work / name
    found = ["--detections", str(detections)] if detections is not None else []
    cmd = [*pairedge_cli(), "run", str(video), *found, "--out", str(out), "--no-video"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    results = out / "results.jsonl"
    header = json.loads(results.open().readline())
    records = read_results(results)
    summary = json.loads((out / "summary.json").read_text())
    res: dict[str, Any] = {"frames": len(records), "fps": summary.get("fps"), "tracks_distinct": summary.get("tracks")}
    for key, coasted in (("tracking", True), ("tracking_without_coasted", False)):
        mot = out / ("tracks.txt" if coasted else "tracks_detected.txt")
        res[f"{key}_boxes"] = tracks_to_mot(records, mot, coasted=coasted)
        res[key] = tracking_metrics(mot, gt)
    gold = work / "pets_together.jsonl"
    frames = max(len(together), max(r["frame"] for r in records) + 1)
    res["gold_pairs"] = write_gold(gold, together, speeds, header["labels"], frames, rule)
    rep = pairwise.score_files(results, gold, tau=0.0, match_boxes=gt)
    res["pairs"] = {k: rep.summary[k] for k in ("pair_precision", "pair_recall", "pair_f1", "accuracy", "mpca")}
    res["box_matching"] = rep.details["box_matching"]
    cli_json = out / "score.json"
    score_cmd = ["score", "-p", "pairwise", "--pred", str(results), "--gold", str(gold), "--match-boxes", str(gt),
                 "--tau", "0", "--json", str(cli_json)]  # fmt: skip
    subprocess.run([*pairedge_cli(), *score_cmd], check=True, capture_output=True, text=True)
    cli_f1 = json.loads(cli_json.read_text())["summary"]["pair_f1"]
    res["cli_pair_f1"] = cli_f1
    res["cli_agrees"] = bool(abs(cli_f1 - rep.summary["pair_f1"]) < 1e-12)
    res["independent_pairs"] = independent_pairs(records, truth, together)
    return res


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# The built-in tracker on PETS 2009 S2.L1: tracking metrics and pair F1 after box matching",
        "",
        f"`python benchmarks/bench_tracking.py` — {res['together_pair_frames']} together pair-frames in the "
        "ground truth (the ground-plane rule of `bench_real_video.py`, its defaults). Boxes correspond at IoU "
        ">= 0.5 (Hungarian). Tracks: every person the run reported (coasted boxes included); in brackets "
        "without the coasted boxes.",
        "",
        "| input | distinct ids | IDF1 | ID switches | MOTA | MOTP (IoU) | FP | misses | MT / ML of "
        f"{res['inputs']['det']['tracking']['gt_tracks']} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in res["inputs"].items():
        m, w = r["tracking"], r["tracking_without_coasted"]
        lines.append(
            f"| {name} | {m['pred_tracks']} | {m['idf1']:.3f} ({w['idf1']:.3f}) | {m['id_switches']} "
            f"({w['id_switches']}) | {m['mota']:.3f} ({w['mota']:.3f}) | {m['motp']:.3f} | {m['false_positives']} "
            f"| {m['misses']} | {m['mostly_tracked']} / {m['mostly_lost']} |"
        )
    lines += [
        "",
        "Pairs after box matching (`pairedge score -p pairwise --pred results.jsonl --gold pets_together.jsonl "
        "--match-boxes gt.txt --tau 0`; the same in-process; and recomputed the way `bench_real_video.py` "
        "matches, scipy then IoU >= 0.5):",
        "",
        "| input | pair precision | pair recall | pair F1 | CLI pair F1 (agrees) | independent P / R / F1 "
        "| predicted people-frames matched |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in res["inputs"].items():
        p, ind, bm = r["pairs"], r["independent_pairs"], r["box_matching"]
        lines.append(
            f"| {name} | {p['pair_precision']:.4f} | {p['pair_recall']:.4f} | {p['pair_f1']:.4f} | "
            f"{r['cli_pair_f1']:.4f} ({'yes' if r['cli_agrees'] else 'NO'}) | {ind['precision']:.4f} / "
            f"{ind['recall']:.4f} / {ind['f1']:.4f} | {bm['matched']} / {bm['pred']} |"
        )
    lines += ["", f"Environment: {res['environment']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--work", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--inputs", default="det,gt",
                    help="det (det.txt + the built-in tracker), gt (gt.txt tracks), hog (no detection file: the HOG "
                         "default detector + the built-in tracker, about 4 minutes); comma-separated")  # fmt: skip
    args = ap.parse_args(argv)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    video, gt = args.data / "vtest.avi", args.data / "mot15" / "gt" / "gt.txt"
    files: dict[str, Path | None] = {"det": args.data / "mot15" / "det" / "det.txt", "gt": gt, "hog": None}
    rule = Together()
    pos, _ = ground_positions(gt)
    together = together_matrix(pos, FPS, rule)
    speeds = ground_speeds(pos, FPS, rule.window)
    truth = read_mot(gt).by_frame()
    import cv2

    res: dict[str, Any] = {
        "together_rule": rule.__dict__, "together_pair_frames": int(np.triu(together, 1).sum()), "inputs": {},
        "environment": f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
                       f"OpenCV {cv2.__version__}",
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in (n.strip() for n in args.inputs.split(",") if n.strip()):
            r = run_input(name, video, files[name], gt, work, together, speeds, truth, rule)
            res["inputs"][name] = r
            print(f"{name}: IDF1 {r['tracking']['idf1']:.3f} switches {r['tracking']['id_switches']} MOTA "
                  f"{r['tracking']['mota']:.3f} pair F1 {r['pairs']['pair_f1']:.4f} (CLI {r['cli_pair_f1']:.4f})")  # fmt: skip
    text = markdown(res)
    write("bench_tracking", res, text, args.out)
    print(text)
    return 0 if all(r["cli_agrees"] for r in res["inputs"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
