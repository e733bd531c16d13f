"""Helpers of bench_calibrate.py: parity of a calibrated folder on rows, latency, the CAD box-only model."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.collect import Collected
from pairedge.calibration.infer import agreement, logits, session
from pairedge.metrics.pairwise import classification_metrics

PRECISIONS = ("fp16", "int8")
SIZES = (1, 64, 512, 4950)


def save_rows(path: Path, rows: Collected) -> None:
    """Cache collected rows as an .npz (no pickles)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {"sources": np.asarray(rows.sources)}
    for key, st in (("s1", rows.stage1), ("s2", rows.stage2)):
        for field in ("X", "cls", "truth", "motion", "group"):
            arrays[f"{key}_{field}"] = getattr(st, field)
        if st.gated is not None:
            arrays[f"{key}_gated"] = st.gated
        arrays[f"{key}_labels"] = np.asarray(st.labels)
    np.savez(path, **arrays)


def load_rows(path: Path) -> Collected:
    from pairedge.calibration.samples import StageSamples

    z = np.load(path, allow_pickle=False)
    parts = [
        StageSamples(s, z[f"s{s}_X"], z[f"s{s}_cls"], z[f"s{s}_truth"], z[f"s{s}_motion"], z[f"s{s}_group"],
                     tuple(str(v) for v in z[f"s{s}_labels"]), z[f"s{s}_gated"] if f"s{s}_gated" in z else None)  # fmt: skip
        for s in (1, 2)
    ]
    return Collected(parts[0], parts[1], tuple(str(v) for v in z["sources"]))


def _float_nodes(folder: Path) -> int:
    """Gemms of both stages without Q/DQ (computing in fp16 / fp32 on TensorRT)."""
    import json

    report = json.loads((folder / "calibration.json").read_text())
    return sum(len(st.get("float_nodes", {}).get("gemms_in_float", st["excluded_nodes"]))
               for st in report["stages"].values())  # fmt: skip


def parity_checks(model: Path, folder: Path, scenes: list[str], work: Path, frames: int = 60) -> dict[str, Any]:
    """``parity pack`` of each held-out scene (fp32 ``model``) and ``parity check`` of ``folder``'s int8 / fp16."""
    from pairedge.evaluation.sources import parse_scene
    from pairedge.runtime.parity import CheckOptions, check_pack
    from pairedge.runtime.parity.build import build_pack

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for scene in scenes:
        pack = work / f"{scene.replace(':', '_')}-{frames}.npz"
        if not pack.is_file():
            build_pack(model, parse_scene(scene, frames, "detections"), pack, frames=frames)
        for precision in ("int8", "fp16"):
            report = check_pack(pack, folder, CheckOptions(backend="onnxruntime", precision=precision))
            levels = {lv.name: lv for lv in report.levels}
            logit, label = levels["logits"].metrics, levels["labels"].metrics
            out[f"{scene}/{precision}"] = {
                "passed": bool(report.passed),
                "verdict": report.verdict(),
                "failing": [lv.name for lv in report.levels if lv.status == "FAIL"],
                "stage2_logit_max": logit.get("stage2", {}).get("max"),
                "stage2_logit_p99": logit.get("stage2", {}).get("p99"),
                "gate_agreement": label.get("gate_agreement"),
                "top1_agreement": label.get("top1_agreement"),
                "top1_pairs": label.get("top1_pairs"),
            }
    return out


def _tau(folder: Path) -> float:
    from pairedge.runtime.loading import find_models

    return find_models(folder).threshold("p_interact")


def evaluate(folder: Path, rows: Collected) -> dict[str, Any]:
    """Per precision: stage-1 gate and stage-2 top-1 agreement with fp32, logit errors, MPCA vs truth."""
    tau = _tau(folder)
    out: dict[str, Any] = {}
    ref = {s: logits(session(folder / f"stage{s}.onnx"), st.X) for s, st in ((1, rows.stage1), (2, rows.stage2))}
    truth = rows.stage2.truth
    known = truth >= 0
    n_classes = len(rows.stage2.labels)
    fp32_mpca = classification_metrics(truth[known], ref[2][known].argmax(1), num_classes=n_classes).mpca
    for precision in PRECISIONS:
        entry: dict[str, Any] = {}
        for s, st in ((1, rows.stage1), (2, rows.stage2)):
            got = logits(session(folder / f"stage{s}.{precision}.onnx"), st.X)
            entry[f"stage{s}"] = agreement(s, ref[s], got, tau).to_dict()
            if s == 2:
                mpca = classification_metrics(truth[known], got[known].argmax(1), num_classes=n_classes).mpca
                entry["mpca"] = float(mpca)
                entry["mpca_drop_points"] = 100.0 * float(fp32_mpca - mpca)
        out[precision] = entry
    out["int8"]["float_nodes"] = _float_nodes(folder)
    out["fp32_mpca"] = float(fp32_mpca)
    out["truth_rows"] = int(known.sum())
    return out


def latency(folder: Path, rows: Collected, repeats: int = 30) -> dict[str, Any]:
    """Median and p90 ms per call of each stage and precision at 1 / 64 / 512 / 4950 pairs (one thread)."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for s, st in ((1, rows.stage1), (2, rows.stage2)):
        for precision in ("fp32", *PRECISIONS):
            name = f"stage{s}.onnx" if precision == "fp32" else f"stage{s}.{precision}.onnx"
            sess = session(folder / name, threads=1)
            for n in SIZES:
                X = np.ascontiguousarray(st.X[rng.integers(0, len(st.X), size=n)])
                feed = {"features": X}
                for _ in range(3):
                    sess.run(None, feed)
                reps = repeats if n < 4950 else max(10, repeats // 3)
                times = []
                for _ in range(reps):
                    t = time.perf_counter_ns()
                    sess.run(None, feed)
                    times.append((time.perf_counter_ns() - t) / 1e6)
                out[f"stage{s}/{precision}/{n}"] = {"p50": float(np.median(times)), "p90": float(np.percentile(times, 90))}
    return out


def cad_model(annotations: Path, work: Path, epochs: int = 15) -> dict[str, Any]:
    """Train a box-only model on 3/4 of the CAD sequences, calibrate on them, check on the rest."""
    from pairedge.calibration.api import CalibrateOptions, calibrate
    from pairedge.calibration.collect import collect_npz
    from pairedge.datasets.cad import cad_features
    from pairedge.export.onnx_export import export_checkpoint
    from pairedge.export.train import TrainConfig, checkpoint_of, train
    from pairedge.io.cad import read_cad_dir
    from pairedge.modelfolder import register_files
    from pairedge.runtime.loading import find_models

    sequences = read_cad_dir(annotations)
    names = sorted({f"cad{s.sequence or 0:02d}" for s in sequences})
    test_names = set(names[3::4])  # every 4th sequence held out
    train_seqs = [s for s in sequences if f"cad{s.sequence or 0:02d}" not in test_names]
    test_seqs = [s for s in sequences if f"cad{s.sequence or 0:02d}" in test_names]
    model = work / "model"
    model.mkdir(parents=True)
    files = {}
    t0 = time.perf_counter()
    for stage in (1, 2):
        data = cad_features(train_seqs, stage=stage)
        result = train(data, TrainConfig(epochs=epochs, patience=5, samples_per_epoch=20000), progress=False)
        export_checkpoint(checkpoint_of(result, data), model / f"stage{stage}.onnx")
        data.save(work / f"train_stage{stage}.npz")
        cad_features(test_seqs, stage=stage).save(work / f"test_stage{stage}.npz")
        files[f"stage{stage}.onnx"] = f"stage{stage}"
    register_files(model, files)
    trained = time.perf_counter() - t0
    models = find_models(model)
    labels = {1: tuple(models.stage1.labels), 2: tuple(models.stage2.labels)}
    train_npz = [work / "train_stage1.npz", work / "train_stage2.npz"]
    out = {"train_sequences": sorted(set(names) - test_names), "test_sequences": sorted(test_names),
           "train_seconds": round(trained), "methods": {}}  # fmt: skip
    test_rows = collect_npz([work / "test_stage1.npz", work / "test_stage2.npz"], models.spec, labels)
    for method in ("minmax", "entropy", "percentile"):
        res = calibrate(model, work / f"cal-{method}", CalibrateOptions(method=method, features=tuple(train_npz)))
        out["methods"][method] = {
            "test": evaluate(res.out, test_rows),
            "excluded_nodes": {k: v["excluded_nodes"] for k, v in res.report["stages"].items()},
            "warnings": res.warnings,
        }
        print(f"  CAD {method}: test stage-2 agreement {out['methods'][method]['test']['int8']['stage2']['agreement']:.4f}")
    out["rows"] = {"train": [int(np.load(p)["y"].shape[0]) for p in train_npz], "test": [len(test_rows.stage1),
                   len(test_rows.stage2)]}  # fmt: skip
    return out


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.2f} %"


def _line(name: str, e: dict[str, Any], precision: str) -> str:
    p = e[precision]
    return (f"| {name} | {precision} | {_pct(p['stage1']['agreement'])} | {_pct(p['stage2']['agreement'])} | "
            f"{p['stage2']['max_abs_logit_error']:.3g} | {e['fp32_mpca']:.4f} | {p['mpca']:.4f} | "
            f"{p['mpca_drop_points']:+.2f} |")  # fmt: skip


HEADER = ["| set | precision | stage-1 gate agreement | stage-2 top-1 agreement | stage-2 max abs logit error | "
          "fp32 MPCA | MPCA | MPCA drop (points) |", "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip


def markdown(r: dict[str, Any], targets: dict[str, float]) -> str:
    d = r["default"]
    lines = ["# bench_calibrate: INT8 / FP16 parity and latency", "", f"Command: `{r['command']}`", "",
             f"Bundled model `{d['model']}`. Calibration sets: "
             + "; ".join(f"**{k}** `{v}`" for k, v in d["calibration_sets"].items())
             + f". Selection seeds {d['selection_seeds']}, test seeds {', '.join(d['test_seeds'])} (presets "
             f"{', '.join(d['presets'])}, {d['frames']} frames; none used for training, calibration or a choice). "
             f"Default options: {d['default_options']}. Targets: {targets}.", "",
             "## Selection of the default (README calibration set, every Gemm int8; selection seeds only)", "",
             "| candidate | stage-1 agreement | stage-2 agreement | stage-2 max abs logit error | MPCA drop |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, e in d["selection"].items():
        i = e["int8"]
        lines.append(f"| {name} | {_pct(i['stage1']['agreement'])} | {_pct(i['stage2']['agreement'])} | "
                     f"{i['stage2']['max_abs_logit_error']:.3g} | {i['mpca_drop_points']:+.2f} |")  # fmt: skip
    for seeds in d["test_seeds"]:
        lines += ["", f"## Headline: test seeds {seeds}", "", *HEADER]
        for name, v in d["results"].items():
            for precision in ("int8", "fp16"):
                if precision == "fp16" and not name.endswith("/default"):
                    continue
                lines.append(_line(name, v["test"][seeds], precision))
    lines += ["", "Gemms kept in float (no Q/DQ; fp16 on TensorRT) per variant:", ""]
    lines += [f"- {name}: {v['float_nodes']}" for name, v in d["results"].items()]
    lines += ["", f"## parity check on held-out packs ({d['packs']}, 60 frames, default tolerances)", "",
              "| calibration set | pack / precision | verdict | failing levels | stage-2 logit max / p99 | gate agreement | "
              "top-1 agreement (pairs) |", "|---|---|---|---|---:|---:|---:|"]  # fmt: skip
    for name, v in d["results"].items():
        for key, c in v.get("parity", {}).items():
            lines.append(f"| {name} | {key} | {'PASS' if c['passed'] else 'FAIL'} | {', '.join(c['failing']) or '-'} | "
                         f"{c['stage2_logit_max']:.3g} / {c['stage2_logit_p99']:.3g} | {_pct(c['gate_agreement'])} | "
                         f"{_pct(c['top1_agreement'])} ({c['top1_pairs']}) |")  # fmt: skip
    lines += ["", "## Latency, ONNX Runtime CPU, one thread (ms per call, p50 / p90; readme/default)", "",
              "| stage | precision | 1 | 64 | 512 | 4950 |", "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    lat = d["latency_ms"]
    for stage in (1, 2):
        for precision in ("fp32", "fp16", "int8"):
            cells = [f"{lat[f'stage{stage}/{precision}/{n}']['p50']:.3f} / {lat[f'stage{stage}/{precision}/{n}']['p90']:.3f}"
                     for n in SIZES]  # fmt: skip
            lines.append(f"| {stage} | {precision} | " + " | ".join(cells) + " |")
    cad = r.get("cad")
    if cad and "methods" in cad:
        lines += ["", "## Box-only model on Collective Activity (trained here)", "", *HEADER]
        for method, m in cad["methods"].items():
            lines.append(_line(f"CAD {method}", m["test"], "int8"))
    lines += ["", f"Total {r['seconds']} s. Environment: {r['environment']}", ""]
    return "\n".join(lines)


def pipeline_agreement(
    folders: dict[str, tuple[Path, str]], presets: list[str], seeds: tuple[int, ...], frames: int
) -> dict[str, Any]:
    """What a robot sees: every pipeline steps the same simulated frames; compare with fp32 per pair-frame.

    ``folders``: name -> (model folder, precision). Returns per name the stage-1 gate agreement over all
    scored pair-frames and the stage-2 label agreement over the pair-frames both pipelines gated (labels after
    the runtime's temporal smoothing).
    """
    from pairedge.runtime import Pipeline
    from pairedge.sim import simulate

    counts = {name: np.zeros(4, np.int64) for name in folders}  # gate same, pairs, label same, both gated
    reference_folder = next(iter(folders.values()))[0]
    for preset in presets:
        for seed in seeds:
            ref = Pipeline.load(reference_folder, backend="onnxruntime")
            pipes = {n: Pipeline.load(f, precision=p, backend="onnxruntime") for n, (f, p) in folders.items()}
            for frame in simulate(preset, seed=int(seed), frames=frames):
                r = ref.step(frame.image, frame.detections, frame.timestamp)
                for name, pipe in pipes.items():
                    c = pipe.step(frame.image, frame.detections, frame.timestamp)
                    if not np.array_equal(c.pairs, r.pairs):
                        continue  # cannot happen (same frames, same features); skip defensively
                    both = c.interacting & r.interacting
                    counts[name] += [int((c.interacting == r.interacting).sum()), len(r.pairs),
                                     int((c.label_ids[both] == r.label_ids[both]).sum()), int(both.sum())]  # fmt: skip
            for pipe in (ref, *pipes.values()):
                pipe.close()
    return {
        name: {"gate_agreement": float(c[0] / max(c[1], 1)), "pair_frames": int(c[1]),
               "label_agreement": float(c[2] / max(c[3], 1)), "gated_pair_frames": int(c[3])}  # fmt: skip
        for name, c in counts.items()
    }
