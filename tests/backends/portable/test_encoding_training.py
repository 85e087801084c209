"""Training behind an encoding on the portable backend (lavapipe, validation layer on): the step kernel encodes the
batch, giving the numpy oracle's gradients and its 20-step loss curve, for every encoding without parameters and for
grids, whose tables train with the layers (their gradient added by the step kernel with float32 atomics); weight
decay spares a table the optimizer names in `no_decay`."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.backends.portable.training import PortableTrainingSession
from coopnn.errors import CompileError
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import SGD, Adam
from tests.backends.portable.test_target import spirv_val

pytestmark = pytest.mark.vulkan

FIXED = [
    ({"otype": "Identity", "scale": 2.0, "offset": -1.0}, 2),
    ({"otype": "Frequency", "n_frequencies": 3}, 2),
    ({"otype": "Frequency", "layout": "nerf", "n_frequencies": 2}, 3),
    ({"otype": "TriangleWave", "n_frequencies": 4}, 2),
    ({"otype": "OneBlob", "n_bins": 8}, 2),
    ({"otype": "SphericalHarmonics", "degree": 4}, 3),
    ({"otype": "NRC", "n_frequencies": 2, "n_bins": 4}, 9),
]


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


@pytest.mark.parametrize("config, n_in", FIXED, ids=[c["otype"] + c.get("layout", "") for c, _ in FIXED])
def test_gradients_and_20_steps_equal_the_numpy_ones(config, n_in):
    graph = mlp_graph(n_in, [16], 3, encoding=config, seed=3)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.random((77, n_in), dtype=np.float32)}
    targets = {"y": rng.random((77, 3), dtype=np.float32)}
    oracle = NumpyTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2))
    device = PortableTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2), None)
    try:
        expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        assert device.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-4)
        for name, gradient in expected.items():
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-3, atol=1e-6, err_msg=name)
        curve = [device.step(feeds, targets) for _ in range(20)]
        np.testing.assert_allclose(curve, [oracle.step(feeds, targets) for _ in range(20)], rtol=1e-3)
        assert device.context.debug_messages == []
    finally:
        device.close()


GRIDS = [
    ({"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6, "base_resolution": 4,
      "per_level_scale": 2.0}, 2),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 3, "per_level_scale": 2.0,
      "interpolation": "Nearest"}, 2),
    ({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 4, "base_resolution": 4, "per_level_scale": 1.5,
      "interpolation": "Smoothstep"}, 2),
    ({"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 4, "log2_hashmap_size": 7, "base_resolution": 3,
      "per_level_scale": 2.0, "interpolation": "Smoothstep"}, 3),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 2, "base_resolution": 3, "per_level_scale": 1.5}, 3),
    ({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 3, "per_level_scale": 2.0,
      "interpolation": "Nearest"}, 3),
]


def _grid_id(case) -> str:
    config, n_in = case
    return f"{config['otype']}-{n_in}d-{config.get('interpolation', 'Linear')}-{config['n_features_per_level']}f"


def _compare(graph, optimizer, feeds, targets, steps=20):
    """The device's loss, gradients (tables included) and `steps`-step loss curve against the numpy oracle's."""
    oracle = NumpyTrainingSession(graph, get_loss("l2"), optimizer())
    device = PortableTrainingSession(graph, get_loss("l2"), optimizer(), None)
    try:
        expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        assert set(gradients) == set(expected)
        assert device.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-4)
        for name, gradient in expected.items():
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-3, atol=1e-6, err_msg=name)
        curve = [device.step(feeds, targets) for _ in range(steps)]
        np.testing.assert_allclose(curve, [oracle.step(feeds, targets) for _ in range(steps)], rtol=1e-3)
        trained = device.parameters()
        for name, value in oracle.parameters().items():
            np.testing.assert_allclose(trained[name], value, rtol=1e-3, atol=1e-5, err_msg=name)
        assert device.context.debug_messages == []
    finally:
        device.close()


@pytest.mark.parametrize("config, n_in", GRIDS, ids=[_grid_id(case) for case in GRIDS])
def test_grid_tables_train_as_the_numpy_oracle_trains_them(config, n_in):
    graph = mlp_graph(n_in, [16], 3, encoding=config, seed=3)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.random((77, n_in), dtype=np.float32)}
    targets = {"y": rng.random((77, 3), dtype=np.float32)}
    _compare(graph, lambda: Adam(lr=1e-2), feeds, targets)


@pytest.mark.parametrize("exempt", [True, False], ids=["no_decay", "decayed"])
def test_weight_decay_spares_the_tables_no_decay_names(exempt):
    config, n_in = GRIDS[0]
    graph = mlp_graph(n_in, [], 2, encoding=config, seed=5)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.random((50, n_in), dtype=np.float32)}
    targets = {"y": rng.random((50, 2), dtype=np.float32)}
    no_decay = ("encoding.params",) if exempt else ()
    _compare(graph, lambda: SGD(lr=0.5, momentum=0.9, weight_decay=0.1, no_decay=no_decay), feeds, targets,
             steps=10)


def test_the_step_kernel_of_a_grid_passes_spirv_val_and_asks_for_float_atomics(tmp_path):
    graph = mlp_graph(2, [16], 3, encoding=GRIDS[0][0], seed=3)
    device = PortableTrainingSession(graph, get_loss("l2"), Adam(weight_decay=1e-3, no_decay=("encoding.params",)),
                                     None)
    try:
        assert "shaderBufferFloat32AtomicAdd" in device.binary.features
        for binary in device.binaries().values():
            spirv_val(binary.spirv, tmp_path)
    finally:
        device.close()


def test_a_composite_with_a_grid_is_refused_naming_the_node():
    config = {"otype": "Composite", "nested": [{"otype": "HashGrid", "n_dims_to_encode": 2, "n_levels": 2,
                                                "log2_hashmap_size": 6}, {"otype": "Identity"}]}
    graph = mlp_graph(3, [16], 3, encoding=config, seed=3)
    with pytest.raises(CompileError, match=r"node 'encoding'.*train the tables of a grid encoding, not the "
                                           r"parameters of Composite"):
        PortableTrainingSession(graph, get_loss("l2"), Adam(), None)


def test_a_checkpoint_of_trained_tables_resumes_on_the_portable_and_numpy_backends(tmp_path):
    rng = np.random.default_rng(4)
    x, y = rng.random((64, 2), dtype=np.float32), rng.random((64, 3), dtype=np.float32)

    def trainer(backend):
        model = coopnn.mlp(2, [16], 3, encoding=GRIDS[0][0], seed=1, backend="numpy")
        return coopnn.Trainer(model, optimizer=Adam(lr=1e-2), backend=backend)

    with trainer("portable") as first:
        for _ in range(5):
            first.step(x, y)
        first.save_checkpoint(tmp_path / "grid.ckpt")
    curves = []
    for backend in ("portable", "numpy"):
        with trainer(backend) as resumed:
            resumed.load_checkpoint(tmp_path / "grid.ckpt")
            curves.append([resumed.step(x, y) for _ in range(5)])
    np.testing.assert_allclose(curves[0], curves[1], rtol=1e-4)
