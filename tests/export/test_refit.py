"""Refit after early stopping: all rows, a fixed number of epochs, the same schedule, deterministic."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pairedge.core.errors import InputError  # noqa: E402
from pairedge.export.data import FeatureData, split_by_sequence  # noqa: E402
from pairedge.export.evaluation import classification_metrics  # noqa: E402
from pairedge.export.refit import refit  # noqa: E402
from pairedge.export.train import TrainConfig, predict_logits, train  # noqa: E402


def toy(n: int = 960, seed: int = 0) -> FeatureData:
    """3 classes separable along column 0, one badly scaled column, 40 rows per sequence."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[:, 0] += 2.0 * y
    X[:, 1] = X[:, 1] * 300 + 1000
    groups = np.array([f"seq{i // 40:02d}" for i in range(n)])
    return FeatureData.from_arrays(X, y, groups, ("c0", "c1", "c2"), stage=2)


CONFIG = TrainConfig(epochs=6, patience=3, batch_size=128, samples_per_epoch=1024)


def test_refit_learns_is_deterministic_and_normalises_raw_inputs():
    data, test = toy(), toy(seed=1)
    a = refit(data, CONFIG, 3)
    b = refit(data, CONFIG, 3)
    assert not a.training
    pa, pb = predict_logits(a, test.X), predict_logits(b, test.X)
    np.testing.assert_array_equal(pa, pb)
    assert pa.shape == (len(test.y), 3)
    assert classification_metrics(test.y, pa.argmax(1), data.labels)["mpca"] > 0.7  # Bayes rate about 0.79
    # the z-score statistics of ALL rows are inside the model
    np.testing.assert_allclose(a.norm.mean.numpy(), data.X.mean(0), rtol=1e-4, atol=1e-3)


def test_refit_on_the_training_rows_repeats_the_early_stopped_run():
    """With the same rows and seed, ``refit`` for the chosen epochs gives the early-stopped model."""
    data = toy()
    val = split_by_sequence(data.groups, data.y, 0.2, 0)
    result = train(data, CONFIG, val_mask=val, progress=False)
    again = refit(data.subset(~val), CONFIG, result.best_epoch)
    np.testing.assert_allclose(predict_logits(again, data.X), predict_logits(result.model, data.X), atol=1e-5)


def test_refit_rejects_bad_epochs():
    with pytest.raises(InputError, match="epochs"):
        refit(toy(), CONFIG, 0)
    with pytest.raises(InputError, match="epochs"):
        refit(toy(), CONFIG, 7)
