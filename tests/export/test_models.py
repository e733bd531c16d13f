"""Model definitions: shapes, z-scoring as the first op, and the released-code parameter layouts."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pairedge.core.errors import InputError  # noqa: E402
from pairedge.core.labels import STAGE1  # noqa: E402
from pairedge.export.models import (  # noqa: E402
    ModelConfig,
    build_model,
    count_parameters,
    get_normalization,
    set_normalization,
)

CONFIGS = [
    ModelConfig("stage1_mlp", 7, 2),
    ModelConfig("relation_net", 14, 8, person_features=4, pair_features=6),
    ModelConfig("residual_mlp", 10, 3, dropout=0.3),
    ModelConfig("paper_adaptive_geometric", 7, 2),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.architecture)
def test_forward_shape(config: ModelConfig) -> None:
    model = build_model(config).eval()
    for n in (1, 5):
        out = model(torch.randn(n, config.num_features))
        assert out.shape == (n, config.num_classes)
        assert out.dtype == torch.float32


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.architecture)
def test_standardization_is_first_op(config: ModelConfig) -> None:
    """Shifting raw inputs and the mean together leaves the logits unchanged."""
    torch.manual_seed(0)
    model = build_model(config).eval()
    x = torch.randn(6, config.num_features)
    mean = np.linspace(-3, 3, config.num_features).astype(np.float32)
    std = np.linspace(0.5, 4, config.num_features).astype(np.float32)
    set_normalization(model, np.zeros(config.num_features), np.ones(config.num_features))
    ref = model(x)
    set_normalization(model, mean, std)
    shifted = model(x * torch.from_numpy(std) + torch.from_numpy(mean))
    assert torch.allclose(ref, shifted, atol=1e-5)
    got_mean, got_std = get_normalization(model)
    assert np.array_equal(got_mean, mean) and np.array_equal(got_std, std)
    assert "norm.mean" in model.state_dict() and "norm.std" in model.state_dict()


def test_paper_stage1_key_layout() -> None:
    model = build_model(ModelConfig("paper_adaptive_geometric", 7, 2))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith("norm.")}
    assert shapes == {
        "feature_biases": (7,),
        "feature_scales": (7,),
        "feature_weights": (7,),
        "classifier.0.weight": (32, 7),
        "classifier.0.bias": (32,),
        "classifier.3.weight": (16, 32),
        "classifier.3.bias": (16,),
        "classifier.6.weight": (2, 16),
        "classifier.6.bias": (2,),
    }


def test_paper_stage2_key_layout() -> None:
    model = build_model(ModelConfig("residual_mlp", 10, 3, dropout=0.3))
    keys = {k for k in model.state_dict() if k.startswith("network.")}
    for block, (n_in, n_out) in enumerate(((10, 256), (256, 128))):
        for sub in ("proj.weight", "proj.bias", "fc.weight", "fc.bias", "bn.weight", "bn.bias"):
            assert f"network.{block}.{sub}" in keys
        for sub in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
            assert f"network.{block}.{sub}" in keys
        assert model.state_dict()[f"network.{block}.fc.weight"].shape == (n_out, n_in)
    assert model.state_dict()["network.2.weight"].shape == (3, 128)
    assert model.network[0].drop.p == 0.3


def test_relation_net_is_swap_aware() -> None:
    """a and b go through the same encoder: swapping them only permutes the first two encodings."""
    torch.manual_seed(1)
    model = build_model(ModelConfig("relation_net", 8, 3, person_features=3, pair_features=2)).eval()
    ea = model.person(torch.ones(1, 3))
    eb = model.person(torch.ones(1, 3))
    assert torch.equal(ea, eb)
    assert count_parameters(model) > 0


def test_bad_configs_are_input_errors() -> None:
    with pytest.raises(InputError, match="architecture"):
        ModelConfig("transformer", 7, 2)
    with pytest.raises(InputError, match="2 \\* person_features"):
        ModelConfig("relation_net", 10, 3, person_features=4, pair_features=1)
    with pytest.raises(InputError, match="num_classes"):
        ModelConfig("stage1_mlp", 7, 1)
    model = build_model(ModelConfig("stage1_mlp", 3, 2))
    with pytest.raises(InputError, match="positive"):
        set_normalization(model, np.zeros(3), np.array([1.0, 0.0, 1.0]))
    with pytest.raises(InputError, match="shape"):
        set_normalization(model, np.zeros(4), np.ones(4))


def test_config_round_trip() -> None:
    config = ModelConfig("relation_net", 14, 8, hidden=(32, 64), person_features=4, pair_features=6)
    assert ModelConfig.from_dict(config.to_dict()) == config
    bounded = ModelConfig("stage1_mlp", 7, 2, activation_bound=1.0)
    assert ModelConfig.from_dict(bounded.to_dict()) == bounded


@pytest.mark.parametrize("bound", [0, -1.0, 1e3, True, "1", float("nan")])
def test_an_activation_bound_outside_its_range_is_an_input_error(bound: object) -> None:
    with pytest.raises(InputError, match="activation_bound"):
        ModelConfig("stage1_mlp", 7, 2, activation_bound=bound)  # type: ignore[arg-type]


def test_only_relu_architectures_take_an_activation_bound_and_the_train_config_carries_it() -> None:
    from pairedge.export.datasets import FeatureData
    from pairedge.export.train import TrainConfig, resolve_model_config

    with pytest.raises(InputError, match="activation_bound applies to"):
        ModelConfig("residual_mlp", 10, 3, activation_bound=1.0)
    data = FeatureData.from_arrays(
        np.zeros((4, 7), np.float32), np.array([0, 1, 0, 1]), np.array(["s"] * 4), STAGE1.classes
    )
    config = resolve_model_config(data, 1, TrainConfig(activation_bound=2.0))
    assert config.activation_bound == 2.0
    assert [type(m).__name__ for m in build_model(config).net][1::3] == ["Hardtanh", "Hardtanh"]
