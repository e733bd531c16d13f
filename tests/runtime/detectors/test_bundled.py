"""The bundled YOLOX-Nano: shipped as its provenance says, verified on open, read as YOLOX's raw layout, and
its fp16 copy agrees with it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from pairedge.core.errors import ModelIntegrityError
from pairedge.core.modelfolder import sha256_file
from pairedge.measure.sim import Scene, get_preset
from pairedge.runtime.detectors import bundled as bundled_module
from pairedge.runtime.detectors import open_detector
from pairedge.runtime.detectors.bundled import DEFAULT_DETECTOR, bundled_detector, detectors_dir

PROVENANCE_SHA = "e8af074932d4ed7e232278e3055cefcdea3edf178874a3694ae292649fb464dd"


@pytest.fixture(scope="module")
def scene_frames() -> list:
    return [f for f in Scene(get_preset("static", 1000), 1000).frames(31)][::10]


def test_shipped_as_its_provenance_says() -> None:
    b = bundled_detector()
    assert (
        b.name == DEFAULT_DETECTOR == "yolox-nano" and b.licence == "Apache-2.0" and b.layout == "yolox-raw"
    )
    folder = detectors_dir() / "yolox_nano"
    assert sha256_file(b.path("fp32")) == PROVENANCE_SHA
    assert PROVENANCE_SHA in (folder / "PROVENANCE.md").read_text()
    licence = (folder / "LICENSE").read_text()
    assert licence.startswith("                                 Apache License") and "Megvii Inc." in licence
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {f["role"] for f in manifest["files"]} == {"fp32", "fp16"}
    for precision in ("fp32", "fp16"):
        path = b.path(precision)
        assert (
            sha256_file(path) == b.files[precision]["sha256"]
            and path.stat().st_size == b.files[precision]["size"]
        )


def test_the_recorded_layout_is_the_one_told_apart() -> None:
    for precision in ("fp32", "fp16"):
        with open_detector(bundled_detector().path(precision)) as det:
            assert det.layout.kind == bundled_detector().layout
            assert det.input_size == (416, 416)


def test_a_changed_file_is_refused(tmp_path, monkeypatch) -> None:
    copy = tmp_path / "detectors"
    shutil.copytree(detectors_dir(), copy)
    onnx = copy / "yolox_nano" / "yolox_nano.onnx"
    data = bytearray(onnx.read_bytes())
    data[-100] ^= 0xFF
    onnx.write_bytes(bytes(data))
    monkeypatch.setattr(bundled_module, "detectors_dir", lambda: copy)
    with pytest.raises(ModelIntegrityError, match="SHA-256") as info:
        open_detector("yolox-nano")
    assert "reinstall" in str(info.value)
    onnx.unlink()
    with pytest.raises(ModelIntegrityError, match="missing"):
        open_detector("yolox-nano")


def test_finds_people_and_fp16_agrees(scene_frames) -> None:
    with open_detector("yolox-nano") as fp32, open_detector(bundled_detector().path("fp16")) as fp16:
        assert "YOLOX-Nano (bundled, Apache-2.0)" in fp32.describe()
        found = 0
        for f in scene_frames:
            a, b = fp32.detect(f.image), fp16.detect(f.image)
            found += len(a)
            confident = a.scores >= 0.5
            for box in a.boxes[confident]:  # every confident fp32 box has an fp16 twin within 2 px
                assert np.abs(b.boxes - box).max(axis=1).min() <= 2.0
        assert found > 0
        assert fp32.last_check.candidates == 3549
