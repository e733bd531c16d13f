"""Importing the paper's released-code checkpoints: exact layouts, weights-only loading, parity after
export."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from pairedge.core.errors import ModelError  # noqa: E402
from pairedge.core.labels import CAD8, PAPER3, STAGE1  # noqa: E402
from pairedge.export.onnx_export import export_checkpoint  # noqa: E402
from pairedge.export.paper_import import import_paper_stage1, import_paper_stage2  # noqa: E402
from paper_checkpoints import PaperAdaptiveGeometric  # noqa: E402
from torch import nn  # noqa: E402

# --- the released code's module structure, rebuilt independently of pairedge.export.models (stage 1 in
# paper_checkpoints.py, shared with the export CLI tests) ---------------------------------------------------


class PaperResidualBlock(nn.Module):
    def __init__(self, i: int, o: int) -> None:
        super().__init__()
        self.proj = nn.Linear(i, o) if i != o else nn.Identity()
        self.fc = nn.Linear(i, o)
        self.bn = nn.BatchNorm1d(o)
        self.dropout = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(nn.functional.silu(self.bn(self.fc(x)))) + self.proj(x)


class PaperGeometricMLP(nn.Module):
    def __init__(self, c: int = 3) -> None:
        super().__init__()
        self.network = nn.Sequential(
            PaperResidualBlock(10, 256), PaperResidualBlock(256, 128), nn.Linear(128, c)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def _randomise(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():  # trained-like scale: about 1 / sqrt(fan_in)
            p.normal_(0, 1.0 / np.sqrt(p.shape[1]) if p.dim() == 2 else 0.3)
        for m in module.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.3, 3)
                m.num_batches_tracked.fill_(1234)
    return module.eval()


def _features(n: int, f: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3, 3, size=(n, f)).astype(np.float32)


def _stage2_file(
    tmp_path: Path, classes: int = 3, std_dtype: type = np.float32
) -> tuple[Path, nn.Module, dict]:
    model = _randomise(PaperGeometricMLP(classes), 1)
    rng = np.random.default_rng(5)
    stats = {
        "mean": rng.normal(size=10).astype(np.float32),
        "std": np.abs(rng.normal(size=10)).astype(std_dtype) + 0.1,
        "n_samples": np.int64(12345),
    }
    stats["std"][9] = 0.0  # the constant "synchrony" feature
    stats["mean"][9] = 1.0
    path = tmp_path / "geometric_mlp.pth"
    torch.save(
        {
            "model_state_dict": model.state_dict(),
            "config": {"hidden_dims": [256, 128], "dropout": 0.3, "lr": 1e-3, "num_classes": classes},
            "normalization_stats": stats,
        },
        path,
    )
    return path, model, stats


def _paper_stage2_logits(model: nn.Module, stats: dict, x: np.ndarray) -> np.ndarray:
    z = (x - stats["mean"]) / (stats["std"] + 1e-8)
    with torch.no_grad():
        return model(torch.from_numpy(z.astype(np.float32))).numpy()


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"features": x})[0]


def test_stage1_import_export_matches_released_module(tmp_path: Path) -> None:
    original = _randomise(PaperAdaptiveGeometric(), 0)
    torch.save(original.state_dict(), tmp_path / "stage1.pth")
    ckpt = import_paper_stage1(tmp_path / "stage1.pth")
    assert ckpt.stage == 1 and ckpt.labels == STAGE1.classes and ckpt.feature_spec == "liang2026"
    assert ckpt.data_fingerprint.startswith("paper-checkpoint:")
    result = export_checkpoint(ckpt, tmp_path / "stage1.onnx", check_batches=(1, 300))
    assert result.max_abs_diff <= 1e-5
    for n in (1, 300):
        x = _features(n, 7, n)
        with torch.no_grad():
            ref = original(torch.from_numpy(x)).numpy()
        assert np.max(np.abs(_ort(result.path, x) - ref)) <= 1e-5


def test_stage1_wrapped_state_dict_and_module_prefix(tmp_path: Path) -> None:
    original = _randomise(PaperAdaptiveGeometric(), 3)
    wrapped = {"model_state_dict": {f"module.{k}": v for k, v in original.state_dict().items()}}
    torch.save(wrapped, tmp_path / "s1.pt")
    ckpt = import_paper_stage1(tmp_path / "s1.pt")
    x = torch.from_numpy(_features(4, 7, 0))
    with torch.no_grad():
        assert torch.allclose(ckpt.model(x), original(x), atol=1e-6)


@pytest.mark.parametrize("std_dtype", [np.float32, np.float64])
def test_stage2_import_export_matches_released_module(tmp_path: Path, std_dtype: type) -> None:
    path, original, stats = _stage2_file(tmp_path, std_dtype=std_dtype)
    ckpt = import_paper_stage2(path)
    assert ckpt.labels == PAPER3.classes and ckpt.config.hidden == (256, 128)
    assert ckpt.extra["n_samples"] == 12345 and ckpt.extra["paper_config"]["num_classes"] == 3
    result = export_checkpoint(ckpt, tmp_path / "stage2.onnx", check_batches=(1, 300))
    assert result.max_abs_diff <= 1e-5
    meta = result.metadata
    assert meta.norm_mean == pytest.approx(stats["mean"].tolist())
    assert meta.norm_std == pytest.approx((stats["std"] + 1e-8).tolist())
    for n in (1, 300):
        x = _features(n, 10, n)
        x[:, 9] = 1.0
        assert np.max(np.abs(_ort(result.path, x) - _paper_stage2_logits(original, stats, x))) <= 1e-5


def test_stage2_other_label_sets(tmp_path: Path) -> None:
    path, _, _ = _stage2_file(tmp_path, classes=8)
    with pytest.raises(ModelError, match="label set"):
        import_paper_stage2(path)
    assert import_paper_stage2(path, labels=CAD8.classes).labels == CAD8.classes


def test_numpy1_pickles_are_accepted(tmp_path: Path) -> None:
    """Files written under numpy 1.x name numpy.core.multiarray; rewrite the pickle to that spelling."""
    path, original, stats = _stage2_file(tmp_path)
    src = zipfile.ZipFile(path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data.pkl"):
                assert b"numpy._core.multiarray" in data
                data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
            dst.writestr(info, data)
    old = tmp_path / "numpy1.pth"
    old.write_bytes(buf.getvalue())
    ckpt = import_paper_stage2(old)
    x = _features(5, 10, 0)
    with torch.no_grad():
        got = ckpt.model(torch.from_numpy(x)).numpy()
    assert np.max(np.abs(got - _paper_stage2_logits(original, stats, x))) <= 1e-5


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    state = _randomise(PaperAdaptiveGeometric(), 0).state_dict()
    torch.save({**state, "payload": _Evil(marker)}, tmp_path / "evil.pth")
    for loader in (import_paper_stage1, import_paper_stage2):
        with pytest.raises(ModelError, match="refused to load.*system"):
            loader(tmp_path / "evil.pth")
    assert not marker.exists()


def test_object_arrays_are_refused(tmp_path: Path) -> None:
    path, model, _ = _stage2_file(tmp_path)
    torch.save(
        {
            "model_state_dict": model.state_dict(),
            "config": {},
            "normalization_stats": {"mean": np.array([1, "x"], dtype=object), "std": np.ones(10)},
        },
        tmp_path / "obj.pth",
    )
    with pytest.raises(ModelError, match="refused to load"):
        import_paper_stage2(tmp_path / "obj.pth")


def test_wrong_layouts_are_model_errors(tmp_path: Path) -> None:
    torch.save({"weight": torch.zeros(3)}, tmp_path / "other.pth")
    with pytest.raises(ModelError, match="feature_biases"):
        import_paper_stage1(tmp_path / "other.pth")
    with pytest.raises(ModelError, match="model_state_dict"):
        import_paper_stage2(tmp_path / "other.pth")
    state = _randomise(PaperAdaptiveGeometric(), 0).state_dict()
    torch.save({**state, "extra.weight": torch.zeros(1)}, tmp_path / "extra.pth")
    with pytest.raises(ModelError, match="released-code layout"):
        import_paper_stage1(tmp_path / "extra.pth")
    path, model, _ = _stage2_file(tmp_path)
    torch.save({"model_state_dict": model.state_dict(), "config": {}}, tmp_path / "nostats.pth")
    with pytest.raises(ModelError, match="normalization_stats"):
        import_paper_stage2(tmp_path / "nostats.pth")
    with pytest.raises(ModelError, match="not found"):
        import_paper_stage2(tmp_path / "missing.pth")
