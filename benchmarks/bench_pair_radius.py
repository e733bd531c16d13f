"""Which pair radius loses no link? (issue 26: prune pairs too far apart to interact, measured)

``PipelineConfig(pair_radius=R)`` (``pairedge run --pair-radius R``) skips the features and the classifiers of
every pair whose box centres are more than R mean box heights apart. This benchmark runs the bundled model
through the whole pipeline with and without the radius and compares the links it reports, frame by frame:

1. **Choice** on simulator *validation* scenes (seeds 2000-2001 of ``static``, ``moving``, ``noisy`` and
   ``surveillance``, ground-truth and simulated-detector boxes): the smallest R of ``--grid`` with no link
   lost in any scene.
2. **Check** of that R on held-out scenes (seeds 1000-1001 of the same presets, both box sources) and on PETS
   2009 S2.L1 (``gt.txt`` tracks, raw ``det.txt`` detections + the built-in tracker; ``--data``): links lost
   and gained, the farthest link of the unpruned run (the margin), the pairs kept and the features + stage-1
   time.

A link is a pair the frame reports as interacting. Writes ``benchmarks/results/bench_pair_radius.json`` and
``.md``::

    python benchmarks/bench_pair_radius.py --data ../shared/data      # ~5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write
from pairedge.core.bundled import default_model_dir
from pairedge.measure.sim import Scene
from pairedge.runtime import Deployment, PipelineConfig
from pairedge.runtime.runner.inputs import FrameSource, read_detections

HERE = Path(__file__).resolve().parent
PRESETS = ("static", "moving", "noisy", "surveillance")


def sim_frames(preset: str, seed: int, boxes: str, frames: int) -> Iterator[tuple[Any, Any, float, int]]:
    for f in Scene(preset, seed).frames(frames):
        yield f.image, f.truth if boxes == "truth" else f.detections, f.timestamp, f.index


def pets_frames(data: Path, which: str) -> Iterator[tuple[Any, Any, float, int]]:
    root = data / "pets09_s2l1"
    dets = read_detections(root / "mot15" / which / f"{which}.txt")
    source = FrameSource(root / "vtest.avi")
    for index, image in source:
        yield image, dets.get(index), index / source.fps, index


def run(frames: Any, radius: float | None) -> dict[str, Any]:
    """Links per frame ({(a, b), ...}), their distances in mean heights, pairs per frame, features + stage-1
    ms."""
    links: list[set[tuple[int, int]]] = []
    far, pairs, ms = 0.0, 0, 0.0
    with Deployment(default_model_dir()).load(PipelineConfig(pair_radius=radius)) as pipe:
        for image, dets, t, index in frames:
            r = pipe.step(image, dets, t, frame_index=index)
            kept = r.pairs[r.interacting]
            links.append({(int(a), int(b)) for a, b in kept})
            pairs += len(r.pairs)
            ms += r.timings_ms["features"] + r.timings_ms["stage1"]
            if len(kept):
                far = max(far, float(_distances(r, kept).max()))
    return {"links": links, "farthest_link": far, "pairs": pairs, "ms": ms / max(len(links), 1)}


def _distances(result: Any, pairs: np.ndarray) -> np.ndarray:
    row = {int(k): n for n, k in enumerate(result.track_ids.tolist())}
    b = result.boxes.astype(np.float64)
    ia = np.array([row[int(a)] for a in pairs[:, 0]])
    ib = np.array([row[int(x)] for x in pairs[:, 1]])
    c = b[:, :2] + b[:, 2:] / 2
    return np.hypot(*(c[ib] - c[ia]).T) / np.maximum((b[ia, 3] + b[ib, 3]) / 2, 1e-6)


def compare(full: dict[str, Any], pruned: dict[str, Any]) -> dict[str, Any]:
    lost = sum(len(a - b) for a, b in zip(full["links"], pruned["links"], strict=True))
    gained = sum(len(b - a) for a, b in zip(full["links"], pruned["links"], strict=True))
    return {
        "links": sum(len(a) for a in full["links"]),
        "lost": lost,
        "gained": gained,
        "farthest_link": full["farthest_link"],
        "pairs_kept": pruned["pairs"] / max(full["pairs"], 1),
        "ms_full": full["ms"],
        "ms_pruned": pruned["ms"],
    }


def streams(seeds: tuple[int, ...], frames: int) -> dict[str, Any]:
    """Name -> a function making the stream's frames again (a scene is rendered anew rather than held)."""
    return {
        f"{p}:{s} {b}": (lambda p=p, s=s, b=b: sim_frames(p, s, b, frames))
        for p in PRESETS
        for s in seeds
        for b in ("truth", "detections")
    }


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Pair radius: links lost when far pairs are skipped (issue 26)",
        "",
        "`python benchmarks/bench_pair_radius.py` — the bundled model through the whole pipeline with and "
        "without `PipelineConfig(pair_radius=R)`; a link is a pair a frame reports as interacting.",
        "",
        f"## Choice on validation scenes (seeds {res['validation_seeds']}): lost links per radius",
        "",
        "| radius (mean box heights) | links lost | links gained | pairs kept |",
        "|---:|---:|---:|---:|",
    ]
    for r, row in res["grid"].items():
        lines.append(f"| {r} | {row['lost']} | {row['gained']} | {100 * row['pairs_kept']:.0f} % |")
    lines += [
        "",
        f"Chosen: **{res['chosen']}** (the smallest with no link lost); farthest link of the unpruned runs "
        f"{res['validation_farthest']:.2f} mean heights.",
        "",
        f"## Check of radius {res['chosen']} (held-out seeds {res['test_seeds']}, PETS)",
        "",
        "| stream | links | lost | gained | farthest link | pairs kept | features + stage 1 ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, c in res["check"].items():
        lines.append(
            f"| {name} | {c['links']} | {c['lost']} | {c['gained']} | {c['farthest_link']:.2f} | "
            f"{100 * c['pairs_kept']:.0f} % | {c['ms_full']:.2f} -> {c['ms_pruned']:.2f} |"
        )
    lines += ["", f"Run time {res['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="the shared data folder (PETS)")
    ap.add_argument("--grid", default="2,3,4,5,6,8")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    cv2.setNumThreads(1)
    start = time.perf_counter()
    grid = [float(x) for x in args.grid.split(",")]
    res: dict[str, Any] = {"validation_seeds": "2000-2001", "test_seeds": "1000-1001", "grid": {}}
    rows: dict[float, list[dict[str, Any]]] = {r: [] for r in grid}
    farthest = 0.0
    for name, make in streams((2000, 2001), args.frames).items():
        frames = list(make())  # one scene in memory at a time, run once per radius
        full = run(frames, None)
        farthest = max(farthest, full["farthest_link"])
        for r in grid:
            rows[r].append(compare(full, run(frames, r)))
        print(name, {f"{r:g}": rows[r][-1]["lost"] for r in grid}, flush=True)
    chosen = None
    for r in grid:
        res["grid"][f"{r:g}"] = {
            "lost": sum(x["lost"] for x in rows[r]),
            "gained": sum(x["gained"] for x in rows[r]),
            "pairs_kept": float(np.mean([x["pairs_kept"] for x in rows[r]])),
        }
        if chosen is None and res["grid"][f"{r:g}"]["lost"] == 0:
            chosen = r
    res["validation_farthest"] = farthest
    if chosen is None:
        raise SystemExit("no radius of the grid keeps every validation link; widen --grid")
    res["chosen"] = f"{chosen:g}"
    check = streams((1000, 1001), args.frames)
    if args.data is not None and (args.data / "pets09_s2l1" / "vtest.avi").exists():
        check["PETS gt.txt"] = lambda: pets_frames(args.data, "gt")
        check["PETS det.txt"] = lambda: pets_frames(args.data, "det")
    res["check"] = {}
    for name, make in check.items():
        res["check"][name] = compare(run(make(), None), run(make(), chosen))
        print(name, res["check"][name]["lost"], "lost", flush=True)
    res["seconds"] = time.perf_counter() - start
    text = markdown(res)
    write("bench_pair_radius", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
