"""Helpers the encoding tests share: central finite differences of an encoding's forward pass."""

from __future__ import annotations

import numpy as np

from coopnn.graph.encodings.base import Encoding


def numeric_gradients(encoding: Encoding, x: np.ndarray, params: np.ndarray, dy: np.ndarray,
                      step: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """d(sum(dy * forward)) by central differences in every parameter and every input element."""
    def loss(xs, ps):
        return float(np.sum(encoding.forward(xs, ps).astype(np.float64) * dy))

    d_params = np.zeros(params.shape)
    for i in range(params.size):
        up, down = params.copy(), params.copy()
        up[i] += step
        down[i] -= step
        d_params[i] = (loss(x, up) - loss(x, down)) / (2 * step)
    d_x = np.zeros(x.shape)
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        d_x[index] = (loss(up, params) - loss(down, params)) / (2 * step)
    return d_params, d_x


def check_gradients(encoding: Encoding, x: np.ndarray, rng: np.random.Generator, params: np.ndarray | None = None,
                    step: float = 1e-3, inputs: bool = True) -> None:
    """The analytic backward pass agrees with finite differences (in the inputs too, where `inputs`)."""
    params = encoding.initial_parameters(rng) if params is None else params
    params = params.astype(np.float32)
    dy = rng.standard_normal((len(x), encoding.n_output_dims))
    d_params, d_x = encoding.backward(x.astype(np.float32), params, dy.astype(np.float32))
    want_params, want_x = numeric_gradients(encoding, x.astype(np.float32), params, dy, step)
    np.testing.assert_allclose(d_params, want_params, rtol=2e-2, atol=2e-3)
    if inputs:
        np.testing.assert_allclose(d_x, want_x, rtol=2e-2, atol=2e-3 * max(1.0, float(np.abs(want_x).max())))
