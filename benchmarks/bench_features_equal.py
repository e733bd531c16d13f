"""Do the ``pairedge`` features of this tree equal those of an earlier revision? (issue 26: speed without
drift)

The tree's feature kernels are the compiled ones when built (``compiled.implementation()``, printed).

The streaming runtime runs the bundled model's feature spec on

* the latency bench scenes (``bench_runtime.py``: exactly N textured boxes moving at 640 x 480, N = 2, 10,
  100; DIS ``fast`` at scale 0.5),
* a held-out simulator scene with a moving camera (``moving`` preset, seed 1000, ground-truth boxes), and
* a PETS 2009 S2.L1 clip (``vtest.avi`` with the ``mot15/gt/gt.txt`` tracks; ``--data``; skipped when absent),

recording what the extractor is given each frame (boxes, ids, timestamp, the dense flow). A subprocess then
loads the feature modules of the baseline revision (``git show REV:sdk/core/features/*.py``, default: the
commit before the speed-ups) in place of this tree's and replays the same inputs; both sets of pair features
are compared column by column: pairs identical, bit-identical fraction, and the largest relative difference
``|new - old| / max(|old|, 1e-6)``. The acceptance is 1e-5.

Writes ``benchmarks/results/bench_features_equal.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_features_equal.py --data ../shared/data          # about a minute
    python benchmarks/bench_features_equal.py --baseline HEAD~3 --pets-frames 50
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = "b822abf"  # the last commit before the issue-26 speed-ups of sdk/core/features
FEATURES = "sdk/core/features"
TOLERANCE = 1e-5


def record(streams: dict[str, list[tuple[Any, ...]]], name: str, frames: Any, model: Path) -> None:
    """Run the pipeline over ``frames`` ((image, detections, timestamp) items) and keep every extractor call's
    inputs and outputs (as the extractor returned them) under ``name``."""
    from pairedge.runtime import Deployment, FlowConfig, PipelineConfig

    config = PipelineConfig(flow=FlowConfig(preset="fast", scale=0.5))
    calls: list[tuple[Any, ...]] = []
    with Deployment(model, flow="dis").load(config) as pipe:
        extractor = pipe.extractor
        step = extractor.step

        def spy(dets: Any, t: float, size: Any, flow: Any = None, scale: float = 1.0) -> Any:
            out = step(dets, t, size, flow, scale)
            flow_copy = None if flow is None else np.array(flow)
            # copies: the runtime edits stage 2 afterwards (box-shape columns of fixed-ratio detectors)
            kept = (out.pairs.copy(), out.stage1.copy(), out.stage2.copy())
            calls.append(((dets.boxes.copy(), dets.track_ids.copy()), t, size, flow_copy, scale, kept))
            return out

        extractor.step = spy
        for image, dets, t in frames:
            pipe.step(image, dets, t)
        streams[name] = [(dict(extractor.config.__dict__), spec_version(pipe))] + calls


def spec_version(pipe: Any) -> str:
    return str(pipe.models.spec.version)


def sim_frames(count: int) -> Any:
    """A held-out simulator scene of the ``moving`` preset (lawnmower camera: the affine ego-motion path)."""
    from pairedge.measure.sim import Scene

    for f in Scene("moving", 1000).frames(count):
        yield f.image, f.truth, f.timestamp


def pets_frames(data: Path, count: int) -> Any:
    from pairedge.runtime.runner.inputs import FrameSource, read_detections

    root = data / "pets09_s2l1"
    dets = read_detections(root / "mot15" / "gt" / "gt.txt")
    source = FrameSource(root / "vtest.avi")
    for index, image in source:
        if index >= count:
            break
        yield image, dets.get(index), index / source.fps


def replay_inputs(streams: dict[str, list[tuple[Any, ...]]]) -> bytes:
    """The recorded streams without their outputs, pickled for :func:`replay`."""
    return pickle.dumps({k: [v[0]] + [c[:-1] + (None,) for c in v[1:]] for k, v in streams.items()})


def replay_baseline(baseline: str, inputs: Path, out: Path) -> None:
    """Write the baseline's feature modules to a temporary package and replay ``inputs`` in a subprocess."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{baseline}:{FEATURES}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "features"
        pkg.mkdir()
        for name in names:
            if name.endswith(".py"):
                text = subprocess.run(
                    ["git", "show", f"{baseline}:{FEATURES}/{name}"],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                (pkg / name).write_text(text)
        subprocess.run([sys.executable, __file__, "--replay", str(pkg), str(inputs), str(out)], check=True)


def replay(pkg: Path, inputs: Path, out: Path) -> None:
    """(subprocess) Import ``pkg`` as ``pairedge.core.features`` and replay the recorded calls."""
    import importlib.util

    assert not any(m.startswith("pairedge.core.features") for m in sys.modules)
    spec = importlib.util.spec_from_file_location(
        "pairedge.core.features", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["pairedge.core.features"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    from pairedge.core.features import spec_layout
    from pairedge.core.types import Detections

    streams = pickle.loads(inputs.read_bytes())
    results: dict[str, list[tuple[np.ndarray, ...]]] = {}
    for name, (head, *calls) in streams.items():
        config, version = head
        extractor = spec_layout("pairedge", version).make_extractor(config)
        rows: list[tuple[np.ndarray, ...]] = []
        for (boxes, ids), t, size, flow, scale, _ in calls:
            f = extractor.step(Detections.from_arrays(boxes, ids), t, size, flow, scale)
            rows.append((f.pairs, f.stage1, f.stage2))
        results[name] = rows
    out.write_bytes(pickle.dumps(results))


def compare(new: list[tuple[Any, ...]], old: list[tuple[np.ndarray, ...]]) -> dict[str, Any]:
    pairs_equal, values, identical, worst = True, 0, 0, 0.0
    for call, (pairs, s1, s2) in zip(new, old, strict=True):
        new_pairs, new_s1, new_s2 = call[-1]
        pairs_equal &= bool(np.array_equal(new_pairs, pairs))
        for a, b in ((new_s1, s1), (new_s2, s2)):
            values += b.size
            identical += int((a == b).sum())
            if b.size:
                rel = np.abs(a.astype(np.float64) - b) / np.maximum(np.abs(b.astype(np.float64)), 1e-6)
                worst = max(worst, float(rel.max()))
    return {
        "frames": len(new),
        "values": values,
        "pairs_equal": pairs_equal,
        "bit_identical": identical / max(values, 1),
        "max_rel_diff": worst,
        "pass": pairs_equal and worst <= TOLERANCE,
    }


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# pairedge features: this tree vs an earlier revision (issue 26)",
        "",
        f"Baseline `{res['baseline']}`, this tree `{res['head']}` (feature kernels: "
        f"{res['feature_kernels']}); inputs recorded once through the runtime (DIS fast, scale 0.5) and "
        "replayed through both feature implementations. Acceptance: pairs identical and every value within "
        f"{TOLERANCE:g} relative.",
        "",
        "| stream | frames | values | pairs equal | bit-identical | max relative difference | result |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for name, r in res["streams"].items():
        lines.append(
            f"| {name} | {r['frames']} | {r['values']:,} | {'yes' if r['pairs_equal'] else 'NO'} | "
            f"{100 * r['bit_identical']:.2f} % | {r['max_rel_diff']:.1e} | "
            f"{'PASS' if r['pass'] else 'FAIL'} |"
        )
    lines += ["", f"`{res['command']}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--replay"]:
        replay(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    ap.add_argument("--data", type=Path, default=None, help="the shared data folder (PETS clip)")
    ap.add_argument("--frames", type=int, default=40, help="frames per bench scene")
    ap.add_argument("--pets-frames", type=int, default=100)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bench_features_equal")
    args = ap.parse_args(argv)
    from pairedge.apps.bench.measure import boxes_scene
    from pairedge.core.bundled import default_model_dir
    from pairedge.core.features import compiled

    model = default_model_dir()
    streams: dict[str, list[tuple[Any, ...]]] = {}
    start = time.perf_counter()
    for n in (2, 10, 100):
        record(streams, f"bench scene, {n} people", boxes_scene(n, args.frames), model)
    record(
        streams,
        f"simulator moving:1000 (camera motion), {args.frames} frames",
        sim_frames(args.frames),
        model,
    )
    if args.data is not None and (args.data / "pets09_s2l1" / "vtest.avi").exists():
        record(
            streams,
            f"PETS S2.L1 gt.txt, {args.pets_frames} frames",
            pets_frames(args.data, args.pets_frames),
            model,
        )
    with tempfile.TemporaryDirectory() as tmp:
        inputs, outputs = Path(tmp) / "inputs.pkl", Path(tmp) / "outputs.pkl"
        inputs.write_bytes(replay_inputs(streams))
        replay_baseline(args.baseline, inputs, outputs)
        old = pickle.loads(outputs.read_bytes())
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    res = {
        "baseline": args.baseline,
        "head": head.stdout.strip() + (" (+ uncommitted)" if _dirty() else ""),
        "feature_kernels": compiled.implementation(),  # compiled or numpy (PAIREDGE_PAIR_KERNEL=numpy)
        "streams": {name: compare(v[1:], old[name]) for name, v in streams.items()},
        "seconds": round(time.perf_counter() - start, 1),
        "command": "python benchmarks/bench_features_equal.py"
        + ("" if args.data is None else " --data ../shared/data"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    text = markdown(res)
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0 if all(r["pass"] for r in res["streams"].values()) else 1


def _dirty() -> bool:
    status = subprocess.run(
        ["git", "status", "--porcelain", FEATURES], cwd=ROOT, capture_output=True, text=True
    )
    return bool(status.stdout.strip())


if __name__ == "__main__":
    raise SystemExit(main())
