"""Model integrity at export and load: non-finite weights, malformed checkpoints and configs, the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from pairedge.apps.cli import app  # noqa: E402
from pairedge.core.errors import ModelError, ModelIntegrityError  # noqa: E402
from pairedge.core.labels import STAGE1  # noqa: E402
from pairedge.core.modelfolder import read_manifest  # noqa: E402
from pairedge.export.checkpoint import Checkpoint, load_checkpoint, save_checkpoint  # noqa: E402
from pairedge.export.models import ModelConfig, build_model  # noqa: E402
from paper_checkpoints import paper_stage1  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

runner = CliRunner()


def _paper_stage2(path: Path) -> Path:
    torch.manual_seed(1)
    model = build_model(ModelConfig("residual_mlp", 10, 3, hidden=(256, 128), dropout=0.3))
    state = {f"network.{k}": v for k, v in model.network.state_dict().items()}
    stats = {"mean": np.zeros(10), "std": np.ones(10), "n_samples": 5}
    torch.save({"model_state_dict": state, "config": {}, "normalization_stats": stats}, path)
    return path


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_export_refuses_non_finite_weights(tmp_path: Path, poison: float) -> None:
    ckpt = paper_stage1(tmp_path / "s1.pth", poison)
    out = tmp_path / "m" / "stage1.onnx"
    line = _one_line_error(["export", str(ckpt), "--paper-stage1", "--out", str(out)])
    assert "non-finite weights" in line and "classifier.3.weight (1 of 512)" in line
    assert not out.exists()


def test_export_of_text_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.pth"
    bad.write_text("hello\n")
    for flag in ("--paper-stage1", "--paper-stage2"):
        line = _one_line_error(["export", str(bad), flag, "--out", str(tmp_path / "x.onnx")])
        assert "not a PyTorch checkpoint" in line and "t.pth" in line
    truncated = tmp_path / "cut.pth"
    truncated.write_bytes(paper_stage1(tmp_path / "ok.pth").read_bytes()[:300])
    line = _one_line_error(["export", str(truncated), "--paper-stage1", "--out", str(tmp_path / "x.onnx")])
    assert "corrupt or truncated" in line


def _pairedge_checkpoint(folder: Path) -> Path:
    torch.manual_seed(0)
    config = ModelConfig("stage1_mlp", 7, 2)
    ckpt = Checkpoint(
        model=build_model(config).eval(),
        config=config,
        stage=1,
        labels=STAGE1.classes,
        feature_spec="liang2026",
        feature_spec_version="1",
        thresholds={"p_interact": 0.5},
    )
    save_checkpoint(ckpt, folder)
    return folder


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ([], "expected a JSON object"),
        ({"labels": "abc"}, "pairedge.labels"),
        ({"labels": 5}, "pairedge.labels"),
        ({"labels": ["x", "x"]}, "unique"),
        ({"norm_mean": ["x"] * 7}, "norm_mean"),
        ({"thresholds": {"p_interact": "abc"}}, "thresholds"),
        ({"thresholds": {"p_interact": -1}}, "thresholds"),
        ({"stage": "one"}, "stage"),
        ({"model": []}, "'model'"),
        ({"model": {"architecture": "nope"}}, "'model'"),
    ],
)
def test_malformed_model_json_is_one_line(tmp_path: Path, patch: object, needle: str) -> None:
    folder = _pairedge_checkpoint(tmp_path / "ckpt")
    doc = json.loads((folder / "model.json").read_text())
    doc = patch if isinstance(patch, list) else {**doc, **patch}
    (folder / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="model.json") as info:
        load_checkpoint(folder)
    assert needle in str(info.value) and "\n" not in str(info.value)
    line = _one_line_error(["export", str(folder), "--out", str(tmp_path / "x.onnx")])
    assert needle in line


def test_model_json_with_too_long_an_integer_is_a_model_error(tmp_path: Path) -> None:
    folder = _pairedge_checkpoint(tmp_path / "ckpt")
    (folder / "model.json").write_text('{"stage": ' + "9" * 5000 + "}")  # beyond int()'s digit limit
    with pytest.raises(ModelError, match="not a readable JSON checkpoint config"):
        load_checkpoint(folder)


def test_pairedge_checkpoint_with_nan_weights_is_refused(tmp_path: Path) -> None:
    folder = _pairedge_checkpoint(tmp_path / "ckpt")
    state = torch.load(folder / "model.pt", weights_only=True)
    key = next(k for k in state if k.endswith("weight"))
    state[key][0, 0] = float("nan")
    torch.save(state, folder / "model.pt")
    with pytest.raises(ModelError, match="non-finite weights"):
        load_checkpoint(folder)


def test_export_writes_the_manifest_and_load_verifies_it(tmp_path: Path) -> None:
    from pairedge.runtime import Pipeline

    folder = tmp_path / "model"
    for stage, make in ((1, paper_stage1), (2, _paper_stage2)):
        ckpt = make(tmp_path / f"s{stage}.pth")
        result = runner.invoke(
            app, ["export", str(ckpt), f"--paper-stage{stage}", "--out", str(folder / f"stage{stage}.onnx")]
        )
        assert result.exit_code == 0, result.output
        assert "manifest.json" in result.output.replace("\n", "")
    manifest = read_manifest(folder)
    assert manifest is not None and {e.role for e in manifest.files.values()} == {"stage1", "stage2"}
    assert manifest.feature_spec == "liang2026" and len(manifest.labels) == 3
    with Pipeline.load(folder, "onnxruntime", flow="none") as pipe:
        assert pipe.models.verified
    data = bytearray((folder / "stage1.onnx").read_bytes())
    data[len(data) // 2] ^= 0x04  # one bit in the weights
    (folder / "stage1.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError, match="stage1.onnx.*expected SHA-256"):
        Pipeline.load(folder, "onnxruntime", flow="none")
    other = runner.invoke(app, ["export", str(ckpt), "--paper-stage2", "--out", str(tmp_path / "loose.onnx")])
    assert other.exit_code == 0 and "not recorded in a model manifest" in other.output.replace("\n", " ")
    assert not (tmp_path / "manifest.json").exists()


def test_onnx_with_non_finite_initializer_is_refused_on_load(tmp_path: Path) -> None:
    from pairedge.runtime.backends.model import load_model

    ckpt = paper_stage1(tmp_path / "s1.pth")
    out = tmp_path / "stage1.onnx"
    assert runner.invoke(app, ["export", str(ckpt), "--paper-stage1", "--out", str(out)]).exit_code == 0
    load_model(out, stage=1)
    proto = onnx.load(str(out))
    init = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    values = onnx.numpy_helper.to_array(init).copy()
    values.flat[3] = np.inf
    init.CopyFrom(onnx.numpy_helper.from_array(values, init.name))
    onnx.save(proto, str(out))
    with pytest.raises(ModelError, match=f"non-finite weights.*{init.name}"):
        load_model(out, stage=1)


@pytest.mark.parametrize(("flag", "wrap"), [(None, True), ("--panoramic", True), ("--no-panoramic", False)])
def test_paper_stage1_carries_its_wrap_setting_to_the_runtime(
    tmp_path: Path, flag: str | None, wrap: bool
) -> None:
    from pairedge.core.features.liang2026 import stage1_features
    from pairedge.core.types import Detections
    from pairedge.runtime import Pipeline

    folder = tmp_path / "model"
    args = [
        "export",
        str(paper_stage1(tmp_path / "s1.pth")),
        "--paper-stage1",
        "--out",
        str(folder / "stage1.onnx"),
    ]
    result = runner.invoke(app, args + ([flag] if flag else []))
    assert result.exit_code == 0, result.output
    assert f"'wrap': {wrap}" in result.output
    args2 = [
        "export",
        str(_paper_stage2(tmp_path / "s2.pth")),
        "--paper-stage2",
        "--out",
        str(folder / "stage2.onnx"),
    ]
    assert runner.invoke(app, args2).exit_code == 0
    with Pipeline.load(folder, "onnxruntime", flow="none") as pipe:
        assert pipe.extractor.config.wrap is wrap
        # two people near opposite image edges: 1,000 px apart unwrapped, 200 px wrapped
        boxes = np.array([[50.0, 100.0, 40.0, 120.0], [1050.0, 100.0, 40.0, 120.0]])
        dets = Detections(boxes=boxes, scores=np.ones(2), track_ids=np.array([1, 2]))
        feats = pipe.extractor.step(dets, 0.0, (1200, 480))
        want = stage1_features(boxes[:1], boxes[1:], 1200, 480, wrap=wrap)
        np.testing.assert_allclose(feats.stage1, want, atol=1e-6)
        assert feats.stage1[0, 2] == pytest.approx((200 if wrap else 1000) / 1200, abs=1e-6)


def test_panoramic_needs_paper_stage1(tmp_path: Path) -> None:
    line = _one_line_error(
        [
            "export",
            str(_paper_stage2(tmp_path / "s2.pth")),
            "--paper-stage2",
            "--no-panoramic",
            "--out",
            "x.onnx",
        ]
    )
    assert "--paper-stage1 only" in line
