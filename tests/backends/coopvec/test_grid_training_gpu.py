"""A grid's tables trained by the coopvec backend on a GPU with cooperative vectors, with each table atomics method
(float32 atomics, float16 pairs): the per-sample step kernel's loss, gradients (the tables' summed by atomics, in no
fixed order) and 20-step loss curve against the numpy oracle's on float16-rounded parameters and inputs, for hash,
dense and tiled grids in 2-D and 3-D with 1 to 8 features a level and with every weight-gradient method of that
kernel; tiny-cuda-nn's image configuration at 2^14 samples, where many samples share every coarse entry; and a
Trainer whose model runs the trained tables from the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.coopvec.table_atomics import table_atomics_methods
from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.training.tuning import Tuning
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.oracle import assert_matches_on_random_data, assert_matches_the_oracle, rounded
from tests.backends.coopvec.test_encodings import IMAGE_ENCODING
from tests.backends.coopvec.test_training import OUTER_PRODUCT_LOSS_SCALE
from tests.backends.trained_in_place import run_after_steps_in_place
from tests.shaders.targets.encoding_cases import fp16_reference

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]
METHODS = sorted(table_atomics_methods())
GRIDS = [
    ({"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6, "base_resolution": 4,
      "per_level_scale": 2.0}, 2),
    ({"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 4, "log2_hashmap_size": 7, "base_resolution": 3,
      "per_level_scale": 2.0, "interpolation": "Smoothstep"}, 3),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 5, "per_level_scale": 2.0},
     2),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 2, "base_resolution": 3, "per_level_scale": 1.5,
      "interpolation": "Nearest"}, 3),
    ({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 8, "base_resolution": 4, "per_level_scale": 1.5},
     2),
]
IMAGE_BATCH = 1 << 14
PER_SAMPLE_STEPS = ("coopvec", "coopvec_rows")  # converting the working copy, or reading it
RTOL, ATOL = 1e-3, 2.5e-3


def _grid_id(case) -> str:
    config, n_in = case
    return f"{config['otype']}-{n_in}d-{config.get('interpolation', 'Linear')}-{config['n_features_per_level']}f"


@pytest.mark.parametrize("step", PER_SAMPLE_STEPS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("config, n_in", GRIDS, ids=[_grid_id(case) for case in GRIDS])
def test_tables_train_as_the_numpy_oracle_trains_them(config, n_in, method, step):
    graph = rounded(mlp_graph(n_in, [32], 3, encoding=config, seed=3))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, table_atomics=method, step=step)
    assert session.step_method.name == step
    # the grids' own domain, [0, 1]
    assert_matches_on_random_data(session, graph, "l2", n_in, 3, 1000, low=0.0)


@pytest.mark.parametrize("tuning", [Tuning(table_copies=128, sample_workgroup=128),
                                    Tuning(table_copies=1, sample_workgroup=32),
                                    Tuning(small_batch=1 << 12, small_batch_workgroup=256)],
                         ids=Tuning.describe)
def test_a_tuned_per_sample_step_trains_a_grid_as_the_oracle(tuning):
    config, n_in = GRIDS[0]
    graph = rounded(mlp_graph(n_in, [32], 3, encoding=config, seed=3))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, table_atomics="float16_pairs",
                                     tuning=tuning)
    assert session.table_atomics.copies == (tuning.table_copies or 32)
    assert_matches_on_random_data(session, graph, "l2", n_in, 3, 1000, low=0.0)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("gradients", ["coopvec", "outer_product", "outer_product_reduced"])
def test_every_gradient_method_of_the_per_sample_step_trains_a_grid(gradients, method):
    config, n_in = GRIDS[0]
    graph = rounded(mlp_graph(n_in, [32], 3, encoding=config, seed=3))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, gradients=gradients,
                                     table_atomics=method)
    if gradients.startswith("outer_product"):
        session.loss_scale = OUTER_PRODUCT_LOSS_SCALE  # where dynamic scaling settles with float16 sums
    assert_matches_on_random_data(session, graph, "l2", n_in, 3, 1000, low=0.0)


@pytest.mark.parametrize("step", PER_SAMPLE_STEPS)
@pytest.mark.parametrize("method", METHODS)
def test_the_image_configuration_trains_as_the_numpy_oracle(method, step):
    graph = rounded(mlp_graph(2, [64, 64], 3, encoding=IMAGE_ENCODING, seed=7))
    rng = np.random.default_rng(3)
    feeds = {"x": round_fp16(rng.random((IMAGE_BATCH, 2), dtype=np.float32))}
    targets = {"y": round_fp16(rng.random((IMAGE_BATCH, 3), dtype=np.float32))}
    oracle = NumpyTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, table_atomics=method, step=step)
    try:
        assert_matches_the_oracle(session, oracle, feeds, targets)
    finally:
        session.close()


@pytest.mark.parametrize("method", METHODS)
def test_a_trainer_fits_a_grid_model_whose_model_runs_the_trained_tables_from_the_gpu(method, monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.random((4096, 2), dtype=np.float32)
    y = np.stack([np.sin(6 * x[:, 0]), x[:, 1] ** 2, x[:, 0] * x[:, 1]], axis=1).astype(np.float32)
    with coopnn.mlp(2, [64, 64], 3, encoding=GRIDS[0][0], backend="coopvec", weights="fp16", seed=2) as model:
        with coopnn.Trainer(model, optimizer=Adam(lr=1e-2), table_atomics=method) as trainer:
            assert trainer.session.step_method.name == "coopvec_rows"  # what "auto" takes for this grid
            losses = trainer.fit(x, y, steps=200, batch_size=1024, progress=False)
            assert losses[-1] < losses[0] / 10
            assert ((model.run(x) - y) ** 2).mean() == pytest.approx(trainer.evaluate(x, y), rel=2e-2)
        after = run_after_steps_in_place(model, x, y, monkeypatch)
        np.testing.assert_allclose(after, fp16_reference(model.graph, x), rtol=RTOL, atol=ATOL)
