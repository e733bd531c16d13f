"""What the ego-motion fit costs, and what a cheaper refinement would change (issue 26: the step beyond the
flow).

The ``pairedge`` features measure motion against the camera's (``egomotion.fit``, method ``affine``):
``cv2.estimateAffinePartial2D`` with RANSAC on ~950 background flow samples, then OpenCV's Levenberg-Marquardt
refinement of the inliers (``refineIters=10``). This benchmark captures the samples of every fit the runtime
makes on held-out scenes and measures, per fit:

* the time of OpenCV's whole fit, of its RANSAC search alone (``refineIters=0``: the same search, the same
  inliers) and of the closed-form least-squares refinement of those inliers (the 4-DoF similarity is linear in
  its parameters ``a, b, tx, ty``, so the least-squares solution is a few sums; :func:`closed_form`);
* how far the closed-form matrix is from OpenCV's, and the camera displacement they predict over the flow
  image;
* the same for a step-by-step replica of OpenCV 5's refinement (:func:`levmarq`: ``cv::LevMarq`` with the
  settings ``estimateAffinePartial2D`` gives it, geodesic acceleration on), and whether it stops after as many
  iterations as OpenCV (OpenCV's count: the fewest ``refineIters`` that give its 10-iteration matrix exactly);
* the features of the ``bench_features_equal.py`` streams (a moving-camera simulator scene, a PETS clip when
  ``--data`` has it) with each refinement swapped in, against OpenCV's: the share of bit-identical values and
  the largest difference, by that benchmark's own comparison (1e-5 relative is its acceptance); and, as the
  floor any reimplementation meets, the features of the *unchanged* code replayed in a process where OpenCV
  may not use AVX, AVX2, FMA3 or POPCNT (``OPENCV_CPU_DISABLE``: what an older x86 CPU runs) on the same
  inputs.

Nothing is chosen here. Writes ``benchmarks/results/bench_ego_refine.json`` / ``.md``::

    python benchmarks/bench_ego_refine.py --data ../shared/data     # about 2 minutes
"""

from __future__ import annotations

import argparse
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_features_equal as equal  # noqa: E402
import pairedge.core.features as features  # noqa: E402
from pairedge.core.features import egomotion  # noqa: E402

RANSAC: dict[str, Any] = egomotion.RANSAC  # the fit the features make


def closed_form(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The least-squares similarity ``dst ~ [[a, -b], [b, a]] src + t`` of (K, 2) point sets, (2, 3)
    float64."""
    s, d = src.astype(np.float64), dst.astype(np.float64)
    ms, md = s.mean(axis=0), d.mean(axis=0)
    sc, dc = s - ms, d - md
    den = float((sc * sc).sum())
    a = float((sc[:, 0] * dc[:, 0] + sc[:, 1] * dc[:, 1]).sum()) / den
    b = float((sc[:, 0] * dc[:, 1] - sc[:, 1] * dc[:, 0]).sum()) / den
    m = np.array([[a, -b, 0.0], [b, a, 0.0]])
    m[:, 2] = md - m[:, :2] @ ms
    return m


def parameters(m: np.ndarray) -> np.ndarray:
    """``(a, b, tx, ty)`` of a (2, 3) similarity ``[[a, -b, tx], [b, a, ty]]`` (inverse of
    :func:`similarity`)."""
    return np.array([m[0, 0], m[1, 0], m[0, 2], m[1, 2]])


def similarity(p: np.ndarray) -> np.ndarray:
    """The (2, 3) matrix ``[[a, -b, tx], [b, a, ty]]`` of the parameters ``(a, b, tx, ty)``."""
    return np.array([[p[0], -p[1], p[2]], [p[1], p[0], p[3]]])


def ransac_start(points: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """OpenCV's RANSAC search alone (``refineIters=0``, the fit's options): its model's parameters and its
    (K,) bool inliers, what every refinement here starts from; None where it finds no model of 2+ inliers."""
    model, mask = cv2.estimateAffinePartial2D(points, dst, refineIters=0, **RANSAC)
    if model is None or mask is None or int(mask.sum()) < 2:
        return None
    return parameters(model), mask.ravel().astype(bool)


def closed_form_fit(points: np.ndarray, vectors: np.ndarray) -> np.ndarray | None:
    """OpenCV's RANSAC search (its inliers), then :func:`closed_form` on the inliers; flow pixels."""
    dst = points + vectors
    start = ransac_start(points, dst)
    if start is None:
        return None
    inliers = start[1]
    return closed_form(points[inliers], dst[inliers])


#: ``cv::LevMarq::Settings`` as ``estimateAffinePartial2D`` builds them in OpenCV 5
#: (``modules/3d/src/ptsetreg.cpp``,
#: ``levmarq.cpp``): the defaults, ``maxIterations = refineIters`` and geodesic acceleration on
LEVMARQ = {
    "lambda": 1e-4,
    "up": 2.0,
    "down": 3.0,
    "min_diag": 1e-6,
    "max_diag": 1e32,
    "max_lambda": 1e32,
    "h_geo": 1e-4,
    "geo_scale": 0.5,
    "tolerance": 1e-6,
}


def _residuals(p: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(2K,) ``[a x - b y + tx - u, b x + a y + ty - v]`` per point, interleaved as OpenCV's callback writes
    them."""
    r = np.empty(2 * len(src))
    r[0::2] = p[0] * src[:, 0] - p[1] * src[:, 1] + p[2] - dst[:, 0]
    r[1::2] = p[1] * src[:, 0] + p[0] * src[:, 1] + p[3] - dst[:, 1]
    return r


def levmarq(p0: np.ndarray, src: np.ndarray, dst: np.ndarray, iterations: int = 10) -> tuple[np.ndarray, int]:
    """OpenCV 5's refinement of the similarity ``(a, b, tx, ty)`` on (K, 2) inliers, step by step: energy
    ``|r|^2``, damping ``lambda diag(J^T J)`` clamped to [1e-6, 1e32], the geodesic correction from a probe at
    ``h = 1e-4`` (kept at half weight when its truncation error is below 1), the step-quality lambda update,
    and the stops (``iterations`` counted over accepted and rejected steps; step norm, gradient or relative
    energy change below 1e-6). Linear solves: numpy's LU where OpenCV uses its SVD. Returns the parameters and
    the iterations made."""
    c = LEVMARQ
    s, d = src.astype(np.float64), dst.astype(np.float64)
    jac = np.zeros((2 * len(s), 4))
    jac[0::2, 0], jac[0::2, 1], jac[0::2, 2] = s[:, 0], -s[:, 1], 1.0
    jac[1::2, 0], jac[1::2, 1], jac[1::2, 3] = s[:, 1], s[:, 0], 1.0
    jtj = jac.T @ jac  # the problem is linear: J does not depend on the parameters
    x = np.asarray(p0, np.float64).copy()
    r = _residuals(x, s, d)
    old, jtb = float(r @ r), jac.T @ r
    lam, up, it, done = c["lambda"], c["up"], 0, False
    small = False
    while not done:
        gradient, diag = float(np.abs(jtb).max()), np.diag(jtj).copy()
        accepted = False
        while not accepted and not done:
            lm_diag = np.clip(diag * lam, c["min_diag"], c["max_diag"])
            system = jtj.copy()
            system[np.diag_indices(4)] = lm_diag + diag
            step = np.linalg.solve(system, -jtb)
            predicted = -0.5 * float(np.sum(step * (jtb - lm_diag * step)))
            step_norm = float(step @ step)
            h = c["h_geo"]
            jtbv = jac.T @ _residuals(x + step * h, s, d)
            geo = np.linalg.solve(system, -(jtbv + jtb * (h - 1.0) + lm_diag * step * h) / (h * h))
            if np.sqrt(float(geo @ geo) / float(step @ step)) < 1.0:
                step = step + geo * c["geo_scale"]
            probe = x + step
            rp = _residuals(probe, s, d)
            energy = float(rp @ rp)
            change = old - energy
            if change < 0:
                lam *= up
                up *= 2.0
            else:
                accepted = True
                lam *= max(1.0 / c["down"], 1.0 - (2.0 * change / predicted - 1.0) ** 3)
                up = c["up"]
                tol = c["tolerance"]
                small = gradient < tol or step_norm < tol or change / energy < tol
                x, old = probe, energy
            it += 1
            done = it >= iterations or lam >= c["max_lambda"] or small
        if not done:
            jtb = jac.T @ _residuals(x, s, d)
    return x, it


def replica(points: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int] | None:
    """OpenCV's RANSAC search (its inliers and its model as the start), then :func:`levmarq`: the parameters
    ``(a, b, tx, ty)`` and the iterations made; flow pixels. None where the search finds no model."""
    start = ransac_start(points, dst)
    if start is None:
        return None
    p0, inliers = start
    return levmarq(p0, points[inliers], dst[inliers])


def replica_fit(points: np.ndarray, vectors: np.ndarray) -> np.ndarray | None:
    """:func:`replica` as a (2, 3) matrix (``egomotion.fit``'s form, flow pixels)."""
    found = replica(points, points + vectors)
    return None if found is None else similarity(found[0])


def opencv_iterations(points: np.ndarray, dst: np.ndarray, full: np.ndarray) -> int:
    """The fewest ``refineIters`` whose matrix equals OpenCV's 10-iteration one exactly (its iteration
    count)."""
    for k in range(1, 10):
        if np.array_equal(cv2.estimateAffinePartial2D(points, dst, refineIters=k, **RANSAC)[0], full):
            return k
    return 10


def capture_fits(
    model: Path, scenes: list[tuple[str, int]], frames: int
) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The (points, vectors, scale) of every affine ego-motion fit the runtime makes on ``scenes``."""
    from pairedge.measure.sim import Scene
    from pairedge.runtime import Deployment

    fits: list[tuple[np.ndarray, np.ndarray, float]] = []
    original = egomotion.fit

    def spy(points: np.ndarray, vectors: np.ndarray, scale: float, method: str) -> np.ndarray:
        if method == "affine" and len(points) >= 3:
            fits.append((points.copy(), vectors.copy(), scale))
        return original(points, vectors, scale, method)

    egomotion.fit = spy
    try:
        for preset, seed in scenes:
            with Deployment(model).load() as pipe:
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


def _worst(opencv: np.ndarray, ours: np.ndarray, points: np.ndarray) -> tuple[float, float]:
    """Largest matrix entry difference, and largest displacement difference over the samples' bounding box
    (px)."""
    (x0, y0), (x1, y1) = points.min(axis=0), points.max(axis=0)
    corners = np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]], np.float64)
    shift = corners @ (opencv[:, :2] - ours[:, :2]).T + (
        opencv[:, 2] - ours[:, 2]
    )  # affine: extremes at corners
    return float(np.abs(opencv - ours).max()), float(np.abs(shift).max())


def measure_fits(fits: list[tuple[np.ndarray, np.ndarray, float]], repeats: int) -> dict[str, Any]:
    """Median times, the largest matrix / displacement differences of each refinement against OpenCV's over
    the captured fits, and how often the replica stops after as many iterations as OpenCV."""
    full, search, closed, replicated = [], [], [], []
    worst = {"closed_form": [0.0, 0.0], "replica": [0.0, 0.0]}
    same_iterations = 0
    for points, vectors, _ in fits:
        dst = points + vectors
        opencv, _ = cv2.estimateAffinePartial2D(points, dst, **RANSAC)
        closed_m, found = closed_form_fit(points, vectors), replica(points, dst)
        if opencv is None or closed_m is None or found is None:
            continue
        mine = {"closed_form": closed_m, "replica": similarity(found[0])}
        full.append(_time_us(repeats, cv2.estimateAffinePartial2D, points, dst, **RANSAC))
        search.append(_time_us(repeats, cv2.estimateAffinePartial2D, points, dst, refineIters=0, **RANSAC))
        closed.append(_time_us(repeats, closed_form_fit, points, vectors) - search[-1])
        replicated.append(_time_us(repeats, replica_fit, points, vectors) - search[-1])
        for name, m in mine.items():
            worst[name] = [max(a, b) for a, b in zip(worst[name], _worst(opencv, m, points), strict=True)]
        same_iterations += opencv_iterations(points, dst, opencv) == found[1]
    return {
        "fits": len(full),
        "samples_median": int(np.median([len(f[0]) for f in fits])) if fits else 0,
        "opencv_us": float(np.median(full)),
        "ransac_search_us": float(np.median(search)),
        "closed_form_refinement_us": float(np.median(closed)),
        "replica_refinement_us": float(np.median(replicated)),
        "max_matrix_difference": worst["closed_form"][0],
        "max_displacement_difference_px": worst["closed_form"][1],
        "replica_max_matrix_difference": worst["replica"][0],
        "replica_max_displacement_difference_px": worst["replica"][1],
        "replica_same_iterations": same_iterations,
    }


#: OpenCV's dispatch limited to what an x86 CPU without AVX runs (the names OpenCV 5 accepts)
NO_AVX = "AVX,AVX2,FMA3,POPCNT"
#: the refinements swapped into ``egomotion.fit`` (flow pixels in, flow pixels out; None: OpenCV's fit
#: instead)
REFINEMENTS: dict[str, Any] = {"closed form": closed_form_fit, "OpenCV 5 replica": replica_fit}


def _swapped(fit: Any) -> Any:
    original = egomotion.fit

    def swapped(points: np.ndarray, vectors: np.ndarray, scale: float, method: str) -> np.ndarray:
        if method != "affine" or len(points) < 3:
            return original(points, vectors, scale, method)
        m = fit(points, vectors)
        if m is None or not np.isfinite(m).all():
            return original(points, vectors, scale, method)
        m[:, 2] /= scale  # as fit does: translation in full-image pixels
        return m

    return swapped


def _drift(new: list[tuple[Any, ...]], old: list[tuple[Any, ...]]) -> dict[str, Any]:
    """``bench_features_equal.compare`` of two recordings of one stream, plus the largest absolute
    difference."""
    res = equal.compare(new, [call[-1] for call in old])
    a = np.concatenate([c[-1][i].ravel() for c in new for i in (1, 2)])
    b = np.concatenate([c[-1][i].ravel() for c in old for i in (1, 2)])
    return {**res, "max_abs_diff": float(np.abs(a.astype(np.float64) - b).max()) if b.size else 0.0}


def _replay(recorded: dict[str, list[tuple[Any, ...]]], disable: str) -> dict[str, list[tuple[Any, ...]]]:
    """The unchanged features replayed on ``recorded``'s inputs in a process whose OpenCV may not use the CPU
    features ``disable`` (``OPENCV_CPU_DISABLE``; "" = none: the control) -- ``bench_features_equal.py
    --replay`` with this installation's feature package."""
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out = Path(tmp) / "inputs.pkl", Path(tmp) / "out.pkl"
        inputs.write_bytes(equal.replay_inputs(recorded))
        env = {**os.environ, "OPENCV_CPU_DISABLE": disable}
        cmd = [
            sys.executable,
            equal.__file__,
            "--replay",
            str(Path(features.__file__).parent),
            str(inputs),
            str(out),
        ]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        rows = pickle.loads(out.read_bytes())
    return {name: [(r,) for r in calls] for name, calls in rows.items()}


def feature_drift(model: Path, data: Path | None, frames: int) -> dict[str, dict[str, Any]]:
    """The features of ``bench_features_equal``'s moving-camera and (with ``data``) PETS streams with each of
    :data:`REFINEMENTS`, and the unchanged ones replayed in another process (a control: bit-identical) and
    under OpenCV without AVX, against OpenCV's: per comparison, per stream, ``bench_features_equal.compare``'s
    figures."""
    sources = {"simulator moving:1000": lambda: equal.sim_frames(frames)}
    if data is not None:
        sources["PETS S2.L1 gt.txt"] = lambda: equal.pets_frames(data, frames)
    reference: dict[str, list[tuple[Any, ...]]] = {}
    for name, make in sources.items():
        equal.record(reference, name, make(), model)
    out: dict[str, dict[str, Any]] = {}
    original = egomotion.fit
    for label, fit in REFINEMENTS.items():
        swapped: dict[str, list[tuple[Any, ...]]] = {}
        egomotion.fit = _swapped(fit)
        try:
            for name, make in sources.items():
                equal.record(swapped, name, make(), model)
        finally:
            egomotion.fit = original
        out[label] = {name: _drift(swapped[name][1:], reference[name][1:]) for name in sources}
    for label, disable in (
        ("OpenCV's fit, replayed in another process (control)", ""),
        (f"OpenCV's fit, OpenCV without {NO_AVX}", NO_AVX),
    ):
        replayed = _replay(reference, disable)
        out[label] = {name: _drift(replayed[name], reference[name][1:]) for name in sources}
    return out


def markdown(r: dict[str, Any]) -> str:
    f = r["fits"]
    lines = [
        "# The ego-motion fit: OpenCV's refinement against a closed-form one and a replica of OpenCV's",
        "",
        f"`{r['command']}` — model `{r['model']}`; scenes {', '.join(f'{p}:{s}' for p, s in r['scenes'])}, "
        f"{r['frames']} frames each (ground-truth boxes, DIS fast flow at the model's scale). Nothing is "
        "chosen.",
        "",
        "| fits | samples (median) | OpenCV fit | of it: RANSAC search | refinement (numpy) | max matrix "
        "difference to OpenCV | max displacement difference | same iteration count as OpenCV |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| closed form | {f['samples_median']} | {f['opencv_us']:.1f} us | {f['ransac_search_us']:.1f} us | "
        f"{f['closed_form_refinement_us']:.1f} us | {f['max_matrix_difference']:.1e} | "
        f"{f['max_displacement_difference_px']:.1e} px | - |",
        f"| OpenCV 5 replica | {f['samples_median']} | {f['opencv_us']:.1f} us | {f['ransac_search_us']:.1f} "
        "us | "
        f"{f['replica_refinement_us']:.1f} us | {f['replica_max_matrix_difference']:.1e} | "
        f"{f['replica_max_displacement_difference_px']:.1e} px | {f['replica_same_iterations']} / "
        f"{f['fits']} |",
        "",
        "The replica makes OpenCV's steps (last column) yet lands about as far from OpenCV's matrix as the "
        "closed form: the geodesic correction divides the rounding of `J^T r` by h^2 = 1e-8, so the last "
        "digits of the refined matrix follow how each sum and linear solve rounds (numpy's LU here, "
        "OpenCV's SVD there). The last rows below are the floor any change meets: OpenCV's own fit, "
        "unchanged code, on a CPU without AVX (after a control that the replay itself changes nothing).",
        "",
        "Features against OpenCV's fit on this CPU (`bench_features_equal.py`'s comparison; its acceptance: "
        "pairs equal and every value within 1e-5 relative):",
        "",
        "| fit | stream | frames | values | pairs equal | bit-identical | max relative difference | max "
        "difference | "
        "within 1e-5 |",
        "|---|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for label, streams in r["features"].items():
        for name, d in streams.items():
            lines.append(
                f"| {label} | {name} | {d['frames']} | {d['values']:,} | "
                f"{'yes' if d['pairs_equal'] else 'no'} | "
                f"{100 * d['bit_identical']:.2f} % | {d['max_rel_diff']:.1e} | {d['max_abs_diff']:.1e} | "
                f"{'yes' if d['pass'] else 'no'} |"
            )
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
        raise SystemExit(
            f"error: no PETS clip at {args.data / 'pets09_s2l1' / 'vtest.avi'}; pass the shared data folder"
        )
    try:
        find_models(args.model)  # refused in one line, before the scenes run
    except PairedgeError as exc:
        raise SystemExit(f"error: {exc}") from None
    cv2.setNumThreads(1)
    scenes = [("static", 1000), ("moving", 1000), ("noisy", 1000)]
    fits = capture_fits(args.model, scenes, args.frames)
    res = {
        "command": "python benchmarks/bench_ego_refine.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "model": str(args.model),
        "scenes": scenes,
        "frames": args.frames,
        "fits": measure_fits(fits, args.repeats),
        "features": feature_drift(args.model, args.data, args.frames),
        "environment": f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"OpenCV {cv2.__version__}",
    }
    text = markdown(res)
    try:
        print("wrote", *write("bench_ego_refine", res, text, args.out))
    except OSError as exc:
        raise SystemExit(f"error: cannot write the results to {args.out}: {exc.strerror or exc}") from None
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
