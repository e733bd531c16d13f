"""Adding the input squash to trained weights (pairedge.apps.recipes.squash_step): training rows keep their
logits, rows beyond the training range are bounded, the file carries the squash, and a model that has one is
refused. Tiny models: seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pairedge.apps.recipes.squash_step import squash_model, without_squash  # noqa: E402
from pairedge.calibration.infer import logits, session  # noqa: E402
from pairedge.core.bundled import RECIPE  # noqa: E402
from pairedge.core.errors import ModelError  # noqa: E402
from pairedge.core.labels import PAPER3  # noqa: E402
from pairedge.export.checkpoint import Checkpoint  # noqa: E402
from pairedge.export.models import ModelConfig, build_model, set_normalization  # noqa: E402
from pairedge.export.onnx_export import export_checkpoint, export_model  # noqa: E402
from pairedge.export.qat import import_fp32  # noqa: E402
from pairedge.export.train import predict_logits  # noqa: E402


def _plain(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A relation network trained-looking (random weights) without a squash, exported, and its raw rows."""
    torch.manual_seed(0)
    config = ModelConfig("relation_net", 14, 3, hidden=(8, 16), person_features=4, pair_features=6)
    model = build_model(config)
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((2000, 14)) * np.linspace(0.1, 5, 14)).astype(np.float32)
    X[:, -1] = rng.standard_t(2, len(X))
    set_normalization(model, X.mean(0), X.std(0))
    ckpt = Checkpoint(
        model=model,
        config=config,
        stage=2,
        labels=PAPER3.classes,
        feature_spec="liang2026",
        feature_spec_version="1",
        data_fingerprint="sha256:t",
        extra={"train": {"hidden": [8, 16], "input_squash": None}},
    )
    path = tmp_path / "stage2.onnx"
    export_checkpoint(ckpt, path, check_batches=(3,))
    return path, X


def test_training_rows_keep_their_logits_and_far_rows_are_bounded(tmp_path: Path) -> None:
    path, X = _plain(tmp_path)
    plain, _ = import_fp32(path)
    model, meta, change = squash_model(path, 1.0, X)
    assert change <= 1e-5 and meta.extra["train"]["input_squash"] == 1.0
    z_max = np.abs((X - X.mean(0)) / X.std(0)).max(axis=0)
    np.testing.assert_allclose(model.norm.knee.numpy(), np.maximum(z_max, 1.0), rtol=1e-4)
    far = X[:5].copy()
    far[:, 3] = X[:, 3].mean() + 1e4 * X[:, 3].std()  # ten thousand std: a glitch no training row is near
    with torch.no_grad():
        z = model.norm(torch.from_numpy(far))[:, 3].numpy()
    assert np.all(z < model.norm.knee[3].item() + 10)  # knee + log1p(1e4 - knee): a few units past the knee
    assert not np.allclose(predict_logits(model, far), predict_logits(plain, far))
    out = tmp_path / "squashed" / "stage2.onnx"
    export_model(model, meta, out, check_batches=(3,))
    np.testing.assert_allclose(logits(session(out), X), logits(session(path), X), atol=1e-4)
    again, meta2 = import_fp32(out)  # the knees are in the file
    np.testing.assert_allclose(again.norm.knee.numpy(), model.norm.knee.numpy())
    with pytest.raises(ModelError, match="already has an input squash"):
        squash_model(out, 1.0, X)


def test_the_recipe_without_the_squash_is_the_recipe_minus_that_key() -> None:
    bare = without_squash(RECIPE)
    assert all("input_squash" not in bare[k] for k in ("stage1", "stage2"))
    assert {k: v for k, v in RECIPE["stage2"].items() if k != "input_squash"} == bare["stage2"]
    assert bare["spec"] == RECIPE["spec"] and without_squash(bare) == bare


def test_the_folder_step_refuses_a_folder_that_has_the_squash_or_another_recipe(tmp_path: Path) -> None:
    import json

    from pairedge.apps.recipes.squash_step import add_input_squash
    from pairedge.core.bundled import QAT_RECIPE

    for recorded, why in (
        (RECIPE, "already has"),
        ({**RECIPE, "spec": "other"}, "not built from this recipe"),
    ):
        (tmp_path / "recipe.json").write_text(json.dumps({"recipe": recorded}))
        with pytest.raises(SystemExit, match=why):
            add_input_squash(tmp_path, RECIPE, QAT_RECIPE, say=None)


@pytest.mark.parametrize("kind", ["missing", "garbage", "list", "dev_zero", "fifo", "huge"])
def test_a_bad_recipe_json_is_one_line_before_any_work(tmp_path: Path, kind: str) -> None:
    """The squash step / ``--int8-only`` / ``--record-check`` read recipe.json through one bounded
    reader: a missing, non-JSON, non-object, device, FIFO or oversized file is one ``error:`` line."""
    import os

    from pairedge.apps.recipes.default_model import read_summary
    from pairedge.core import limits

    path = tmp_path / "recipe.json"
    if kind == "garbage":
        path.write_text("{not json")
    elif kind == "list":
        path.write_text("[1, 2]")
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with path.open("wb") as f:
            f.truncate(limits.MAX_SIDECAR_BYTES + 1)
    with pytest.raises(SystemExit) as exc:
        read_summary(tmp_path)
    message = str(exc.value)
    assert message.startswith("error: ") and "\n" not in message and "recipe.json" in message
