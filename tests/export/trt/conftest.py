"""Fixtures of the TensorRT tests: a copy of the bundled model folder, fp16 / int8 ONNX made in-test."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from trt_models import DEFAULT_MODEL, make_fp16, make_int8  # noqa: E402


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    """A copy of the bundled default model folder (stage{1,2}.onnx, stage{1,2}.int8.onnx, recipe.json,
    manifest.json)."""
    folder = tmp_path / "model"
    folder.mkdir()
    for path in DEFAULT_MODEL.iterdir():
        if path.is_file():
            shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="session")
def reduced_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """stage{1,2}.fp16.onnx (float16 weights, float32 IO) and Q/DQ stage{1,2}.int8.onnx of the bundled
    model."""
    folder = tmp_path_factory.mktemp("reduced")
    for stage in (1, 2):
        src = DEFAULT_MODEL / f"stage{stage}.onnx"
        make_fp16(src, folder / f"stage{stage}.fp16.onnx")
        make_int8(src, folder / f"stage{stage}.int8.onnx")
    return folder


@pytest.fixture()
def full_model_dir(model_dir: Path, reduced_models: Path) -> Path:
    """The model folder with fp16 and int8 files registered in its manifest."""
    from pairedge.core.modelfolder import register_files

    roles = {}
    for path in reduced_models.glob("*.onnx"):
        shutil.copy(path, model_dir / path.name)
        roles[path.name] = path.name.removesuffix(".onnx")
    register_files(model_dir, roles)
    return model_dir
