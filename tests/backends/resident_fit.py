"""The check both GPU backends' device-resident training tests share: `Trainer.fit` on a data set uploaded once,
with batches gathered and steps run back to back on the device, gives exactly what `Trainer.step` gives on the same
batches drawn on the host by the same sampler."""

from __future__ import annotations

from typing import Callable

import numpy as np

import coopnn
from coopnn.shaders.targets.sampler import sample_rows

SEED = 5


def fit_equals_step_by_step(make_model: Callable, x: np.ndarray, y: np.ndarray, *, steps: int, batch_size: int,
                            read_every: int | None = None, prepare: Callable | None = None) -> coopnn.Trainer:
    """Train two fresh models from `make_model()`, one with `fit`, one step by step, and assert that losses,
    parameters, optimizer state and outputs agree exactly; `prepare(session)` runs on both sessions first. Returns
    the fitted model's trainer (closed models: only its counters are meaningful)."""
    with make_model() as fitted, make_model() as stepped:
        trainers = [coopnn.Trainer(m, optimizer=coopnn.optim.Adam(lr=1e-2), seed=SEED) for m in (fitted, stepped)]
        if prepare is not None:
            for trainer in trainers:
                prepare(trainer.session)
        by_fit = trainers[0].fit(x, y, steps=steps, batch_size=batch_size, progress=False, read_every=read_every)
        by_step = []
        for step in range(steps):
            whole = batch_size >= len(x)
            rows = sample_rows(SEED, step, len(x) if whole else batch_size, len(x), whole)
            by_step.append(trainers[1].step(x[rows], y[rows]))
        np.testing.assert_array_equal(by_fit, by_step)
        assert trainers[0].steps == trainers[1].steps == steps
        sessions = [t.session for t in trainers]
        assert sessions[0].optimizer.step_count == sessions[1].optimizer.step_count
        assert getattr(sessions[0], "loss_scale", 1) == getattr(sessions[1], "loss_scale", 1)
        expected = sessions[1].parameters()
        for name, value in sessions[0].parameters().items():
            np.testing.assert_array_equal(value, expected[name], err_msg=name)
        np.testing.assert_array_equal(fitted.run(x), stepped.run(x))
        return trainers[0]
