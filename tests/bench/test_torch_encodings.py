"""The PyTorch encodings agree with the numpy ones, forward (every otype, interpolation and dimension count, grids
outside [0, 1] too) and backward (autograd against the analytic gradients)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch baseline needs torch")

from coopnn.bench.torch_encodings import encode  # noqa: E402
from coopnn.graph.encodings.registry import from_config  # noqa: E402
from tests.graph.encodings.cases import ENCODINGS, IDS, inputs  # noqa: E402


@pytest.mark.parametrize("config, n_in", ENCODINGS, ids=IDS)
def test_forward_matches_numpy(config, n_in):
    encoding = from_config(config, n_in)
    params = np.random.default_rng(2).standard_normal(encoding.n_parameters).astype(np.float32)
    x = inputs(config, n_in)
    got = encode(encoding, torch.from_numpy(x), torch.from_numpy(params)).numpy()
    np.testing.assert_allclose(got, encoding.forward(x, params), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("interpolation", ["Nearest", "Linear", "Smoothstep"])
def test_autograd_matches_the_analytic_gradients(interpolation):
    encoding = from_config({"otype": "HashGrid", "n_levels": 3, "log2_hashmap_size": 5, "base_resolution": 4,
                            "interpolation": interpolation}, 3)
    rng = np.random.default_rng(4)
    params = rng.standard_normal(encoding.n_parameters).astype(np.float32)
    x = rng.random((32, 3), dtype=np.float32)
    dy = rng.standard_normal((32, encoding.n_output_dims)).astype(np.float32)
    tx, tp = torch.from_numpy(x).requires_grad_(), torch.from_numpy(params).requires_grad_()
    (encode(encoding, tx, tp) * torch.from_numpy(dy)).sum().backward()
    d_params, d_x = encoding.backward(x, params, dy)
    np.testing.assert_allclose(tp.grad.numpy(), d_params, rtol=1e-4, atol=1e-5)
    autograd_x = np.zeros_like(x) if tx.grad is None else tx.grad.numpy()  # Nearest: no path from x
    np.testing.assert_allclose(autograd_x, d_x, rtol=1e-3, atol=1e-4)
