"""Helpers for the training tests: float64 operator semantics and gradient checks by central differences."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pytest

from coopnn.graph import activations, ops
from coopnn.graph.ir import Graph
from coopnn.train.backward import GradientProgram
from coopnn.train.losses import get_loss

STEP = 1e-6  # central-difference step in float64: truncation ~STEP^2, rounding ~1e-16 / STEP
RTOL, ATOL = 1e-5, 1e-8


@pytest.fixture
def float64_ops(monkeypatch):
    """`coopnn.graph.ops` computing in float64. Every operator there rounds its result through `_f32` (the
    activations through `coopnn.graph.activations.f32`); making that a cast to float64 gives the same formulas in
    double precision, so finite differences measure the derivative rather than float32 rounding."""
    monkeypatch.setattr(ops, "_f32", lambda x: np.asarray(x, dtype=np.float64))
    monkeypatch.setattr(activations, "f32", lambda x: np.asarray(x, dtype=np.float64))


def as_float64(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v if v.dtype == np.bool_ else v.astype(np.float64) for k, v in arrays.items()}


def random_data(graph: Graph, batch: int, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """float64 inputs in [-1, 1] and targets in [0, 1] for every input and float output of `graph`."""
    rng = np.random.default_rng(seed)
    feeds = {v.name: rng.uniform(-1, 1, (batch,) + v.features) for v in graph.inputs}
    targets = {v.name: rng.uniform(0, 1, (batch,) + v.features) for v in graph.outputs if v.dtype == "f32"}
    return feeds, targets


def check_gradients(graph: Graph, *, loss: str = "l2", batch: int = 5, seed: int = 0, entries: int = 6) -> int:
    """Assert the analytic gradient of every parameter matches central differences at `entries` random elements
    (all of them when fewer); needs the float64_ops fixture. Returns how many elements were checked."""
    program = GradientProgram(graph)
    loss_fn = get_loss(loss)
    feeds, targets = random_data(graph, batch, seed)
    constants = as_float64(graph.constants)

    def loss_value(values: Mapping[str, np.ndarray]) -> float:
        outputs = program.outputs(program.forward(feeds, values), batch)
        return sum(loss_fn.value(outputs[name], target) for name, target in targets.items())

    tape = program.forward(feeds, constants)
    outputs = program.outputs(tape, batch)
    analytic = program.backward(tape, {name: loss_fn.value_and_gradient(outputs[name], target)[1]
                                       for name, target in targets.items()})
    rng = np.random.default_rng(seed + 1)
    checked = 0
    for name, constant in program.parameters.items():
        assert analytic[name].shape == graph.constants[constant].shape, name
        assert analytic[name].dtype == np.float64, name
        flat = constants[constant].reshape(-1)
        picks = rng.choice(flat.size, min(entries, flat.size), replace=False)
        numeric = []
        for i in picks:
            values = []
            for sign in (1, -1):
                moved = flat.copy()
                moved[i] += sign * STEP
                values.append(loss_value({**constants, constant: moved.reshape(constants[constant].shape)}))
            numeric.append((values[0] - values[1]) / (2 * STEP))
        np.testing.assert_allclose(analytic[name].reshape(-1)[picks], numeric, rtol=RTOL, atol=ATOL, err_msg=name)
        checked += len(picks)
    return checked
