"""bench_precisions helpers: which Gemm / MatMul nodes compute in int8, a parity report read back, the
seeds it scores on are none that calibration or training uses."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import _precisions  # noqa: E402
import bench_precisions  # noqa: E402


def _qdq_model(path: Path) -> None:
    """Two MatMuls: the first between DequantizeLinear inputs (int8), the second on a float weight."""
    w = numpy_helper.from_array(np.ones((4, 4), np.int8), "w_q")
    wf = numpy_helper.from_array(np.ones((4, 2), np.float32), "w2")
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    zero = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "s", "z"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w_q", "s", "z"], ["w_dq"]),
        helper.make_node("MatMul", ["x_dq", "w_dq"], ["h"], name="int8_matmul"),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="float_matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [w, wf, scale, zero],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_int8_coverage_counts_matmuls_between_dequantize(tmp_path: Path) -> None:
    _qdq_model(tmp_path / "m.onnx")
    assert _precisions.int8_coverage(tmp_path / "m.onnx") == {
        "nodes": 2,
        "int8": 1,
        "float": ["float_matmul"],
    }


def test_parity_summary_reads_a_report(tmp_path: Path) -> None:
    report = {
        "verdict": "FAIL",
        "summary": "FAIL at logits: ...",
        "levels": [
            {
                "name": "features",
                "status": "PASS",
                "metrics": {"columns": {"a": {"max": 0.0}, "b": {"max": 0.2}}},
            },
            {"name": "logits", "status": "FAIL", "metrics": {"stage1": {"max": 1.5}, "stage2": {"max": 0.1}}},
            {
                "name": "labels",
                "status": "PASS",
                "metrics": {
                    "gate_agreement": 0.995,
                    "top1_agreement": 1.0,
                    "gate_near_tie_disagreements": 1,
                    "top1_near_tie_disagreements": 0,
                },
            },
            {"name": "task", "status": "SKIP", "metrics": {}},
        ],
    }
    (tmp_path / "r.json").write_text(json.dumps(report))
    s = _precisions.parity_summary(tmp_path / "r.json", 1)
    assert (s["verdict"], s["first_failure"], s["features_max_drift_std"], s["stage1_logit_max"]) == (
        "FAIL",
        "logits",
        0.2,
        1.5,
    )
    assert s["near_tie_disagreements"] == [1, 0] and s["statuses"]["task"] == "SKIP"
    assert _precisions.parity_summary(tmp_path / "none.json", 2)["verdict"] == "ERROR"


def test_scored_seeds_are_held_out() -> None:
    """The held-out scenes and pack: no calibration (0-3), training (0-11), test (1000-1007) or link-setting
    (2000-2003) seed."""
    from pairedge.export.datasets.training_data import parse_sim_scenes

    packs = {int(scene.split(":")[1]) for scene in bench_precisions.PACK_SCENES}
    seeds = set(parse_sim_scenes(bench_precisions.HELD_OUT, None).seeds) | packs
    used = set(range(12)) | set(range(1000, 1008)) | set(range(2000, 2004)) | set(range(3000, 3003))
    assert seeds and not seeds & used
    from pairedge.calibration.default_set import default_source
    from pairedge.core.bundled import default_model_dir
    from pairedge.runtime.loading import find_models

    for scenes in bench_precisions.CALIBRATIONS.values():  # None: no source, the default set of the recipe
        text = scenes or default_source(find_models(default_model_dir())).replace("+", "-")
        assert all(int(s) < 12 for part in text.split(",") for s in part.split(":")[1].split("-"))
