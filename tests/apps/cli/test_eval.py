"""pairedge eval and pairedge bench: real pipelines on simulator scenes, a rendered video, CAD; pooling is
exact."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from pairedge.apps.cli import app
from pairedge.apps.evaluation.evaluate import evaluate
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from pairedge.measure.sim.output import write_scene
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.loading import find_models
from parity_helpers import box_only_toy
from run_demo_helpers import toy_model
from typer.testing import CliRunner

runner = CliRunner()
SCENE = "sim:static:seeds=1000:frames=12:boxes=truth"


def test_eval_cli_writes_json_markdown_png(tmp_path: Path) -> None:
    res = runner.invoke(app, ["eval", str(default_model_dir()), "--data", SCENE, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "eval.json").read_text())
    assert data["sources"] == ["sim:static:1000"] and data["frames"] == 12
    assert 0.0 <= data["summary"]["mpca"] <= 1.0 and data["has_truth"]
    assert (tmp_path / "eval.md").read_text().startswith("# pairedge eval")
    assert (tmp_path / "confusion.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluate_matches_pairedge_score(tmp_path: Path) -> None:
    """evaluate() agrees with an independent run: the runtime's JSON Lines scored by score_files."""
    from pairedge.apps.evaluation.evaluate import evaluate
    from pairedge.core.labels import PAPER3
    from pairedge.measure.metrics.pairwise import score_files
    from pairedge.measure.sim import Scene
    from pairedge.measure.sim.output import pairs_record
    from pairedge.runtime import Pipeline
    from pairedge.runtime.runner.output import JsonlWriter

    report = evaluate(Deployment(default_model_dir(), backend="onnxruntime"), SCENE)
    gold = [json.dumps({"labels": list(PAPER3.classes)})]
    with (
        Pipeline.load(default_model_dir(), "onnxruntime") as pipe,
        JsonlWriter(tmp_path / "p.jsonl", pipe.labels) as w,
    ):
        for f in Scene("static", 1000).frames(12):
            rec = pairs_record(f)
            rec["interactions"] = [i for i in rec["interactions"] if i["label"] in PAPER3.classes]
            gold.append(json.dumps(rec))
            w.write(pipe.step(f.image, f.truth, f.timestamp, frame_index=f.index))
    (tmp_path / "g.jsonl").write_text("\n".join(gold) + "\n")
    want = score_files(tmp_path / "p.jsonl", tmp_path / "g.jsonl").summary
    got = report.summary()
    for key in (
        "accuracy",
        "mpca",
        "macro_f1",
        "pair_precision",
        "pair_recall",
        "pair_f1",
        "group_activity_accuracy",
    ):
        assert got[key] == pytest.approx(want[key], nan_ok=True), key


def test_pool_equals_one_pass_and_round_trips() -> None:
    from pairedge.apps.evaluation.evaluate import EvalReport, evaluate, pool
    from pairedge.apps.evaluation.sources import parse_sources

    sources = parse_sources("sim:static+moving:seeds=1001:frames=10:boxes=truth")
    assert [s.name for s in sources] == ["sim:static:1001", "sim:moving:1001"]
    parts = [evaluate(default_model_dir(), s) for s in sources]
    pooled = pool(parts)
    assert pooled.frames == 20 and pooled.sources == ("sim:static:1001", "sim:moving:1001")
    assert np.array_equal(pooled.confusion, parts[0].confusion + parts[1].confusion)
    assert pooled.stage1 == {k: parts[0].stage1[k] + parts[1].stage1[k] for k in ("tp", "fp", "fn")}
    again = EvalReport.from_dict(json.loads(json.dumps(pooled.to_dict())))
    assert again.summary() == pytest.approx(pooled.summary(), nan_ok=True)
    assert len(pooled.per_source) == 2
    with pytest.raises(InputError, match="one source"):
        evaluate(default_model_dir(), "sim:static+moving:seeds=1:frames=3")


def test_eval_on_video_with_detections_and_gold(tmp_path: Path) -> None:
    sim = tmp_path / "scene"
    res = runner.invoke(
        app, ["simulate", "--preset", "static", "--seed", "3", "--frames", "8", "--out", str(sim)]
    )
    assert res.exit_code == 0, res.output
    video = sim / "video.mp4" if (sim / "video.mp4").exists() else sim / "frames"
    args = [
        "eval",
        str(default_model_dir()),
        "--data",
        str(video),
        "--detections",
        str(sim / "gt" / "gt.txt"),
        "--gold",
        str(sim / "pairs_gt_paper3.jsonl"),
        "--out",
        str(tmp_path / "out"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert data["has_truth"] and data["frames"] == 8 and data["summary"]["pair_f1"] is not None
    res = runner.invoke(
        app, ["eval", str(default_model_dir()), "--data", str(video), "--out", str(tmp_path / "o2")]
    )
    assert res.exit_code == 1 and "--detections" in res.output


def test_png_written_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PNG is drawn with OpenCV (a core dependency): a plain install without matplotlib still gets it."""
    import cv2
    from pairedge.apps.evaluation.evaluate import evaluate
    from pairedge.apps.evaluation.files import write_eval

    report = evaluate(default_model_dir(), "sim:static:seeds=1000:frames=4:boxes=truth")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    files = write_eval(report, tmp_path)
    assert "png_skipped" not in files and files["png"] == str(tmp_path / "confusion.png")
    image = cv2.imread(files["png"], cv2.IMREAD_COLOR)
    assert image is not None and image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert not any("matplotlib" in n for n in json.loads((tmp_path / "eval.json").read_text())["notes"])


@pytest.mark.data
def test_eval_box_only_model_on_cad(tmp_path: Path, shared_data: Path) -> None:
    folder = shared_data / "cad_choi" / "annotations"
    if not folder.is_dir():
        pytest.skip(f"{folder} absent")
    model = tmp_path / "cad_model"
    model.mkdir()
    for stage in (1, 2):
        box_only_toy(model / f"stage{stage}.onnx", stage)
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(sorted(folder.glob("anno*.mat"))[0]),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert data["has_truth"] and data["frames"] > 0 and data["flow"] == "none"
    assert len(data["labels"]) == 8


# -- bench ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fp16_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model plus an fp16 copy (calibration's converter); no int8 files."""
    from pairedge.calibration.fp16 import to_fp16

    folder = tmp_path_factory.mktemp("bench") / "model"
    folder.mkdir()
    for stage in (1, 2):
        shutil.copy(default_model_dir() / f"stage{stage}.onnx", folder)
        onnx.save(
            to_fp16(onnx.load(str(folder / f"stage{stage}.onnx"))), str(folder / f"stage{stage}.fp16.onnx")
        )
    return folder


def test_bench_cli_table_missing_precision_and_recommendation(fp16_folder: Path, tmp_path: Path) -> None:
    args = [
        "bench",
        str(fp16_folder),
        "--precisions",
        "fp32,fp16,int8",
        "--backends",
        "ort-cpu,ort-cuda",
        "--data",
        "sim:static:seeds=2000:frames=8:boxes=truth",
        "--repeats",
        "5",
        "--people",
        "10,2",
        "--out",
        str(tmp_path),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "bench.json").read_text())
    rows = {(r["backend"], r["precision"]): r for r in data["rows"]}
    assert rows[("onnxruntime", "int8")]["status"] == "missing"
    assert rows[("onnxruntime-cuda", "fp32")]["status"] == "unavailable"
    fp32, fp16 = rows[("onnxruntime", "fp32")], rows[("onnxruntime", "fp16")]
    assert fp32["status"] == fp16["status"] == "ok"
    assert fp32["agreement"]["top1"] == 1.0 and fp16["agreement"]["top1"] >= 0.99
    assert set(fp32["stage1_ms"]) == {"1", "64", "512", "4950"} and fp32["stage2_ms"]["4950"]["p50"] > 0
    assert (
        set(fp32["fps"]) == {"2", "10"}
        and fp32["fps"]["10"]["fps"] > 0
        and fp32["fps"]["10"]["pairs_per_frame"] == 45
    )
    stages = fp32["fps"]["10"]["stages_ms"]
    assert {"flow", "features", "stage1", "stage2", "total"} <= set(stages)
    assert stages["total"]["p50"] <= stages["total"]["p90"] <= stages["total"]["p99"]
    assert stages["flow"]["p50"] + stages["features"]["p50"] <= stages["total"]["p99"]
    assert data["memory"]["peak_rss_mib"] > 10 and data["memory"]["gpu_memory_mib"] is None  # no GPU here
    assert data["recommended"]["backend"] == "onnxruntime" and data["recommended"]["precision"] in (
        "fp32",
        "fp16",
    )
    assert "Recommended:" in res.output and data["environment"]["cpu"]
    assert fp32["agreement"]["top1_scope"] == "gated by the fp32 reference"
    main = find_models(default_model_dir()).stage1.metadata.thresholds["p_interact"]
    assert data["reference"]["tau_interact"] == main  # the bundled model's threshold, held over the scene
    assert fp32["comparison"]["top1"]["decision"]["rows"] == fp32["agreement"]["top1_rows"] > 0
    assert fp32["mpca_drop"] == 0.0 and fp32["gate_passed"] and fp32["gate_problems"] == []
    table = res.output[res.output.index("backend  ") :].splitlines()[:8]  # header, rule, 6 rows
    assert all(len(line) <= 80 for line in table), table
    assert [line.split()[:2] for line in table[2:]] == [
        [b, p] for b in ("onnxruntime", "onnxruntime-cuda") for p in ("fp32", "fp16", "int8")
    ]
    assert table[4].split()[-3:] == ["missing", "-", "-"] and table[5].split()[-3:] == ["n/a", "-", "-"]
    md = (tmp_path / "bench.md").read_text()
    assert (
        "| Backend | Precision | Size | accuracy of scored pairs (misses excluded) | MPCA | MPCA drop "
        "(points) | "
        "macro-F1 | stage-1 gate agreement | stage-2 top-1 agreement |"
        in md
        and "missing" in md
    )
    assert "accuracy_scored" in fp32["accuracy"] and "accuracy" not in fp32["accuracy"]
    assert "## Pipeline latency per stage" in md and "| onnxruntime | fp16 | 10 | 45 |" in md
    assert "peak RSS of the bench process" in md
    # the cost figures are calibrate's (pairedge.compare.cost): multiply-adds per pair from the graph
    from pairedge.compare.cost import graph_macs

    for precision, row in (("fp32", fp32), ("fp16", fp16)):
        name = "" if precision == "fp32" else f".{precision}"
        want = {f"stage{k}": graph_macs(fp16_folder / f"stage{k}{name}.onnx") for k in (1, 2)}
        assert (
            row["macs"] == want and want["stage1"]["macs_per_pair"] > 0 and want["stage2"]["int8_share"] == 0
        )
    assert (
        "## Cost per precision" in md
        and f"| onnxruntime | fp16 | {fp16['macs']['stage1']['macs_per_pair']:,} /" in md
    )


@pytest.mark.parametrize("people", ["", "0,10", "10,101", "x", ","])
def test_bench_people_is_checked_first(people: str, tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["bench", str(default_model_dir()), "--people", people, "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 1 and "--people" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_percentiles_and_memory_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from pairedge.apps.bench import measure

    samples = np.random.default_rng(0).gamma(2.0, 1.0, 1001)
    got = measure.percentiles(samples)
    assert got["p90"] == pytest.approx(np.percentile(samples, 90)) and got["mean"] == pytest.approx(
        samples.mean()
    )
    assert got["p50"] < got["p90"] < got["p99"]
    assert measure.peak_rss_mib() > 10
    monkeypatch.setattr("os.getpid", lambda: 4242)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/nvidia-smi")
    out = "4242, 310\n17, 9000\n4242, 2.5\nbad line\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, out, ""))
    assert measure.gpu_memory_mib() == pytest.approx(312.5)
    assert measure.gpu_memory_mib(pid=99) is None
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert measure.gpu_memory_mib() is None


def _row(precision: str, speed: float, passed: bool = True, problems: tuple[str, ...] = ()) -> Any:
    from pairedge.apps.bench.run import BenchRow

    lat = {4950: {"p50": speed, "p99": speed}, 512: {"p50": 0.0, "p99": 0.0}}
    return BenchRow(
        "onnxruntime",
        precision,
        "ok",
        accuracy={"mpca": 0.9, "macro_f1": 0.9},
        agreement={"top1": 1.0, "gate": 1.0},
        stage1_ms=lat,
        stage2_ms=dict(lat),
        mpca_drop=0.0,
        gate_passed=passed,
        gate_problems=list(problems),
    )


def test_recommendation_rules() -> None:
    from pairedge.apps.bench.run import BenchOptions, _apply_speed, recommend

    opts = BenchOptions()
    rows = [_row("fp32", 1.0), _row("fp16", 0.9), _row("int8", 2.0)]
    _apply_speed(rows)
    text, best, notes = recommend(rows, opts)
    assert best == {"backend": "onnxruntime", "precision": "fp16"}
    cpu = [n for n in notes if n.startswith("ONNX Runtime CPU")]
    assert len(cpu) == 1 and "fp32 1.000 ms, fp16 0.900 ms (0.90x fp32), int8 2.000 ms (2.00x fp32)" in cpu[0]
    assert "int8 is SLOWER than fp32 here" in cpu[0] and "quantize / dequantize" in cpu[0]
    rows = [_row("fp32", 1.0), _row("int8", 0.5, False, ("MPCA drops 2.00 points",))]  # faster, fails
    _apply_speed(rows)
    text, best, notes = recommend(rows, opts)
    assert best == {"backend": "onnxruntime", "precision": "fp32"}
    assert "int8 on onnxruntime fails the accuracy gate: MPCA drops 2.00 points" in notes
    rows = [_row("fp32", 1.0), _row("int8", 1.5)]  # passes but slower
    _apply_speed(rows)
    text, best, _ = recommend(rows, opts)
    assert best["precision"] == "fp32" and "int8 also pass(es) but run(s) slower than fp32" in text


def test_gate_is_the_comparators_arithmetic() -> None:
    """score_variant: MPCA drop vs the fp32 reference, gate and top-1 agreement (near-ties excepted)."""
    from pairedge.apps.bench.accuracy import Gate, score_variant
    from pairedge.compare.parity.pack import PairRows

    rng = np.random.default_rng(5)
    n = 400
    z1 = np.stack([np.zeros(n), rng.normal(0, 3, n)], 1).astype(np.float32)
    z2 = rng.normal(0, 2, (n, 3)).astype(np.float32)
    z2[np.arange(n), rng.integers(0, 3, n)] += 4.0  # a clear top-1 on every row
    ref = _rows(PairRows, z1, z2)
    truth = z2.argmax(1)
    scored = np.ones(n, bool)
    same = score_variant(ref, scored, truth, (z1, z2), 0.5)
    assert same.passed and same.mpca_drop == 0.0 and same.reference_mpca == 1.0
    assert same.agreement["top1_rows"] == int((z1[:, 1] >= 0).sum()) and same.agreement["gate"] == 1.0
    worse = z2.copy()
    flip = np.flatnonzero(z1[:, 1] >= 0)[:6]  # 6 gated rows change class
    worse[flip] = np.roll(worse[flip], 1, axis=1)
    v = score_variant(ref, scored, truth, (z1, worse), 0.5, Gate(max_mpca_drop=0.5))
    assert not v.passed and v.agreement["top1"] == pytest.approx(1 - 6 / v.agreement["top1_rows"])
    assert len(v.problems) == 1 and v.problems[0].startswith("stage-2 top-1 agreement")
    v = score_variant(ref, scored, truth, (z1, worse), 0.5, Gate(min_top1_agreement=0.9))
    assert not v.passed and v.mpca_drop > 0.005 and v.problems[0].startswith("MPCA drops")
    tie = z1.copy()
    tie[:8, 1] = 1e-4  # fp32 p_interact 0.500025: near-ties, open
    cand = tie.copy()
    cand[:8, 1] = -1e-4  # the candidate closes them
    v = score_variant(
        _rows(PairRows, tie, z2), scored, truth, (cand, z2), 0.5, Gate(min_gate_agreement=0.999)
    )
    assert v.agreement["gate"] == pytest.approx(1 - 8 / n) and v.agreement["gate_near_tie_disagreements"] == 8
    assert v.agreement["gate_excl_near_ties"] == 1.0 and v.passed


def _rows(cls, z1: np.ndarray, z2: np.ndarray):  # type: ignore[no-untyped-def]
    """A PairRows holding only the logits (features are not used by score_variant)."""
    n = len(z1)
    fields = {f: np.zeros(n) for f in cls.__dataclass_fields__}
    fields.update(stage1_logits=z1, stage2_logits=z2)
    return cls(**fields)


def test_terminal_table_fits_80_columns_with_every_row() -> None:
    """One row per backend x precision, the widest registry name and every status, within 80 columns."""
    from pairedge.apps.bench.run import BenchResult, BenchRow
    from pairedge.apps.bench.table import terminal_lines

    rows = []
    for backend in ("onnxruntime", "onnxruntime-tensorrt", "tensorrt"):
        for precision, status in (("fp32", "ok"), ("fp16", "unavailable"), ("int8", "missing")):
            row = _row(precision, 12.345) if status == "ok" else BenchRow(backend, precision, status, "why")
            row.backend, row.speed_ms = backend, 12.345
            row.agreement.update(gate=0.9912, top1=1.0, gate_near_tie_disagreements=2)
            row.fps[100] = {"fps": 1234.0}
            rows.append(row)
    result = BenchResult(
        "m",
        rows,
        {},
        {"gate": {"max_mpca_drop": 0.005, "min_top1_agreement": 0.99}, "speed_definition": "x"},
        "",
        None,
        [],
        {"people": [100]},
    )
    lines = terminal_lines(result)
    assert len(lines) == 2 + 9 and max(map(len, lines)) <= 80, "\n".join(lines)
    assert lines[2].split() == [
        "onnxruntime",
        "fp32",
        "0.900",
        "0.00",
        "99.12%*",
        "100.00%",
        "PASS",
        "12.345",
        "1234",
    ]
    assert lines[6].split()[:2] == ["onnxruntime-tensorrt", "fp16"] and lines[6].split()[-3:] == [
        "n/a",
        "-",
        "-",
    ]
    assert lines[10].split() == ["tensorrt", "int8", "-", "-", "-", "-", "missing", "-", "-"]


def test_jetson_environment_is_read_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.apps.bench import env

    assert env.jetson() is None or isinstance(env.jetson(), dict)
    release = tmp_path / "nv_tegra_release"
    release.write_text("# R36 (release), REVISION: 4.0\n")
    freq = tmp_path / "cur"
    freq.write_text("1984000\n")
    monkeypatch.setattr(env, "_TEGRA", release)
    monkeypatch.setattr(env, "_CPU_FREQ", freq)
    monkeypatch.setattr(env.shutil, "which", lambda name: None)
    info = env.jetson()
    assert info is not None and info["l4t"].startswith("# R36")
    assert info["power_mode"] == "unreadable (nvpmodel not found)" and info["cpu_clock_mhz"] == 1984.0


def test_bench_refuses_without_fp32_and_bad_model(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", str(default_model_dir()), "--precisions", "int8"])
    assert res.exit_code == 1 and "must include fp32" in res.output
    res = runner.invoke(app, ["bench", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "error:" in res.output and "Traceback" not in res.output


def test_gold_by_frame_groups_rows_of_interleaved_frames(tmp_path: Path) -> None:
    """Per-frame truth keeps each frame's pairs and groups in file order, whatever order the frames come
    in."""
    from pairedge.apps.evaluation.sources import _gold_by_frame

    labels = ["walking_together", "standing_together", "sitting_together"]
    records = [
        {"labels": labels},
        {
            "frame": 2,
            "interactions": [
                {"ids": [3, 4], "label": "sitting_together"},
                {"ids": [1, 2], "label": "walking_together", "p_interact": 0.0},
            ],
            "groups": [{"members": [4, 3], "activity": "sitting_together"}],
        },
        {
            "frame": 0,
            "interactions": [{"ids": [1, 5], "label": "standing_together"}],
            "groups": [{"members": [5, 1, 7], "activity": "standing_together"}, {"members": [2, 9]}],
        },
        {"frame": 1, "interactions": []},
    ]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in records))
    truth = _gold_by_frame(str(gold), labels)
    assert sorted(truth) == [0, 1, 2]
    assert truth[2].pairs.tolist() == [[3, 4], [1, 2]]
    assert truth[2].labels == ("sitting_together", "walking_together")
    assert truth[2].interacting.tolist() == [True, False]
    assert truth[2].groups == (((4, 3), "sitting_together"),)
    assert truth[0].pairs.tolist() == [[1, 5]] and truth[0].groups == (((5, 1, 7), "standing_together"),)
    assert len(truth[1].pairs) == 0 and truth[1].groups == ()


def test_truth_without_interacting_pairs_still_counts_false_positives(tmp_path: Path) -> None:
    """A source whose truth has no interacting pair is scored (its false positives pool), not 'no truth'."""
    from pairedge.apps.evaluation.evaluate import evaluate
    from pairedge.core.errors import FormatError
    from pairedge.measure.metrics.pairwise import score_files

    labels = ["walking_together", "standing_together", "sitting_together"]
    head = json.dumps({"labels": labels}) + "\n"
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    gold.write_text(
        head + json.dumps({"frame": 0, "interactions": [{"ids": [1, 2], "p_interact": 0.0}]}) + "\n"
    )
    pred.write_text(
        head
        + json.dumps(
            {"frame": 0, "interactions": [{"ids": [1, 2], "label": "walking_together", "p_interact": 0.9}]}
        )
        + "\n"
    )
    with pytest.raises(FormatError, match="nothing to score"):
        score_files(pred, gold)  # pairedge score still refuses it
    assert score_files(pred, gold, allow_empty=True).details["stage1"]["fp"] == 1

    from pairedge.runtime import PipelineConfig

    report = evaluate(
        Deployment(default_model_dir(), backend="onnxruntime"),
        "sim:moving:seeds=2000:frames=5",
        config=PipelineConfig(confirm_s=0.0),
    )  # 5 frames: report links at once
    assert report.has_truth and not any("no ground truth" in n for n in report.notes)
    assert report.stage1["tp"] == report.stage1["fn"] == 0 and report.stage1["fp"] > 0


def test_options_a_source_would_ignore_are_refused(tmp_path: Path) -> None:
    """--detections / --gold with a source that brings its own are an error, not silently dropped."""
    from pairedge.apps.evaluation.sources import parse_sources

    with pytest.raises(InputError, match="--gold cannot be used here"):
        parse_sources("sim:static:seeds=0:frames=2", gold=tmp_path / "gold.jsonl")
    with pytest.raises(InputError, match="--detections cannot be used here"):
        parse_sources("sim:static:seeds=0:frames=2", detections=tmp_path / "det.txt")
    res = runner.invoke(
        app,
        [
            "parity",
            "pack",
            str(default_model_dir()),
            "--out",
            str(tmp_path / "p.npz"),
            "--scene",
            "static:0",
            "--gold",
            str(tmp_path / "gold.jsonl"),
        ],
    )
    assert res.exit_code == 1 and "--gold go" in res.output and "with --video" in res.output


def test_eval_refuses_a_bad_model_folder_before_any_source(tmp_path: Path) -> None:
    """The model folder is checked first: one line naming it, not 'every source failed' after the work."""
    res = runner.invoke(app, ["eval", str(tmp_path / "nope"), "--data", SCENE, "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "expected a model directory" in res.output and "every source failed" not in res.output
    fp32_only = tmp_path / "fp32"  # the bundled folder ships int8 files: a folder without them
    fp32_only.mkdir()
    for stage in (1, 2):
        shutil.copy(default_model_dir() / f"stage{stage}.onnx", fp32_only)
    res = runner.invoke(
        app, ["eval", str(fp32_only), "--data", SCENE, "--precision", "int8", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 1 and "int8" in res.output and "every source failed" not in res.output
    assert not (tmp_path / "o").exists()


# -- cli_eval_match_boxes: ``pairedge eval --match-boxes``: a tracker run in an eval job is scored against
# ground truth by box, with the same pair F1 as ``pairedge score --match-boxes`` on a ``pairedge run`` of the
# same video.


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(simulator folder: video.mp4, det/det.txt without ids, gt/gt.txt, pairs_gt_paper3.jsonl; toy model)."""
    root = tmp_path_factory.mktemp("evmb")
    write_scene("static", 3, 24, root / "sim")
    return root / "sim", toy_model(root / "model")


def _eval(sim: Path, model: Path, out: Path, *extra: str) -> dict:
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(sim / "video.mp4"),
            "--detections",
            str(sim / "det" / "det.txt"),
            "--gold",
            str(sim / "pairs_gt_paper3.jsonl"),
            "--out",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return json.loads((out / "eval.json").read_text())


@pytest.mark.parametrize("tracker", ["iou", "botsort"])
def test_eval_and_score_give_the_same_pair_f1(scene: tuple[Path, Path], tmp_path: Path, tracker: str) -> None:
    if tracker != "iou":
        pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    sim, model = scene
    gt = sim / "gt" / "gt.txt"
    report = _eval(sim, model, tmp_path / "eval", "--match-boxes", str(gt), "--tracker", tracker)
    assert any("matched" in n and "gt.txt" in n for n in report["notes"]), report["notes"]
    run = runner.invoke(
        app,
        [
            "run",
            str(sim / "video.mp4"),
            "-d",
            str(sim / "det" / "det.txt"),
            "--model",
            str(model),
            "--tracker",
            tracker,
            "--out",
            str(tmp_path / "run"),
            "--no-video",
        ],
    )
    assert run.exit_code == 0, run.output
    with Deployment(model).load() as pipe:  # the toy model has one threshold (no operating points)
        tau = pipe.tau_interact
    score = runner.invoke(
        app,
        [
            "score",
            "-p",
            "pairwise",
            "--pred",
            str(tmp_path / "run" / "results.jsonl"),
            "--gold",
            str(sim / "pairs_gt_paper3.jsonl"),
            "--match-boxes",
            str(gt),
            "--tau",
            repr(tau),
            "--json",
            str(tmp_path / "score.json"),
        ],
    )
    assert score.exit_code == 0, score.output
    scored = json.loads((tmp_path / "score.json").read_text())["summary"]
    assert report["summary"]["pair_f1"] is not None and report["summary"]["pair_f1"] > 0
    assert report["summary"]["pair_f1"] == pytest.approx(scored["pair_f1"], abs=1e-12)
    assert report["summary"]["pair_precision"] == pytest.approx(scored["pair_precision"], abs=1e-12)


def test_box_matching_changes_the_scores_of_tracker_ids(scene: tuple[Path, Path], tmp_path: Path) -> None:
    """Without --match-boxes the tracker's ids are compared with the truth's as they are."""
    sim, model = scene
    source = parse_sources(
        str(sim / "video.mp4"), detections=sim / "det" / "det.txt", gold=sim / "pairs_gt_paper3.jsonl"
    )[0]
    plain = evaluate(model, source)
    matched = evaluate(model, source, match_boxes=sim / "gt" / "gt.txt")
    assert plain.stage1 != matched.stage1
    assert not any("matched" in n for n in plain.notes)


def test_match_boxes_refusals_are_one_line(scene: tuple[Path, Path], tmp_path: Path) -> None:
    sim, model = scene
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            "sim:static:seeds=1-2:frames=5",
            "--match-boxes",
            str(sim / "gt" / "gt.txt"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1
    assert "--match-boxes: expected one video or ROS 2 log source" in " ".join(res.output.split())
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(sim / "video.mp4"),
            "--detections",
            str(sim / "det" / "det.txt"),
            "--match-boxes",
            str(sim / "det" / "det.txt"),
            "--out",
            str(tmp_path / "o2"),
        ],
    )
    # a detection file (id -1) is not a ground truth of boxes: refused before the run
    assert res.exit_code == 1 and "error:" in res.output and not (tmp_path / "o2" / "eval.json").exists()
