"""`TorchGroup` over a real `torch.distributed` group of world size 1: gloo on the CPU with the numpy trainer, and
(gpu marker) NCCL on the GPU with the coopvec trainer, whose gradient then goes through memory shared by Vulkan and
CUDA; either follows the single-process trainer. Without torch.distributed initialised it is a typed error."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.distributed import DataParallelTrainer
from coopnn.errors import InputError
from tests.conftest import import_torch

torch = import_torch()
dist = pytest.importorskip("torch.distributed", reason="needs torch.distributed")

rng = np.random.default_rng(3)
X = rng.uniform(-1, 1, (4096, 3)).astype(np.float32)
Y = np.stack([np.sin(2 * X[:, 0]), X[:, 1] * X[:, 2]], axis=1).astype(np.float32)
STEPS, BATCH = 8, 512


@pytest.fixture
def one_rank_group(tmp_path, request):
    if not dist.is_available():
        pytest.skip("this PyTorch has no torch.distributed")
    backend = request.param
    if backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        pytest.skip("needs PyTorch with a CUDA device and NCCL")
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        from coopnn.distributed import TorchGroup

        yield TorchGroup()
    finally:
        dist.destroy_process_group()


def _compare(backend: str, transport: str, group, **options) -> None:
    def trainer():
        model = coopnn.mlp(3, [32, 32], 2, seed=1, backend=backend, **options)
        return coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2), seed=9)

    with DataParallelTrainer(trainer(), group) as parallel:
        assert type(parallel.steps).__name__ == transport or type(parallel.steps.transport).__name__ == transport
        losses = parallel.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False)
        parameters = parallel.trainer.session.parameters()
    with trainer() as single:
        np.testing.assert_allclose(losses, single.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False),
                                   rtol=1e-4, atol=1e-5)
        for name, value in single.session.parameters().items():
            np.testing.assert_allclose(parameters[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("one_rank_group", ["gloo"], indirect=True)
def test_a_gloo_group_of_one_follows_the_single_process_numpy_trainer(one_rank_group):
    assert (one_rank_group.rank, one_rank_group.world_size, one_rank_group.backend) == (0, 1, "gloo")
    np.testing.assert_array_equal(one_rank_group.all_reduce_sum(np.arange(3, dtype=np.float32)), [0, 1, 2])
    _compare("numpy", "HostReducedSteps", one_rank_group)


@pytest.mark.gpu
@pytest.mark.parametrize("one_rank_group", ["nccl"], indirect=True)
def test_an_nccl_group_of_one_follows_the_single_gpu_coopvec_trainer(coopvec_device, one_rank_group):
    _compare("coopvec", "CudaTransport", one_rank_group, weights="fp16")


@pytest.mark.gpu
@pytest.mark.parametrize("one_rank_group", ["gloo"], indirect=True)
def test_a_gloo_group_of_one_follows_the_single_gpu_coopvec_trainer_through_the_host(coopvec_device,
                                                                                      one_rank_group):
    _compare("coopvec", "HostTransport", one_rank_group, weights="fp16")


def test_torch_group_without_torch_distributed_initialised_is_an_input_error():
    from coopnn.distributed import TorchGroup

    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(InputError, match="init_process_group"):
        TorchGroup()
