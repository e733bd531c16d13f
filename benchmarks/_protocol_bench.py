"""Scoring speed of the PCP and PAR protocols on random but realistic inputs.

Called by ``benchmarks/bench_metrics.py`` (PCP on 100k people, PAR on 10k frames); also runnable alone::

    python benchmarks/_protocol_bench.py --people 100000 --frames 10000

Only the scoring call is timed (best of ``repeat`` runs after one warm-up); building the inputs is not.
Results are flat dicts of numbers so the caller can print them as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.io.par import ParFrame
from pairedge.core.io.stickmen import StickmenImage
from pairedge.measure.metrics.par import score_frames
from pairedge.measure.metrics.pcp import pcp_loose, pcp_strict

#: A frontal upright stickman (6, 4) at the origin: torso, arms, head (Buffy part order).
_TEMPLATE = np.array(
    [
        [0, 40, 0, 140],
        [-15, 50, -35, 100],
        [15, 50, 35, 100],
        [-35, 100, -40, 150],
        [35, 100, 40, 150],
        [0, 0, 0, 40],
    ],
    dtype=np.float64,
)


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    result = fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def _pcp_inputs(n_people: int, seed: int) -> tuple[list[StickmenImage], list[StickmenImage]]:
    """Images of 1-5 people side by side (Buffy-like sizes), estimates = noisy ground truth, 90 % kept."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=n_people)
    sizes = sizes[np.cumsum(sizes) <= n_people]
    if sizes.sum() < n_people:
        sizes = np.append(sizes, n_people - sizes.sum())
    slot = np.concatenate([np.arange(s) for s in sizes])
    scale = rng.uniform(0.7, 1.4, n_people)[:, None, None]
    offset = np.stack([150 + 250 * slot, rng.uniform(20, 80, n_people)], axis=1)
    gt = _TEMPLATE[None] * scale + np.tile(offset, 2)[:, None, :]
    gt += rng.normal(0, 4, gt.shape)
    est = gt + rng.normal(0, rng.uniform(2, 25, (n_people, 1, 1)), gt.shape)
    est[rng.random((n_people, 6)) < 0.05] = np.nan
    keep = rng.random(n_people) < 0.9
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    gold, pred = [], []
    for k in range(len(sizes)):
        a, b = bounds[k], bounds[k + 1]
        gold.append(StickmenImage(f"{k:06d}", gt[a:b]))
        pred.append(StickmenImage(f"{k:06d}", est[a:b][keep[a:b]]))
    return pred, gold


def bench_pcp(n_people: int, seed: int, repeat: int = 3) -> dict[str, Any]:
    """Loose (official) and strict PCP on ``n_people`` ground-truth people.

    Returns:
        n_people, n_images, seconds (loose, best), items_per_s (people/s, loose), strict_seconds,
        strict_items_per_s, detection_rate, pcp.
    """
    pred, gold = _pcp_inputs(n_people, seed)
    loose_s, loose = _best(lambda: pcp_loose(pred, gold), repeat)
    strict_s, _ = _best(lambda: pcp_strict(pred, gold), repeat)
    return {
        "n_people": n_people,
        "n_images": len(gold),
        "seconds": loose_s,
        "items_per_s": n_people / loose_s,
        "strict_seconds": strict_s,
        "strict_items_per_s": n_people / strict_s,
        "detection_rate": loose.summary["detection_rate"],
        "pcp": loose.summary["pcp"],
    }


def _par_inputs(n_frames: int, seed: int) -> tuple[list[ParFrame], list[ParFrame]]:
    """JRDB-PAR-like frames: 5-30 people, groups of 1-5, raw-logit predictions, 70 % correct grouping."""
    rng = np.random.default_rng(seed)
    gold, pred = [], []
    for k in range(n_frames):
        n = int(rng.integers(5, 31))
        ids = rng.permutation(200)[:n].astype(np.int64)
        cg = np.repeat(np.arange(n), rng.integers(1, 6, n))[:n]
        cp = np.where(rng.random(n) < 0.7, cg, rng.integers(0, n, n))
        gclusters = [ids[cg == c] for c in np.unique(cg)]
        pclusters = [ids[cp == c] for c in np.unique(cp)]
        act = rng.random((n, 27)) < 0.07
        social = rng.random((len(gclusters), 32)) < 0.05
        social[np.arange(len(gclusters)), rng.integers(0, 32, len(gclusters))] = True  # never empty
        glob = rng.random(7) < 0.3
        gold.append(ParFrame(k, ids, act, tuple(gclusters), social, glob))
        pred.append(
            ParFrame(
                k,
                ids,
                rng.normal(0, 0.6, (n, 27)) + 0.8 * act,
                tuple(pclusters),
                rng.normal(0, 0.6, (len(pclusters), 32)),
                rng.normal(0.2, 0.5, 7),
            )
        )
    return pred, gold


def bench_par(n_frames: int, seed: int, repeat: int = 3) -> dict[str, Any]:
    """The official PAR protocol on ``n_frames`` frames.

    Returns:
        n_frames, n_persons, seconds (best), items_per_s (frames/s), persons_per_s, F_a, group_F1.
    """
    pred, gold = _par_inputs(n_frames, seed)
    seconds, report = _best(lambda: score_frames(pred, gold), repeat)
    n_persons = int(sum(len(g.person_ids) for g in gold))
    return {
        "n_frames": n_frames,
        "n_persons": n_persons,
        "seconds": seconds,
        "items_per_s": n_frames / seconds,
        "persons_per_s": n_persons / seconds,
        "F_a": report.summary["F_a"],
        "group_F1": report.summary["group_F1"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    out = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "pcp": bench_pcp(args.people, args.seed, args.repeat),
        "par": bench_par(args.frames, args.seed, args.repeat),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "protocol_bench.json").write_text(json.dumps(out, indent=2) + "\n")
    pcp, par = out["pcp"], out["par"]
    lines = [
        "# PCP and PAR scoring speed (benchmarks/_protocol_bench.py)",
        "",
        f"Best of {args.repeat} runs after a warm-up; inputs built outside the timing. Machine: "
        f"{out['machine']}.",
        "",
        "| protocol | size | best s | items/s |",
        "|---|---|---|---|",
        f"| pcp loose | {pcp['n_people']:,} people, {pcp['n_images']:,} images | {pcp['seconds']:.3f} | "
        f"{pcp['items_per_s']:,.0f} people/s |",
        f"| pcp strict | same | {pcp['strict_seconds']:.3f} | {pcp['strict_items_per_s']:,.0f} people/s |",
        f"| par (official) | {par['n_frames']:,} frames, {par['n_persons']:,} persons | {par['seconds']:.3f} "
        "| "
        f"{par['items_per_s']:,.0f} frames/s |",
        "",
    ]
    (args.out / "protocol_bench.md").write_text("\n".join(lines))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
