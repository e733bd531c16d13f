"""fp32 against itself: ``parity check`` of the pack's own model reproduces the reference bit for bit, on
every box source (simulator truth and simulated detector, a ROS 2 log, PETS ``gt.txt`` and raw ACF
``det.txt``), with the box-shape substitution and the automatic operating point replayed as packed, for a clip
inside the switch, after it (``--start``), and with ``--box-shape off / ignore``.

Held-out scenes: seeds 4100-4102 (no training, calibration or choice uses them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.apps.evaluation.sources import parse_scene, parse_sources
from pairedge.compare.parity import CheckOptions, ParityPack, check_pack, load_pack
from pairedge.compare.parity.build import build_pack
from pairedge.compare.parity.check import reference_config, replay_pack
from pairedge.compare.parity.pack import PairRows
from pairedge.compare.parity.replay import load_pipeline
from pairedge.core.bundled import default_model_dir
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.loading import find_models

COLUMNS = ("stage1_features", "stage2_features", "stage1_logits", "stage2_logits", "p_interact", "label")


def device_rows(pk: ParityPack, exact: bool = True) -> PairRows:
    """The pack replayed through the bundled model as ``parity check`` sets it up."""
    flow = pk.reference["flow"]
    name = flow["name"] if flow["name"] != "none" else "auto"
    with load_pipeline(
        Deployment(default_model_dir(), backend="onnxruntime", flow=name),
        config=reference_config(pk.reference),
        flow_preset=flow.get("preset"),
        flow_scale=flow.get("scale"),
    ) as pipe:
        return replay_pack(pk, pipe, exact=exact)


def differs(pk: ParityPack, dev: PairRows) -> list[str]:
    """The columns in which ``dev`` is not bit-identical to the pack's rows (all of them when rows differ)."""
    if not np.array_equal(pk.rows.keys(), dev.keys()):
        return ["pair-frames"]
    return [c for c in COLUMNS if not np.array_equal(getattr(pk.rows, c), getattr(dev, c))]


def assert_self_check_exact(path: Path) -> ParityPack:
    """The check PASSes with zero drift in every feature column, and every replayed row is identical; its
    report says what it replayed as packed."""
    pk = load_pack(path)
    report = check_pack(pk, Deployment(default_model_dir(), backend="onnxruntime"))
    assert report.passed, report.verdict()
    features = report.levels[0].metrics
    assert features["coverage"] == 1.0 and features["pairs_device"] == len(pk.rows)
    assert {name: s["max"] for name, s in features["columns"].items() if s["max"]} == {}
    assert report.levels[1].metrics["stage1"]["max"] == 0.0
    assert differs(pk, device_rows(pk)) == []
    replayed = report.pack["replayed"]
    assert replayed["box_shape_ignored_frames"] == _ignored(pk) and replayed["start"] == pk.reference["start"]
    assert "Replayed from the pack: " in report.markdown()
    return pk


def _ignored(pk: ParityPack) -> int:
    return sum(s.box_shape_ignored for s in pk.frame_states)


def _thresholds(pk: ParityPack) -> list[float]:
    return [s.tau_interact for s in pk.frame_states]


# -- simulator scenes and a ROS 2 log ---------------------------------------------------------------------
def test_simulator_truth_boxes_exact(pack_path: Path) -> None:
    assert_self_check_exact(pack_path)


def test_simulator_detector_boxes_exact(tmp_path: Path) -> None:
    """The simulated detector (no ids: the tracker assigns them, coasts missed people, drops duplicates)."""
    out = build_pack(
        default_model_dir(), parse_scene("noisy:4100", 16, "detections"), tmp_path / "p.npz", frames=16
    )
    assert (out.detections[5].scores >= 0).all()
    assert_self_check_exact(tmp_path / "p.npz")


def test_ros2_log_exact(tmp_path: Path) -> None:
    """`pairedge simulate --bag mcap` writes a log; `parity pack --log` packs it; the check is exact."""
    pytest.importorskip("rosbags.rosbag2", reason="the ros extra (rosbags) writes the log")
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    sim = tmp_path / "sim"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--preset",
            "moving",
            "--seed",
            "4101",
            "--frames",
            "14",
            "--out",
            str(sim),
            "--bag",
            "mcap",
        ],
    )
    assert res.exit_code == 0, res.output
    pack = tmp_path / "log.npz"
    res = runner.invoke(
        app, ["parity", "pack", "default", "--out", str(pack), "--log", str(sim / "log"), "--frames", "12"]
    )
    assert res.exit_code == 0, res.output
    pk = assert_self_check_exact(pack)
    assert pk.reference["source"].startswith("log:") and pk.has_truth  # gold.jsonl / pairs_gt beside the log
    res = runner.invoke(app, ["parity", "check", str(pack), "default"])
    assert res.exit_code == 0 and "PASS" in res.output


# -- the automatic operating point: a switch inside the clip, a clip after it --------------------------------
@pytest.fixture(scope="module")
def surveillance(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Held-out elevated camera surveillance:4102 (simulated detector): its operating point switches to
    'surveillance' at frame 14; one pack holds the switch, one starts after it (--start 18)."""
    folder = tmp_path_factory.mktemp("surveillance")
    source = parse_scene("surveillance:4102", 24, "detections")
    inside = build_pack(default_model_dir(), source, folder / "inside.npz", frames=18)
    after = build_pack(default_model_dir(), source, folder / "after.npz", frames=6, start=18)
    assert inside.reference["operating_point_switches"][0]["frame"] == 14
    assert after.reference["operating_point_switches"][0]["frame"] == -4  # clip frames: < 0 before the clip
    return folder / "inside.npz", folder / "after.npz"


@pytest.mark.slow
def test_operating_point_switch_inside_the_clip(surveillance: tuple[Path, Path]) -> None:
    pk = assert_self_check_exact(surveillance[0])
    tau = _thresholds(pk)
    main = find_models(default_model_dir()).stage1.metadata.thresholds["p_interact"]
    assert tau[13] == main and tau[14:] == [0.65] * 4  # the main point, then 'surveillance'
    assert pk.snapshot is None and not len(pk.lead_png)


@pytest.mark.slow
def test_clip_that_starts_after_the_switch(surveillance: tuple[Path, Path]) -> None:
    """The clip's monitors would need 15 frames to decide: the pack gives the decision and the state."""
    pk = assert_self_check_exact(surveillance[1])
    assert _thresholds(pk) == [0.65] * 6 and pk.reference["start"] == 18
    report = check_pack(
        pk, Deployment(default_model_dir(), backend="onnxruntime"), CheckOptions(model_only=True)
    )
    assert report.passed and "the clip starts at frame 18 of the stream" in report.markdown()
    assert pk.snapshot is not None and pk.snapshot.flow_primed and len(pk.lead_png)
    assert pk.image(0).shape == pk.lead_image().shape
    assert differs(pk, device_rows(pk, exact=False))  # deciding again on the clip alone is not the stream


# -- box shape: a fixed-ratio detector, and the modes off / ignore
# -----------------------------------------------
@pytest.mark.parametrize("mode", ["off", "ignore"])
def test_box_shape_modes_exact(tmp_path: Path, mode: str) -> None:
    source = parse_scene("static:4100", 10, "detections")
    build_pack(default_model_dir(), source, tmp_path / "p.npz", frames=10, box_shape=mode)
    pk = assert_self_check_exact(tmp_path / "p.npz")
    assert pk.reference["box_shape"] == mode
    assert _ignored(pk) == (10 if mode == "ignore" else 0)
    assert all(np.isnan(s.aspect) for s in pk.frame_states)


# -- PETS 2009 S2.L1: annotated tracks and the raw ACF detector
# -------------------------------------------------
def _pets(shared_data: Path, boxes: str) -> list:
    base = shared_data / "pets09_s2l1"
    det = base / "mot15" / boxes / f"{boxes}.txt"
    return parse_sources(str(base / "vtest.avi"), detections=det)


@pytest.mark.data
def test_pets_gt_exact(shared_data: Path, tmp_path: Path) -> None:
    build_pack(default_model_dir(), _pets(shared_data, "gt")[0], tmp_path / "gt.npz", frames=30)
    pk = assert_self_check_exact(tmp_path / "gt.npz")
    assert _ignored(pk) == 0  # annotated boxes vary in shape


@pytest.mark.data
@pytest.mark.parametrize("frames", [30, pytest.param(60, marks=pytest.mark.slow)])
def test_pets_raw_detections_exact(shared_data: Path, tmp_path: Path, frames: int) -> None:
    """ACF draws every box at w/h 0.4407: box shape is ignored from the frame the monitor decides, and the
    camera is elevated: the operating point switches. Both replayed as packed, at 30 and 60 frames."""
    build_pack(default_model_dir(), _pets(shared_data, "det")[0], tmp_path / "det.npz", frames=frames)
    pk = assert_self_check_exact(tmp_path / "det.npz")
    flags = [s.box_shape_ignored for s in pk.frame_states]
    assert not flags[0] and flags[-1] and _ignored(pk) < frames  # decided inside the clip
    assert pk.frame_states[-1].aspect == pytest.approx(0.4407, abs=1e-3)
    assert len(set(_thresholds(pk))) == 2
    # what the check did before the pack carried the decisions: the device's monitor decides later
    assert "stage2_features" in differs(pk, device_rows(pk, exact=False))


@pytest.mark.data
def test_pets_raw_detections_box_shape_off_and_mid_stream(shared_data: Path, tmp_path: Path) -> None:
    source = _pets(shared_data, "det")[0]
    build_pack(default_model_dir(), source, tmp_path / "off.npz", frames=12, box_shape="off")
    assert _ignored(assert_self_check_exact(tmp_path / "off.npz")) == 0
    build_pack(default_model_dir(), source, tmp_path / "mid.npz", frames=12, start=40)
    pk = assert_self_check_exact(tmp_path / "mid.npz")
    assert _ignored(pk) == 12 and pk.snapshot is not None  # decided before the clip
