"""The whole CUDA flow on the emulated device against ``flow="reference"`` on real frames (Sintel, PETS).

Measured here (and in ``benchmarks/bench_emulated_cuda.py``): the emulated ``flow="cuda"`` field equals the
reference's bit for bit on every Sintel scene and on PETS, so the documented tolerance is 0 for the field.
The fused pooled statistics equal the dense path's (:func:`~pairedge.core.features.flowpool.flow_moments`) up
to float64 summation order (each GPU block sums in a tree; numpy sums pairwise): relative 1e-12. Pipeline.step
and ``pairedge run`` then score the same interactions with either flow. Needs ``../shared/data`` (marked
``data``) and the emulated device's toolchain; skips with the reason when either is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.apps.probe import emulation_skip_reason
from pairedge.core.bundled import default_model_dir
from pairedge.core.features.flowpool import flow_moments, pool_rects
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.flow.pooling import PoolRequest

EMULATION_REASON = emulation_skip_reason()
pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(EMULATION_REASON is not None, reason=str(EMULATION_REASON)),
]
SCENES = [f"{p}/{d}" for p in ("clean", "final") for d in ("easy", "medium", "hard")]


@pytest.fixture(scope="module")
def flows():
    cuda = get_flow_backend("cuda", scale=0.5, api="hip-cpu")
    yield cuda, get_flow_backend("reference", scale=0.5)
    cuda.close()


def _gray(path: Path) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    assert image is not None, path
    return image


def pets_frames(shared_data: Path, n: int) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(shared_data / "pets09_s2l1" / "vtest.avi"))
    frames = []
    while len(frames) < n:
        ok, frame = cap.read()
        assert ok, "vtest.avi ended early"
        frames.append(frame)
    cap.release()
    return frames


@pytest.mark.parametrize("scene", SCENES)
def test_sintel_flow_equals_the_reference(shared_data, flows, scene):
    cuda, ref = flows
    folder = shared_data / "sintel" / scene
    a, b = _gray(folder / "frame_0002.png"), _gray(folder / "frame_0003.png")
    got = cuda.compute(a, b).copy()
    np.testing.assert_array_equal(got, ref.compute(a, b))


def _gt(shared_data: Path) -> dict[int, np.ndarray]:
    """PETS ground truth by video frame index: (N, 5) float64 ``id x y w h``."""
    gt = np.loadtxt(shared_data / "pets09_s2l1" / "mot15" / "gt" / "gt.txt", delimiter=",")
    return {int(f) - 1: gt[gt[:, 0] == f][:, 1:6] for f in np.unique(gt[:, 0])}  # MOT frames are 1-based


def test_pets_flow_and_fused_pooling_equal_the_dense_path(shared_data, flows):
    """Frame by frame as the runtime calls it: the field equals the reference's; the fused per-box sums equal
    the dense path's sums of that field; the background grid is the field's own samples."""
    cuda, ref = flows
    boxes = {k: v[:, 1:] for k, v in _gt(shared_data).items()}
    frames = [cuda.resize(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), 0).copy() for f in pets_frames(shared_data, 8)]
    for k in range(1, len(frames)):
        prev, cur = frames[k - 1], frames[k]
        dense = cuda.compute_scaled(prev, cur).copy()
        np.testing.assert_array_equal(dense, ref.compute_scaled(prev, cur))
        request = PoolRequest(boxes[k], (0.15, 0.05), 8)
        pooled = cuda.compute_pooled(prev, cur, request)
        rects = pool_rects(boxes[k], cuda.scale, dense.shape[:2], request.inset)
        np.testing.assert_array_equal(pooled.rects, rects)
        np.testing.assert_allclose(pooled.moments, flow_moments(dense, rects), rtol=1e-12, atol=1e-9)
        np.testing.assert_array_equal(pooled.grid, dense[4::8, 4::8])


def _interactions(result) -> list[tuple]:
    return [(i.ids, i.label, np.round(i.probs, 6).tolist()) for i in result.interactions]


@pytest.mark.slow
def test_pipeline_step_scores_the_same_interactions(shared_data, monkeypatch):
    """Pipeline.step with the emulated CUDA flow (fused pooling on the device) and with the reference flow
    (dense field, pooled on the CPU): the same pairs, labels and probabilities on a PETS clip."""
    from pairedge.core.types import Detections
    from pairedge.runtime.pipeline import Pipeline

    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    gt, frames = _gt(shared_data), pets_frames(shared_data, 30)
    seen: dict[str, list] = {}
    for flow in ("cuda", "reference"):
        with Pipeline.load(default_model_dir(), flow=flow) as pipe:
            if flow == "cuda":
                assert pipe.flow.emulated and "EMULATED" in pipe.describe()["flow"]
            seen[flow] = []
            for k, frame in enumerate(frames):
                dets = Detections.from_arrays(gt[k][:, 1:], track_ids=gt[k][:, 0].astype(np.int64))
                result = pipe.step(frame, dets, k / 10.0)
                seen[flow].append((result.pairs.tolist(), _interactions(result)))
                assert "flow_gpu" not in result.timings_ms  # emulated time is not GPU time
    assert seen["cuda"] == seen["reference"]
    assert sum(len(inter) for _, inter in seen["cuda"]) > 0, "the clip should hold interactions to compare"


@pytest.mark.slow
def test_pairedge_run_flow_cuda_emulated_equals_reference_on_pets(shared_data, tmp_path, monkeypatch, caplog):
    """``PAIREDGE_CUDA_EMULATION=hip-cpu pairedge run vtest.avi --detections gt.txt --flow cuda`` on the first
    30 PETS frames: the same interactions as ``--flow reference``, and every record says "emulated"."""
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    pets = shared_data / "pets09_s2l1"
    base = [
        "run",
        str(pets / "vtest.avi"),
        "--detections",
        str(pets / "mot15" / "gt" / "gt.txt"),
        "--max-frames",
        "30",
        "--no-video",
    ]
    runner = CliRunner()
    ref = runner.invoke(app, [*base, "--flow", "reference", "--out", str(tmp_path / "ref")])
    assert ref.exit_code == 0, ref.output
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    emu = runner.invoke(app, [*base, "--flow", "cuda", "--out", str(tmp_path / "cuda")])
    assert emu.exit_code == 0, emu.output
    assert "EMULATED" in caplog.text  # the device says so when it opens (stderr outside pytest)

    def records(folder: Path) -> tuple[dict, list]:
        lines = (folder / "results.jsonl").read_text().splitlines()
        return json.loads(lines[0]), [json.loads(line)["interactions"] for line in lines[1:]]

    (head_ref, got_ref), (head_emu, got_emu) = records(tmp_path / "ref"), records(tmp_path / "cuda")
    assert got_emu == got_ref and len(got_emu) == 30 and sum(map(len, got_emu)) > 0
    assert "EMULATED" in head_emu["pipeline"]["flow"] and "EMULATED" not in head_ref["pipeline"]["flow"]
    summary = json.loads((tmp_path / "cuda" / "summary.json").read_text())
    assert "EMULATED" in summary["pipeline"]["flow"] and summary["flow_frames"] == 29
