"""The PyTorch CUDA baseline: fp16 under CUDA graphs, where PyTorch sees a CUDA device (the CPU one is checked with
the other CPU baselines in test_runners.py)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.bench.models import BenchModel
from coopnn.bench.torch_runners import cuda_unavailable_reason
from coopnn.backends.numpy.inference import run_graph
from tests.conftest import ROOT

NERF = ROOT / "models" / "nerf_skip_two_heads.onnx"


@pytest.fixture
def model():
    return BenchModel.load(NERF)


def test_cuda_graph_runner_in_half_precision(model):
    if cuda_unavailable_reason():
        pytest.skip(cuda_unavailable_reason())
    from coopnn.bench.torch_runners import TorchCudaGraphRunner

    runner = TorchCudaGraphRunner(model)
    try:
        for batch in (100, 1000, 100):  # a new batch size recaptures
            feeds = model.feeds(batch, seed=batch)
            outputs, gpu_ms = runner.run(feeds)
            assert gpu_ms > 0 and runner.batch == batch
            want = run_graph(model.graph, feeds)
            for name in want:
                assert outputs[name].dtype == np.float32 and outputs[name].shape == want[name].shape
                np.testing.assert_allclose(outputs[name], want[name], rtol=2e-2, atol=2e-2)
        replayed, _ = runner.run(feeds)
        np.testing.assert_array_equal(replayed["rgb"], outputs["rgb"])
    finally:
        runner.close()
