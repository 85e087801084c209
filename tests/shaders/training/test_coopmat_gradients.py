"""The cooperative-matrix weight-gradient kernel (`coopnn.shaders.training.coopmat_gradients`) on the H100: its
partial gradients of a float16 tape add up to numpy's, and a partial that is not finite sets the status word, which
the optimizer that adds the partials itself relies on; among them an infinite layer input under finite deltas, whose
bias gradients stay finite."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.shaders.training import coopmat_blocks, coopmat_gradients
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from tests.devices import Kernel

pytestmark = pytest.mark.gpu

LAYOUT = ParameterLayout.of([("w0", "b0", 64, 32), ("w1", "b1", 64, 64), ("w2", "b2", 16, 64)])
CAPACITY, BATCH = 4096, 4000  # samples past the batch are not read


@pytest.fixture(autouse=True)
def device(coopvec_device):
    """Every test here needs a device with cooperative matrices (the H100's cooperative-vector device)."""


def random_tape(tape: TapeLayout) -> np.ndarray:
    """A float16 tape with coopmat_gradients.TILE rows of capacity after its last region, as sessions make it."""
    size = (tape.width + coopmat_gradients.TILE) * CAPACITY
    return np.random.default_rng(0).uniform(-2, 2, size).astype(np.float16)


def run_products(make_context, tape: TapeLayout, values: np.ndarray) -> tuple[np.ndarray, int]:
    """The sum of the chunks' partial gradients, and the status word."""
    shader = coopmat_gradients.coopmat_gradient_shader(LAYOUT, tape)
    tasks = coopmat_blocks.task_count(LAYOUT)
    chunk_tiles, chunks = coopmat_blocks.chunking(LAYOUT, BATCH)
    kernel = Kernel(make_context(features=shader.features), shader,
                    [values, np.zeros(chunks * LAYOUT.size, np.float32), np.zeros(1, np.uint32)])
    push = shader.pack_push(count=tasks * coopmat_gradients.SUBGROUP, batch=BATCH, capacity=CAPACITY,
                            parameters=LAYOUT.size, chunk_tiles=chunk_tiles)
    _, partials, status = kernel.run(push, tasks * coopmat_gradients.SUBGROUP, chunks)
    return partials.reshape(chunks, LAYOUT.size).sum(axis=0, dtype=np.float64), int(status[0])


def numpy_gradient(tape: TapeLayout, values: np.ndarray) -> np.ndarray:
    """The flat gradient from the tape's sample-major regions, in float64."""
    gradient = np.zeros(LAYOUT.size)
    for index, layer in enumerate(LAYOUT.layers):
        deltas = values[tape.delta_start(index) * CAPACITY:][:CAPACITY * layer.rows].reshape(CAPACITY, layer.rows)
        inputs = values[tape.input_start(index) * CAPACITY:][:CAPACITY * layer.cols].reshape(CAPACITY, layer.cols)
        deltas, inputs = deltas[:BATCH].astype(np.float64), inputs[:BATCH].astype(np.float64)
        gradient[layer.weight_offset:layer.bias_offset] = (deltas.T @ inputs).ravel()
        gradient[layer.bias_offset:layer.bias_offset + layer.rows] = deltas.sum(axis=0)
    return gradient


def test_partial_gradients_add_up_to_numpys_and_leave_the_status_clear(make_context):
    tape = TapeLayout(LAYOUT.layers, "samples")
    values = random_tape(tape)
    gradient, status = run_products(make_context, tape, values)
    np.testing.assert_allclose(gradient, numpy_gradient(tape, values), rtol=1e-4, atol=1e-3)
    assert status == 0


@pytest.mark.parametrize("region", ["input", "delta"])
def test_a_non_finite_tape_value_sets_the_status(make_context, region):
    tape = TapeLayout(LAYOUT.layers, "samples")
    values = random_tape(tape)
    start = tape.input_start(1) if region == "input" else tape.delta_start(1)
    values[start * CAPACITY + 77 * 64 + 5] = np.inf  # sample 77, feature 5 of layer 1
    gradient, status = run_products(make_context, tape, values)
    assert status == 1
    layer = LAYOUT.layers[1]
    biases = gradient[layer.bias_offset:layer.bias_offset + layer.rows]
    assert np.isfinite(biases).all() == (region == "input")
