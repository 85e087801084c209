"""The check both GPU backends' training tests share: after training steps, the model runs the trainer's weights
straight from the device, with no read of the parameters to the host and no new executable."""

from __future__ import annotations

import numpy as np

import coopnn


def run_after_steps_in_place(model, x: np.ndarray, y: np.ndarray, monkeypatch, steps: int = 3) -> np.ndarray:
    """The model's outputs for `x` after `steps` Adam steps on (x, y), each followed by a run, asserting that none
    of them read the parameters back or prepared the model anew."""
    trainer = coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2))
    trainer.step(x, y)
    model.run(x)  # the first step may prepare anew: fresh zero biases share one kernel parameter
    executable = model._executable
    assert trainer.session.context.shared_context is executable.context.shared_context
    reads = []
    read_parameters = trainer.session.parameters
    monkeypatch.setattr(trainer.session, "parameters", lambda: reads.append(1) or read_parameters())
    for _ in range(steps):
        trainer.step(x, y)
        after = model.run(x)
    assert reads == [] and model._executable is executable
    return after
