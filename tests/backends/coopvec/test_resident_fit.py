"""Device-resident training on the coopvec backend (H100): `fit` gathers every batch on the GPU and runs steps back
to back, the loss-scale and skip logic staying on the device, with exactly the results of step-by-step training; a
trainer closed before the model ran leaves it the weights an open one would."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from tests.backends.resident_fit import fit_equals_step_by_step
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


def _data(n: int, inputs: int, outputs: int):
    rng = np.random.default_rng(4)
    return (rng.uniform(0, 1, (n, inputs)).astype(np.float32),
            rng.uniform(0, 1, (n, outputs)).astype(np.float32))


@pytest.mark.parametrize("make, inputs, outputs", [
    (lambda: coopnn.mlp(2, [64, 64], 3, encoding="frequency", octaves=4, backend="coopvec", weights="fp16"), 2, 3),
    (lambda: coopnn.load(ROOT / "models" / "mlp_32_64x4_16.onnx", backend="coopvec", weights="fp16"), 32, 16)],
    ids=["built", "onnx"])
def test_fit_on_the_gpu_equals_step_by_step(coopvec_device, make, inputs, outputs):
    x, y = _data(5000, inputs, outputs)
    fit_equals_step_by_step(make, x, y, steps=12, batch_size=1000, read_every=5)


def test_a_trainer_closed_before_the_model_ran_leaves_it_the_weights_an_open_one_would(coopvec_device):
    x, y = _data(3000, 2, 3)
    outputs = []
    for close in (False, True):
        with coopnn.mlp(2, [64, 64], 3, backend="coopvec", weights="fp16", seed=2) as model:
            trainer = coopnn.Trainer(model, seed=5)
            trainer.fit(x, y, steps=6, batch_size=1000, progress=False)
            if close:
                trainer.close()
            outputs.append(model.run(x))
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_skipped_steps_and_loss_scale_changes_happen_on_the_gpu_within_a_run(coopvec_device):
    x, y = _data(2048, 3, 3)
    y *= 300.0  # large gradients: at a loss scale of 2^14 float16 deltas overflow

    def high_scale(session):
        session.loss_scale = 2.0 ** 14

    trainer = fit_equals_step_by_step(lambda: coopnn.mlp(3, [32], 3, backend="coopvec", weights="fp16"), x, y,
                                      steps=8, batch_size=512, read_every=8, prepare=high_scale)
    session = trainer.session
    assert session.optimizer.step_count < 8, "no step overflowed: the skip path was not exercised"
    assert session.loss_scale < 2.0 ** 14


@pytest.mark.parametrize("options", [{"gradients": "outer_product"}, {"gradients": "coopvec", "step": "tiled"}])
def test_the_trainer_hands_kernel_choices_to_the_session(coopvec_device, options):
    x, y = _data(1024, 2, 3)
    with coopnn.mlp(2, [32], 3, backend="coopvec", weights="fp16") as model:
        trainer = coopnn.Trainer(model, **options)
        assert (trainer.session.gradient_method.name, trainer.session.step_method.name) == (
            options["gradients"], options.get("step", "coopvec"))
        losses = trainer.fit(x, y, steps=20, batch_size=256, progress=False)
        assert np.isfinite(losses).all()
