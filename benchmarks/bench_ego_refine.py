"""What the ego-motion fit costs, and what a cheaper refinement would change (issue 26: the step beyond the flow).

The ``pairedge`` features measure motion against the camera's (``egomotion.fit``, method ``affine``):
``cv2.estimateAffinePartial2D`` with RANSAC on ~950 background flow samples, then OpenCV's Levenberg-Marquardt
refinement of the inliers (``refineIters=10``). This benchmark captures the samples of every fit the runtime
makes on held-out scenes and measures, per fit:

* the time of OpenCV's whole fit, of its RANSAC search alone (``refineIters=0``: the same search, the same
  inliers) and of the closed-form least-squares refinement of those inliers (the 4-DoF similarity is linear in
  its parameters ``a, b, tx, ty``, so the least-squares solution is a few sums; :func:`closed_form`);
* how far the closed-form matrix is from OpenCV's, and the camera displacement they predict over the flow image;
* with the closed form swapped in, the features of the ``bench_features_equal.py`` streams (a moving-camera
  simulator scene, a PETS clip when ``--data`` has it) against OpenCV's: the share of bit-identical values and
  the largest difference, by that benchmark's own comparison (1e-5 relative is its acceptance).

Nothing is chosen here. Writes ``benchmarks/results/bench_ego_refine.json`` / ``.md``::

    python benchmarks/bench_ego_refine.py --data ../shared/data     # about 1 minute
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_features_equal as equal  # noqa: E402
from pairedge.core.features import egomotion  # noqa: E402

RANSAC: dict[str, Any] = egomotion.RANSAC  # the fit the features make


def closed_form(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The least-squares similarity ``dst ~ [[a, -b], [b, a]] src + t`` of (K, 2) point sets, (2, 3) float64."""
    s, d = src.astype(np.float64), dst.astype(np.float64)
    ms, md = s.mean(axis=0), d.mean(axis=0)
    sc, dc = s - ms, d - md
    den = float((sc * sc).sum())
    a = float((sc[:, 0] * dc[:, 0] + sc[:, 1] * dc[:, 1]).sum()) / den
    b = float((sc[:, 0] * dc[:, 1] - sc[:, 1] * dc[:, 0]).sum()) / den
    m = np.array([[a, -b, 0.0], [b, a, 0.0]])
    m[:, 2] = md - m[:, :2] @ ms
    return m


def closed_form_fit(points: np.ndarray, vectors: np.ndarray) -> np.ndarray | None:
    """OpenCV's RANSAC search (its inliers), then :func:`closed_form` on the inliers; flow pixels."""
    dst = points + vectors
    model, mask = cv2.estimateAffinePartial2D(points, dst, refineIters=0, **RANSAC)
    if model is None or mask is None or int(mask.sum()) < 2:
        return None
    inliers = mask.ravel().astype(bool)
    return closed_form(points[inliers], dst[inliers])


def capture_fits(model: Path, scenes: list[tuple[str, int]], frames: int) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The (points, vectors, scale) of every affine ego-motion fit the runtime makes on ``scenes``."""
    from pairedge.core.sim import Scene
    from pairedge.runtime import Pipeline

    fits: list[tuple[np.ndarray, np.ndarray, float]] = []
    original = egomotion.fit

    def spy(points: np.ndarray, vectors: np.ndarray, scale: float, method: str) -> np.ndarray:
        if method == "affine" and len(points) >= 3:
            fits.append((points.copy(), vectors.copy(), scale))
        return original(points, vectors, scale, method)

    egomotion.fit = spy
    try:
        for preset, seed in scenes:
            with Pipeline.load(model) as pipe:
                for f in Scene(preset, seed).frames(frames):
                    pipe.step(f.image, f.truth, f.timestamp)
    finally:
        egomotion.fit = original
    return fits


def _time_us(repeats: int, fn: Any, *args: Any, **kwargs: Any) -> float:
    """Mean microseconds of ``fn(*args, **kwargs)`` over ``repeats`` calls."""
    start = time.perf_counter_ns()
    for _ in range(repeats):
        fn(*args, **kwargs)
    return (time.perf_counter_ns() - start) / repeats / 1000


def measure_fits(fits: list[tuple[np.ndarray, np.ndarray, float]], repeats: int) -> dict[str, Any]:
    """Median times and the largest matrix / displacement differences over the captured fits."""
    full, search, closed = [], [], []
    worst_matrix = worst_px = 0.0
    for points, vectors, _ in fits:
        dst = points + vectors
        opencv, _ = cv2.estimateAffinePartial2D(points, dst, **RANSAC)
        ours = closed_form_fit(points, vectors)
        if opencv is None or ours is None:
            continue
        full.append(_time_us(repeats, cv2.estimateAffinePartial2D, points, dst, **RANSAC))
        search.append(_time_us(repeats, cv2.estimateAffinePartial2D, points, dst, refineIters=0, **RANSAC))
        closed.append(_time_us(repeats, closed_form_fit, points, vectors) - search[-1])
        (x0, y0), (x1, y1) = points.min(axis=0), points.max(axis=0)
        corners = np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]], np.float64)  # the samples' bounding box
        worst_matrix = max(worst_matrix, float(np.abs(opencv - ours).max()))
        shift = corners @ (opencv[:, :2] - ours[:, :2]).T + (opencv[:, 2] - ours[:, 2])  # affine: extremes at corners
        worst_px = max(worst_px, float(np.abs(shift).max()))
    return {"fits": len(full), "samples_median": int(np.median([len(f[0]) for f in fits])) if fits else 0,
            "opencv_us": float(np.median(full)), "ransac_search_us": float(np.median(search)),
            "closed_form_refinement_us": float(np.median(closed)),
            "max_matrix_difference": worst_matrix, "max_displacement_difference_px": worst_px}  # fmt: skip


def feature_drift(model: Path, data: Path | None, frames: int) -> dict[str, Any]:
    """The features of ``bench_features_equal``'s moving-camera and (with ``data``) PETS streams with the closed-form refinement
    against OpenCV's, compared by that benchmark's :func:`compare`."""
    original = egomotion.fit

    def swapped(points: np.ndarray, vectors: np.ndarray, scale: float, method: str) -> np.ndarray:
        if method != "affine" or len(points) < 3:
            return original(points, vectors, scale, method)
        m = closed_form_fit(points, vectors)
        if m is None or not np.isfinite(m).all():
            return original(points, vectors, scale, method)
        m[:, 2] /= scale  # as fit does: translation in full-image pixels
        return m

    sources = {"simulator moving:1000": lambda: equal.sim_frames(frames)}
    if data is not None:
        sources["PETS S2.L1 gt.txt"] = lambda: equal.pets_frames(data, frames)
    out = {}
    for name, make in sources.items():
        a: dict[str, list[tuple[Any, ...]]] = {}
        b: dict[str, list[tuple[Any, ...]]] = {}
        equal.record(a, name, make(), model)
        egomotion.fit = swapped
        try:
            equal.record(b, name, make(), model)
        finally:
            egomotion.fit = original
        res = equal.compare(b[name][1:], [call[-1] for call in a[name][1:]])
        new = np.concatenate([c[-1][i].ravel() for c in b[name][1:] for i in (1, 2)])
        old = np.concatenate([c[-1][i].ravel() for c in a[name][1:] for i in (1, 2)])
        out[name] = {**res, "max_abs_diff": float(np.abs(new.astype(np.float64) - old).max()) if old.size else 0.0}
    return out


def markdown(r: dict[str, Any]) -> str:
    f = r["fits"]
    lines = [
        "# The ego-motion fit: OpenCV's refinement against a closed-form one",
        "",
        f"`{r['command']}` — model `{r['model']}`; scenes {', '.join(f'{p}:{s}' for p, s in r['scenes'])}, "
        f"{r['frames']} frames each (ground-truth boxes, DIS fast flow at the model's scale). Nothing is chosen.",
        "",
        "| fits | samples (median) | OpenCV fit | of it: RANSAC search | closed-form refinement | max matrix "
        "difference | max displacement difference |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {f['fits']} | {f['samples_median']} | {f['opencv_us']:.1f} us | {f['ransac_search_us']:.1f} us | "
        f"{f['closed_form_refinement_us']:.1f} us (numpy) | {f['max_matrix_difference']:.1e} | "
        f"{f['max_displacement_difference_px']:.1e} px |",
        "",
        "Features with the closed-form refinement against OpenCV's (`bench_features_equal.py`'s comparison; its "
        "acceptance: pairs equal and every value within 1e-5 relative):",
        "",
        "| stream | frames | values | pairs equal | bit-identical | max relative difference | max difference | "
        "within 1e-5 |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for name, d in r["features"].items():
        lines.append(f"| {name} | {d['frames']} | {d['values']:,} | {'yes' if d['pairs_equal'] else 'no'} | "
                     f"{100 * d['bit_identical']:.2f} % | {d['max_rel_diff']:.1e} | {d['max_abs_diff']:.1e} | "
                     f"{'yes' if d['pass'] else 'no'} |")  # fmt: skip
    lines += ["", f"Environment: {r['environment']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from pairedge.core.bundled import default_model_dir
    from pairedge.core.errors import PairedgeError
    from pairedge.runtime.loading import find_models

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument("--data", type=Path, default=None, help="the shared data folder (PETS clip)")
    ap.add_argument("--frames", type=int, default=60, help="frames per scene and per feature stream")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per fit")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    if args.frames < 2 or args.repeats < 1:
        ap.error("--frames must be at least 2 and --repeats at least 1")
    if args.data is not None and not (args.data / "pets09_s2l1" / "vtest.avi").is_file():
        raise SystemExit(f"error: no PETS clip at {args.data / 'pets09_s2l1' / 'vtest.avi'}; pass the shared data folder")
    try:
        find_models(args.model)  # refused in one line, before the scenes run
    except PairedgeError as exc:
        raise SystemExit(f"error: {exc}") from None
    cv2.setNumThreads(1)
    scenes = [("static", 1000), ("moving", 1000), ("noisy", 1000)]
    fits = capture_fits(args.model, scenes, args.frames)
    res = {
        "command": "python benchmarks/bench_ego_refine.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": str(args.model), "scenes": scenes, "frames": args.frames,
        "fits": measure_fits(fits, args.repeats), "features": feature_drift(args.model, args.data, args.frames),
        "environment": f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
                       f"OpenCV {cv2.__version__}",
    }  # fmt: skip
    text = markdown(res)
    try:
        print("wrote", *write("bench_ego_refine", res, text, args.out))
    except OSError as exc:
        raise SystemExit(f"error: cannot write the results to {args.out}: {exc.strerror or exc}") from None
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
