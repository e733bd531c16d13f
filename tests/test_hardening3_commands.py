"""Issue 22, third hardening round, for bench / eval / score / export / calibrate / train.

Validate first (simulator work, backends, protocol options, opsets: one line, exit 1, before any work), one
stderr line always (torch warnings folded in, Ray quiet), accuracies labelled with what they count, tables
that print whole at 80 columns, and ``default`` naming the bundled model (never written into).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.apps.cli.app import console
from pairedge.core import limits
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from typer.testing import CliRunner

runner = CliRunner()
SCENE = "sim:static:seeds=2000:frames=8:boxes=truth"


def _one_error_line(res: Any, *needles: str) -> str:
    """The single stderr line of a failed command (exit 1), which must contain every needle."""
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pairedge.apps.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _forbid(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Make ``target`` (module.attribute) fail the test if it is called: the work must not start."""

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError(f"{target} was called: the input should have been refused first")

    monkeypatch.setattr(target, boom)


@pytest.fixture
def width80() -> Iterator[None]:
    """The CLI console at 80 columns, as on a default terminal."""
    before = console._width
    console.width = 80
    try:
        yield
    finally:
        console._width = before


# -- 1. simulator work is bounded before anything is rendered ---------------------------------------------
@pytest.mark.parametrize(
    "data",
    [
        "sim:static:seeds=0-100000000:frames=2",  # seeds (parse_seeds)
        "sim:static+moving:seeds=0-9999:frames=100",  # 2 x 10,000 scenes x 100 frames
        "sim:static:seeds=0-9:frames=100000000",  # frames per scene
    ],
)
def test_eval_refuses_too_much_simulator_work_first(
    data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid(monkeypatch, "pairedge.apps.evaluation.fleet_eval.run_tasks")
    res = runner.invoke(app, ["eval", "default", "--data", data, "--out", str(tmp_path / "o")])
    _one_error_line(res, "ceiling")
    assert not (tmp_path / "o").exists()


def test_eval_frames_option_is_bounded_too(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "eval",
            "default",
            "--data",
            "sim:static:seeds=0-99:frames=2",
            "--frames",
            "100000",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    _one_error_line(res, "10,000,000 frames", "1,000,000")


def test_sim_scenes_counts_presets_times_seeds_times_frames() -> None:
    from pairedge.apps.evaluation.sources import parse_scene
    from pairedge.export.datasets.sim import SimDataset
    from pairedge.export.datasets.training_data import parse_sim_scenes

    sc = parse_sim_scenes("sim:static+moving:seeds=0-9:frames=50", frames=None)
    assert (sc.presets, len(sc.seeds), sc.frames) == (("static", "moving"), 10, 50)
    assert parse_sim_scenes("sim:static:seeds=0:frames=300", frames=1).frames == 1  # eval --frames 1
    with pytest.raises(InputError, match="expected at least 1"):
        parse_sim_scenes("sim:static:seeds=0:frames=0")
    with pytest.raises(InputError, match="boxes=truth"):
        parse_sim_scenes("sim:static:seeds=0:boxes=bogus")
    # 2 presets x 5,000 seeds is the seed ceiling; x 300 frames is 3,000,000 frames
    with pytest.raises(InputError, match="3,000,000 frames"):
        parse_sim_scenes("sim:static+moving:seeds=0-4999")
    with pytest.raises(InputError, match="frames per scene"):
        SimDataset(presets=("static",), seeds=(0,), frames=limits.MAX_SIM_FRAMES + 1)
    with pytest.raises(InputError, match="frames per scene"):
        parse_scene("static:0", limits.MAX_SIM_FRAMES + 1)
    with pytest.raises(InputError, match="at least 1"):
        parse_scene("static:0", 0)


def test_a_raised_ceiling_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.export.datasets.training_data import parse_sim_scenes

    monkeypatch.setattr(limits, "MAX_SIM_TOTAL_FRAMES", 10)
    with pytest.raises(InputError, match="ceiling of 10 in all"):
        parse_sim_scenes("sim:static:seeds=0-5:frames=2")


def test_train_refuses_too_much_simulator_work_before_rendering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    _forbid(monkeypatch, "pairedge.export.datasets.sim.scene_rows")
    for data in ("sim:static+moving:seeds=0-9999", "sim:static:seeds=0:frames=100000000"):
        res = runner.invoke(
            app, ["train", "--data", data, "--spec", "pairedge", "--stage", "1", "--out", str(tmp_path / "t")]
        )
        _one_error_line(res, "ceiling", "--data")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "options",
    [
        ["--scenes", "static:0-100000000"],
        ["--scenes", "static:0-9999"],
        ["--scenes", "static:0", "--frames", "100000000"],
        ["--scenes", "static:0-9999,moving:0-9999", "--frames", "2"],
    ],
)
def test_calibrate_refuses_too_much_simulator_work_first(
    options: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid(monkeypatch, "pairedge.calibration.api.collect_scenes")
    _forbid(monkeypatch, "pairedge.runtime.loading.find_models")
    res = runner.invoke(app, ["calibrate", "default", "--out", str(tmp_path / "c"), *options])
    _one_error_line(res, "ceiling")
    assert not (tmp_path / "c").exists()


def test_collect_scenes_api_is_bounded_too() -> None:
    from pairedge.calibration.collect import collect_scenes

    with pytest.raises(InputError, match="frames per scene"):
        collect_scenes(default_model_dir(), [("static", (0,))], frames=limits.MAX_SIM_FRAMES + 1)
    with pytest.raises(InputError, match="at least 1"):
        collect_scenes(default_model_dir(), [("static", (0,))], frames=0)


# -- 2. accepted and ignored: unknown backends, options of another protocol
# -----------------------------------
@pytest.mark.parametrize(
    ("backends", "needle"),
    [("bogus", "unknown classifier backend 'bogus'"), ("ort-cpu,bogus", "'bogus'"), ("auto", "not 'auto'")],
)
def test_bench_refuses_unknown_backends_before_any_work(
    backends: str, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid(monkeypatch, "pairedge.apps.bench.run.reference_rows")
    res = runner.invoke(app, ["bench", "default", "--backends", backends, "--out", str(tmp_path / "b")])
    _one_error_line(res, "--backends", needle)
    assert not (tmp_path / "b").exists()


def test_bench_options_use_registry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.apps.bench.run import BenchOptions, check_options

    opts, sources = check_options(
        BenchOptions(backends=("ort-cpu", "onnxruntime", "TRT"), precisions=("fp32", "FP16"))
    )
    assert opts.backends == ("onnxruntime", "tensorrt") and opts.precisions == ("fp32", "fp16")
    assert len(sources) == 3
    with pytest.raises(InputError, match="precision"):
        check_options(BenchOptions(precisions=("fp32", "fp8")))
    with pytest.raises(InputError, match="ceiling"):
        check_options(BenchOptions(data="sim:static:seeds=0-9999"))


@pytest.mark.parametrize(
    ("protocol", "options", "owner"),
    [
        ("pairwise", ["--mode", "strict"], "pcp"),
        ("pairwise", ["--threshold", "0.3"], "pcp"),
        ("pcp", ["--tau", "0.7"], "pairwise"),
        ("pcp", ["--labels", "paper3"], "pairwise"),
        ("par", ["--mode", "loose"], "pcp"),
        ("par", ["--tau", "0.5"], "pairwise"),
    ],
)
def test_score_refuses_options_of_another_protocol(
    protocol: str, options: list[str], owner: str, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(
        app, ["score", "-p", protocol, "--pred", "p", "--gold", "g", "--json", str(out), *options]
    )
    _one_error_line(res, options[0], f"only for --protocol {owner}", f"--protocol {protocol}")
    assert not out.exists()


def test_score_pairwise_options_still_apply(tmp_path: Path) -> None:
    """The None defaults keep the documented values: --tau 0.5 given or not is the same report."""
    labels = ["walking_together", "standing_together", "sitting_together"]
    gold, pred = tmp_path / "g.jsonl", tmp_path / "p.jsonl"
    gold.write_text(
        json.dumps({"labels": labels})
        + "\n"
        + json.dumps({"frame": 0, "interactions": [{"ids": [1, 2], "label": "walking_together"}]})
        + "\n"
    )
    pred.write_text(
        json.dumps({"labels": labels})
        + "\n"
        + json.dumps(
            {"frame": 0, "interactions": [{"ids": [1, 2], "label": "walking_together", "p_interact": 0.6}]}
        )
        + "\n"
    )
    reports = []
    for extra in ([], ["--tau", "0.5"], ["--tau", "0.7"]):
        out = tmp_path / f"r{len(reports)}.json"
        res = runner.invoke(
            app,
            ["score", "-p", "pairwise", "--pred", str(pred), "--gold", str(gold), "--json", str(out), *extra],
        )
        assert res.exit_code == 0, res.output
        reports.append(json.loads(out.read_text()))
    assert reports[0] == reports[1] and reports[0]["details"]["tau"] == 0.5
    assert reports[2]["summary"]["pair_recall"] == 0.0  # 0.6 < 0.7: the option is used


# -- 3. export --opset is checked first
# ------------------------------------------------------------------------
@pytest.mark.parametrize("opset", ["-5", "99999", "5", "6", "21"])
def test_export_refuses_an_unsupported_opset_first(
    opset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    _forbid(monkeypatch, "pairedge.export.checkpoint.load_checkpoint")
    res = runner.invoke(
        app, ["export", str(tmp_path / "ckpt"), "--out", str(tmp_path / "m.onnx"), "--opset", opset]
    )
    _one_error_line(res, f"--opset {opset}", "from 7 to 20")
    assert res.stdout == "" and not (tmp_path / "m.onnx").exists()


def test_export_opset_bounds_are_what_the_exporter_supports(tmp_path: Path) -> None:
    """Both ends of the range export and match PyTorch (every architecture:
    tests/export/test_onnx_export.py)."""
    torch = pytest.importorskip("torch")
    import warnings

    from pairedge.export.checkpoint import Checkpoint
    from pairedge.export.models import ModelConfig, build_model
    from pairedge.export.onnx_export import check_opset, export_checkpoint, supported_opsets

    lo, hi = supported_opsets()
    assert (lo, hi) == (7, 20)  # torch's TorchScript exporter: 7..20; ONNX Runtime guarantees >= 7
    with pytest.raises(InputError):
        check_opset(True)
    torch.manual_seed(0)
    config = ModelConfig("stage1_mlp", 4, 2)
    ckpt = Checkpoint(build_model(config), config, 1, ("no", "yes"), "liang2026", "1")
    for opset in (lo, hi):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning reaches the terminal at either end
            result = export_checkpoint(ckpt, tmp_path / f"m{opset}.onnx", opset=opset, check_batches=(1, 5))
        assert result.opset == opset and result.max_abs_diff < 1e-5


# -- 4. one stderr line: torch warnings folded, Ray quiet
# ---------------------------------------------------------
class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned",))


def test_malicious_raw_checkpoint_is_one_stderr_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps(_Evil(), protocol=4))  # torch.load warns about protocol 4, then fails
    for flag in ("--paper-stage1", "--paper-stage2"):
        proc = _cli("export", str(evil), "--out", str(tmp_path / "m.onnx"), flag)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
        assert "torch.load warned: Detected pickle protocol 4" in lines[0]
        assert "pwned" not in proc.stdout + proc.stderr
    assert not (tmp_path / "m.onnx").exists()


def test_malicious_weights_in_a_checkpoint_folder_are_one_line(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import warnings

    from pairedge.export.checkpoint import Checkpoint, save_checkpoint
    from pairedge.export.models import ModelConfig, build_model

    config = ModelConfig("stage1_mlp", 4, 2)
    torch.manual_seed(0)
    ckpt = Checkpoint(build_model(config), config, 1, ("no", "yes"), "liang2026", "1")
    folder = tmp_path / "ckpt"
    save_checkpoint(ckpt, folder)
    (folder / "model.pt").write_bytes(pickle.dumps(_Evil(), protocol=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CLI must not let torch's warning through
        res = runner.invoke(app, ["export", str(folder), "--out", str(tmp_path / "m.onnx")])
    line = _one_error_line(res, "model.pt", "refused to load")
    assert "torch warned" in line and "pwned" not in res.output


def test_stderr_silenced_catches_native_writes() -> None:
    """What Ray's C++ core writes to file descriptor 2 while it runs never reaches the terminal."""
    code = (
        "import os, sys; from pairedge.apps.fleet import _stderr_silenced\n"
        "with _stderr_silenced():\n    os.write(2, b'native noise\\n'); print('py noise', file=sys.stderr)\n"
        "os.write(2, b'after\\n')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and proc.stderr == "after\n", proc.stderr


def test_unreachable_ray_address_is_one_line_in_seconds() -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _cli(
        "eval",
        "default",
        "--data",
        "sim:static:seeds=0:frames=2",
        "--executor",
        "ray",
        "--address",
        f"127.0.0.1:{port}",
        timeout=60,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "cannot reach the Ray cluster" in lines[0] and "refused" in lines[0]


@pytest.mark.slow
def test_ray_eval_failure_is_one_stderr_line(tmp_path: Path) -> None:
    """Every source fails in its Ray task: one error line on stderr, no Ray banner or notice."""
    pytest.importorskip("ray")
    frames = tmp_path / "frames"
    frames.mkdir()
    import cv2

    for k in range(2):
        cv2.imwrite(str(frames / f"{k:06d}.png"), np.zeros((48, 64, 3), np.uint8))
    bad = tmp_path / "det.txt"
    bad.write_text("this is not a MOT file\n")
    proc = _cli(
        "eval",
        "default",
        "--data",
        str(frames),
        "--detections",
        str(bad),
        "--executor",
        "ray",
        "--workers",
        "1",
        "--out",
        str(tmp_path / "o"),
        timeout=240,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: every source failed")


# -- 5. the two accuracies
# --------------------------------------------------------------------------------------
def test_eval_reports_both_accuracies_from_the_same_counts(tmp_path: Path) -> None:
    # 20 frames with simulated detections: some true pairs are reported, others missed
    res = runner.invoke(
        app, ["eval", "default", "--data", "sim:static:seeds=1000:frames=20", "--out", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "eval.json").read_text())
    conf, missing = np.asarray(data["confusion"]), np.asarray(data["missing"])
    s = data["summary"]
    assert s["accuracy"] == pytest.approx(np.trace(conf) / (conf.sum() + missing.sum()))
    assert s["accuracy_scored"] == pytest.approx(np.trace(conf) / conf.sum())
    assert missing.sum() > 0 and s["accuracy"] < s["accuracy_scored"]
    assert "accuracy over true pairs (misses count as wrong)" in res.stdout
    assert "accuracy of scored pairs (misses excluded)" in res.stdout
    md = (tmp_path / "eval.md").read_text()
    assert "| accuracy | accuracy_scored |" in md and "misses count as wrong" in md


def test_score_summary_labels_accuracies(tmp_path: Path) -> None:
    from pairedge.measure.metrics.pairwise.report import ACCURACY_LABELS, DEFINITIONS, scored_accuracy

    assert set(ACCURACY_LABELS) <= set(DEFINITIONS)
    assert scored_accuracy(np.array([[2, 1], [0, 1]])) == pytest.approx(0.75)
    assert np.isnan(scored_accuracy(np.zeros((2, 2), np.int64)))
    labels = ["a", "b"]
    gold, pred = tmp_path / "g.jsonl", tmp_path / "p.jsonl"
    gold.write_text(
        json.dumps({"labels": labels})
        + "\n"
        + json.dumps(
            {"frame": 0, "interactions": [{"ids": [1, 2], "label": "a"}, {"ids": [3, 4], "label": "b"}]}
        )
        + "\n"
    )
    pred.write_text(
        json.dumps({"labels": labels})
        + "\n"
        + json.dumps({"frame": 0, "interactions": [{"ids": [1, 2], "label": "a", "p_interact": 0.9}]})
        + "\n"
    )
    out = tmp_path / "r.json"
    res = runner.invoke(
        app, ["score", "-p", "pairwise", "--pred", str(pred), "--gold", str(gold), "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())["summary"]
    assert summary["accuracy"] == 0.5 and summary["accuracy_scored"] == 1.0  # one of two true pairs missed
    assert ACCURACY_LABELS["accuracy"] in res.stdout and ACCURACY_LABELS["accuracy_scored"] in res.stdout


# -- 6. tables that fit 80 columns, readable when piped
# -------------------------------------------------------
def _fits(text: str, width: int = 80) -> None:
    """Every line fits ``width`` and no cell was cut with an ellipsis."""
    for line in text.splitlines():
        if line[:1] in "┏┃┡│└╇┩┗" or line.strip()[:1] in "┏┃┡│└":
            assert len(line) <= width, line
    assert "…" not in text, text


def test_column_groups_split_a_wide_table_whole() -> None:
    from pairedge.apps.cli.score import column_groups, rich_tables
    from pairedge.measure.metrics.result import Table
    from rich.console import Console

    names = tuple(f"a_long_class_name_{k}" for k in range(8))
    table = Table(
        "confusion", ("gold \\ pred", *names, "missing"), tuple((n, *range(8), 12345) for n in names)
    )
    groups = column_groups(table, 80)
    assert len(groups) > 1 and all(g[0] == 0 for g in groups)
    assert sorted({i for g in groups for i in g}) == list(range(len(table.columns)))
    wide = Console(width=10_000, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    for part in rich_tables(table, 80):
        wide.print(part)
    text = wide.export_text()
    assert all(len(line.rstrip()) <= 80 for line in text.splitlines())
    for name in (*names, "missing", "12345"):
        assert name in text  # every header and value whole, none broken inside a word
    huge = Table("one huge column", ("k", "v"), (("x" * 120, 1.0),))
    narrow = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    for part in rich_tables(huge, 80):
        narrow.print(part)
    assert "".join(narrow.export_text().split()).count("x") == 120  # folded, not cut


def test_score_tables_print_whole_at_80_columns(tmp_path: Path, width80: None) -> None:
    labels = [f"activity_number_{k}_together" for k in range(8)]
    rec = {"frame": 0, "interactions": [{"ids": [2 * k, 2 * k + 1], "label": labels[k]} for k in range(8)]}
    gold = tmp_path / "g.jsonl"
    gold.write_text(json.dumps({"labels": labels}) + "\n" + json.dumps(rec) + "\n")
    res = runner.invoke(app, ["score", "-p", "pairwise", "--pred", str(gold), "--gold", str(gold)])
    assert res.exit_code == 0, res.output
    _fits(res.stdout)
    for name in labels:
        assert name in res.stdout


def test_eval_output_fits_80_columns_and_is_plain_when_piped(tmp_path: Path, width80: None) -> None:
    res = runner.invoke(app, ["eval", "default", "--data", SCENE, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    _fits(res.stdout)
    assert "\r" not in res.stdout and "\x1b" not in res.stdout
    assert "evaluating 1 source(s) (local) ..." in res.stdout
    assert "evaluating 1 source(s) (local): 1 of 1 sources in" in res.stdout


def test_bench_output_fits_80_columns_and_names_registry_backends(tmp_path: Path, width80: None) -> None:
    res = runner.invoke(
        app,
        [
            "bench",
            "default",
            "--backends",
            "ort-cpu",
            "--precisions",
            "fp32",
            "--data",
            SCENE,
            "--repeats",
            "5",
            "--people",
            "2",
            "--out",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    _fits(res.stdout)
    assert "ort-cpu" not in res.stdout and "onnxruntime" in res.stdout
    assert "model: the bundled model pairedge-default" in res.stdout
    assert "\r" not in res.stdout and "\x1b" not in res.stdout
    assert "reference: fp32 pipeline on sim:static:2000 ..." in res.stdout
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["options"]["backends"] == ["onnxruntime"] and data["rows"][0]["backend"] == "onnxruntime"
    assert "accuracy_scored" in data["rows"][0]["accuracy"]
    assert "misses excluded" in data["reference"]["accuracy_definition"]
    assert "| onnxruntime | fp32 |" in (tmp_path / "bench.md").read_text()


# -- 7. 'default' names the bundled model; never written into
# ---------------------------------------------------
def test_eval_and_bench_name_the_bundled_model(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["eval", "default", "--data", "sim:static:seeds=0:frames=3", "--out", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    assert f"model: the bundled model pairedge-default ({default_model_dir()})" in res.stdout


def _tree(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*")}


@pytest.mark.parametrize("where", ["bundled", "inside"])
def test_calibrate_never_writes_into_the_installed_package(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid(monkeypatch, "pairedge.calibration.api.collect_scenes")
    bundled = default_model_dir()
    out = bundled if where == "bundled" else bundled.parent / "calibrated-here"
    before = _tree(bundled.parent)
    res = runner.invoke(app, ["calibrate", "default", "--out", str(out), "--scenes", "static:0"])
    _one_error_line(res, "never writes into the installed package", "pass another --out")
    assert res.stdout == ""  # refused before anything is printed or collected
    assert _tree(bundled.parent) == before and not (bundled.parent / "calibrated-here").exists()


def test_calibrate_api_refuses_the_bundled_folder_too() -> None:
    from pairedge.calibration.api import calibrate

    with pytest.raises(InputError, match="bundled model's folder"):
        calibrate("default", default_model_dir())
