"""The shipped default model matches what its recipe (``python -m pairedge.apps.recipes.default_model``)
declares."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from pairedge.core.bundled import RECIPE, default_model_dir
from pairedge.core.features import get_spec
from pairedge.core.labels import PAPER3, STAGE1
from pairedge.core.modelmeta import ModelMetadata

DIR = default_model_dir()
LABELS = {"stage1": STAGE1.classes, "stage2": PAPER3.classes}


def _meta(stage: int) -> ModelMetadata:
    proto = onnx.load(str(DIR / f"stage{stage}.onnx"))
    return ModelMetadata.from_props(
        {p.key: p.value for p in proto.metadata_props}, source=f"stage{stage}.onnx"
    )


def _summary() -> dict:
    return json.loads((DIR / "recipe.json").read_text())


def test_shipped_files_are_small_and_present() -> None:
    sizes = [(DIR / name).stat().st_size for name in ("stage1.onnx", "stage2.onnx")]
    assert sum(sizes) < 1_000_000, sizes
    assert _summary()["recipe"] == RECIPE


@pytest.mark.parametrize("stage", [1, 2])
def test_shipped_metadata_matches_recipe(stage: int) -> None:
    key = f"stage{stage}"
    meta, declared = _meta(stage), RECIPE[key]
    assert meta.stage == stage
    assert meta.feature_spec == RECIPE["spec"]
    assert meta.feature_spec_version == str(get_spec(RECIPE["spec"]).version), (
        "the feature spec changed since the default model was trained: rerun "
        "`python -m pairedge.apps.recipes.default_model --out sdk/models/default`"
    )
    assert meta.labels == LABELS[key]
    assert meta.architecture == declared["architecture"]
    assert meta.num_features == (
        get_spec(RECIPE["spec"]).stage1_dim if stage == 1 else get_spec(RECIPE["spec"]).stage2_dim
    )
    assert meta.extra["recipe"] == RECIPE
    assert meta.extra["feature_config"] == RECIPE["feature_config"]
    train = meta.extra["train"]
    for name in ("epochs", "patience", "samples_per_epoch", "seed", "architecture"):
        assert train[name] == declared[name], name
    assert train["hidden"] == declared["hidden"]
    assert train.get("input_squash") == declared.get("input_squash")
    if declared.get("input_squash") is not None:  # the knees are in the graph, finite, at least MIN_KNEE
        from onnx import numpy_helper
        from pairedge.export.models import MIN_KNEE

        inits = {t.name: t for t in onnx.load(str(DIR / f"stage{stage}.onnx")).graph.initializer}
        knee = numpy_helper.to_array(inits["norm.knee"])
        assert knee.shape == (meta.num_features,) and np.isfinite(knee).all() and (knee >= MIN_KNEE).all()
    assert meta.data_fingerprint == _summary()["stages"][key]["data_fingerprint"]


def test_runtime_accepts_the_default_model() -> None:
    from pairedge.runtime.loading import find_models

    pair = find_models(DIR)
    assert pair.labels == PAPER3.classes
    assert pair.spec.name == RECIPE["spec"]


@pytest.fixture(scope="module")
def slice_check() -> dict:
    """The value summaries of the recipe's check slice, rebuilt by this code (~7 s)."""
    pytest.importorskip("torch")
    from pairedge.apps.recipes.default_model import check_fingerprints

    return check_fingerprints(RECIPE)


def _slice_problems(current: dict) -> list[str]:
    from pairedge.export.datasets.fingerprint import compare_summaries

    recorded = _summary()["check"]
    assert recorded["seeds"] == current["seeds"] and recorded["presets"] == current["presets"]
    return [
        f"{key}: {line}"
        for key in ("stage1", "stage2")
        for line in compare_summaries(recorded[key]["summary"], current[key]["summary"])
    ]


@pytest.mark.slow
def test_training_data_slice_fingerprints_reproduce(slice_check: dict) -> None:
    """Rebuilding a slice of the recipe's training rows (seed 0 of every preset) gives the value summaries
    recipe.json recorded when the shipped model was built, up to float noise: this code still makes its
    training data, whatever BLAS kernel this CPU uses."""
    from pairedge.apps.recipes.default_model import CHECK_SEEDS

    assert _summary()["check"]["seeds"] == CHECK_SEEDS and _summary()["check"]["presets"] == RECIPE["presets"]
    assert _slice_problems(slice_check) == [], (
        "the features or the simulator changed since the default model was trained: rerun "
        "`python -m pairedge.apps.recipes.default_model --out sdk/models/default`"
    )


@pytest.mark.slow
def test_a_real_feature_change_fails_the_slice_check(slice_check: dict) -> None:
    """The tolerance is far below what a change of the features moves: one column scaled by 1 %, shifted by
    1 % of its spread, two columns swapped, or a few rows' labels changed each fail; last-bit noise passes."""
    from dataclasses import replace

    from pairedge.apps.recipes.default_model import feature_sets
    from pairedge.export.datasets.fingerprint import value_summary

    data = feature_sets(RECIPE, "0", list(RECIPE["presets"]))[RECIPE["stage2"]["task"]]
    recorded = _summary()["check"]["stage2"]["summary"]
    from pairedge.export.datasets.fingerprint import compare_summaries

    def problems(X=None, y=None) -> list[str]:
        changed = replace(data, X=data.X if X is None else X, y=data.y if y is None else y)
        return compare_summaries(recorded, value_summary(changed))

    rng = np.random.default_rng(0)
    std = data.X.std(0)
    noise = data.X + (rng.standard_normal(data.X.shape) * 1e-4 * std).astype(np.float32)
    assert problems(noise) == []  # twice the largest last-bit difference measured between BLAS kernels
    j = int(np.argmax(std))
    scaled, shifted, swapped = data.X.copy(), data.X.copy(), data.X.copy()
    scaled[:, j] *= 1.01
    shifted[:, j] += 0.01 * std[j]
    swapped[:, [0, 1]] = swapped[:, [1, 0]]
    relabelled = data.y.copy()
    relabelled[:3] = (relabelled[:3] + 1) % len(data.labels)
    for X, y in ((scaled, None), (shifted, None), (swapped, None), (None, relabelled)):
        assert problems(X, y), "a real change of the features passed the check"
    # a real change of the code's output: one sample less of track history moves only the history-derived
    # columns, and only a little
    history = int(RECIPE["feature_config"].get("history", 8))
    shorter = {**RECIPE, "feature_config": {**RECIPE["feature_config"], "history": history - 1}}
    changed = feature_sets(shorter, "0", list(RECIPE["presets"]))[RECIPE["stage2"]["task"]]
    assert compare_summaries(recorded, value_summary(changed))


def _cpu_has(flag: str) -> bool:
    """Whether /proc/cpuinfo lists ``flag`` (True where it cannot be read: let the run say)."""
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["SkylakeX", "Haswell"])
def test_slice_check_passes_with_either_openblas_kernel(kernel: str) -> None:
    """The check holds on an AVX-512 CPU (SkylakeX kernel) and an AVX2 one (Haswell): the recorded exact
    SHA-256 differs between them, the value summaries do not beyond the tolerance."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    if kernel == "SkylakeX" and not _cpu_has("avx512f"):
        pytest.skip("this CPU has no AVX-512: OpenBLAS's SkylakeX kernel cannot run here (SIGILL)")
    code = (
        "import json, sys\n"
        "from pairedge.core.bundled import RECIPE, default_model_dir\n"
        "from pairedge.export.datasets.fingerprint import compare_summaries\n"
        "from pairedge.apps.recipes.default_model import check_fingerprints\n"
        "now = check_fingerprints(RECIPE)\n"
        "rec = json.loads((default_model_dir() / 'recipe.json').read_text())['check']\n"
        "bad = [p for k in ('stage1', 'stage2') for p in compare_summaries(rec[k]['summary'], "
        "now[k]['summary'])]\n"
        "print(json.dumps({'kernel': now['blas']['kernel'], 'problems': bad}))\n"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["kernel"] not in ("unknown", kernel):
        pytest.skip(f"OpenBLAS here cannot use the {kernel} kernel (it chose {result['kernel']})")
    assert result["problems"] == []


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("PAIREDGE_FULL_CHECKS") != "1",
    reason="rebuilds all training rows of the default model (minutes); opt in with PAIREDGE_FULL_CHECKS=1",
)
def test_training_data_fingerprints_reproduce() -> None:
    """Rebuilding all of the recipe's training rows gives the shipped value summaries, up to float noise
    (opt-in: minutes of CPU)."""
    pytest.importorskip("torch")
    from pairedge.apps.recipes.default_model import full_summaries
    from pairedge.export.datasets.fingerprint import compare_summaries

    now = full_summaries(RECIPE)
    stages = _summary()["stages"]
    for key in ("stage1", "stage2"):
        assert "data_summary" in stages[key], "recipe.json has no full summary: run --record-check --full"
        assert compare_summaries(stages[key]["data_summary"], now[key]) == [], key


# -- the int8 files made by quantization-aware training (QAT_RECIPE)
# ------------------------------------------
def _props(name: str) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(str(DIR / name)).metadata_props}


@pytest.mark.parametrize("stage", [1, 2])
def test_shipped_int8_files_are_what_the_qat_recipe_declares(stage: int) -> None:
    """Same metadata as the fp32 file, plus the precision and the QAT record naming the fp32 file's SHA-256
    (what the runtime's staleness check and parity's identity check read); every Gemm between Q/DQ; the Q/DQ
    rules ``pairedge calibrate`` and ``pairedge check`` apply pass."""
    from pairedge.calibration.qdq_rules import check_qdq_rules
    from pairedge.core.bundled import QAT_RECIPE
    from pairedge.core.modelfolder import sha256_file
    from pairedge.export.qat.export import gemm_inputs_quantized

    fp32, int8 = _props(f"stage{stage}.onnx"), _props(f"stage{stage}.int8.onnx")
    assert {k: v for k, v in int8.items() if k not in ("pairedge.precision", "pairedge.quantization")} == fp32
    info = json.loads(int8["pairedge.quantization"])
    assert int8["pairedge.precision"] == "int8" and info["method"] == "qat"
    # the layers the sensitivity sweep keeps float (stage 2: the first layers, at most 10 % of the MACs)
    sweep = info.get("sensitivity") or {"float_layers": [], "float_mac_share": 0.0}
    float_weights = {f"{path}.weight" for path in sweep["float_layers"]}
    assert sweep["float_mac_share"] <= 0.10 and (stage == 1) == (not float_weights)
    assert info["qat_recipe"] == QAT_RECIPE, (
        "QAT_RECIPE changed since the int8 files were made: rerun "
        "`python -m pairedge.apps.recipes.default_model --int8-only --out sdk/models/default`"
    )
    assert info["fp32_sha256"] == sha256_file(DIR / f"stage{stage}.onnx"), "stale: rerun with --int8-only"
    model = onnx.load(str(DIR / f"stage{stage}.int8.onnx"))
    gemms = [n for n in model.graph.node if n.op_type in ("Gemm", "MatMul")]
    fp32_gemms = [
        n for n in onnx.load(str(DIR / f"stage{stage}.onnx")).graph.node if n.op_type in ("Gemm", "MatMul")
    ]
    assert len(gemms) == len(fp32_gemms) == (3 if stage == 1 else 7)
    assert info["excluded_nodes"] == [g.name for g in gemms if g.input[1] in float_weights]
    assert gemm_inputs_quantized(model, float_weights) == [] and check_qdq_rules(model) == []


def test_manifest_lists_the_int8_files_and_the_runtime_loads_them() -> None:
    from pairedge.core.modelfolder import read_manifest, verify_files
    from pairedge.runtime.loading import find_models
    from pairedge.runtime.pipeline import Pipeline

    manifest = read_manifest(DIR)
    assert manifest is not None
    roles = {name: entry.role for name, entry in manifest.files.items()}
    assert roles["stage1.int8.onnx"] == "stage1.int8" and roles["stage2.int8.onnx"] == "stage2.int8"
    verify_files(DIR)
    assert find_models(DIR, precision="int8").precision == "int8"
    Pipeline.load(DIR, precision="int8")


def test_recipe_json_records_the_qat_step() -> None:
    from pairedge.core.bundled import QAT_RECIPE

    record = _summary()["int8"]
    assert record["qat_recipe"] == QAT_RECIPE
    # the exact SHA-256 of the rebuilt rows is this CPU's: the QAT ran on another machine than the fp32
    # training (last-bit BLAS differences); the value-level reproduction is the slice check's
    assert set(record["training_data_matches_fp32"]) == {"stage1", "stage2"}
    for key, stage in record["stages"].items():
        assert (
            stage["file"] == f"{key}.int8.onnx"
            and stage["export_p999_abs_diff"] <= 0.05
            and stage["export_max_abs_diff"] <= 0.25
        )
        assert stage["runtime_max_abs_diff"] >= stage["export_max_abs_diff"] - 1e-6  # both recorded
        assert (
            stage["best_epoch"]
            == max(stage["history"], key=lambda h: (h["agreement"], -h["p99_abs"]))["epoch"]
        )
    assert (
        record["stages"]["stage1"]["validation"]["agreement"] >= 0.99
    )  # the training scenes' validation sequences


def test_stage2_int8_reaches_the_agreement_target_on_validation() -> None:
    """Stage 2 bounded at the source (recipe.json's ``unit_bound``) and its sweep's float layers recorded."""
    summary = _summary()
    stage = summary["int8"]["stages"]["stage2"]
    assert stage["validation"]["agreement"] >= 0.99
    assert stage["float_layers"] == stage["sensitivity"]["float_layers"] and stage["float_layers"]
    assert summary["unit_bound"]["percentile"] == RECIPE["stage2"]["unit_bound"]
    assert summary["unit_bound"]["rewrite_max_abs_diff"] < 1e-4
    assert _meta(2).extra["train"]["activation_bound"] == 1.0


@pytest.mark.slow
def test_shipped_int8_decides_like_fp32_on_test_scenes() -> None:
    """On test scenes of the recipe (seed 1000, static and noisy; no QAT choice used them) the int8 files
    take the fp32 decisions: gate and top-1 agreement >= 99 % (~10 s)."""
    from pairedge.apps.recipes.default_model import feature_sets
    from pairedge.calibration.infer import logits, session
    from pairedge.compare.comparator import DecisionRule, compare_stage

    sets = feature_sets(RECIPE, "1000", ["static", "noisy"])
    rule = DecisionRule(tau=_meta(1).thresholds["p_interact"])
    agreement = {}
    for stage, task in ((1, "stage1"), (2, "paper3")):
        X = sets[task].X
        ref, cand = (logits(session(DIR / f"stage{stage}{s}.onnx"), X) for s in ("", ".int8"))
        agreement[stage] = compare_stage(stage, ref, cand, rule).decision.agreement_excl_near_ties
    assert agreement[1] >= 0.99 and agreement[2] >= 0.99, agreement
