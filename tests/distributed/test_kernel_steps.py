"""Data-parallel training of a Vulkan training session (the portable backend on lavapipe, `vulkan` marker) against an
in-process group of threads: the gradient through the host (`HostTransport`), batches drawn on the device with each
rank's seed; two ranks at batch B take the steps of one trainer at batch 2B on the same rows."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.distributed import DataParallelTrainer, rank_seed
from coopnn.distributed.gradient_transport import HostTransport
from coopnn.shaders.targets.sampler import sample_rows
from tests.distributed.thread_group import run_ranks

pytestmark = pytest.mark.vulkan

rng = np.random.default_rng(2)
X = rng.uniform(-1, 1, (512, 2)).astype(np.float32)
Y = np.stack([np.sin(3 * X[:, 0]), X[:, 0] * X[:, 1]], axis=1).astype(np.float32)
BATCH, STEPS = 32, 6


def _trainer() -> coopnn.Trainer:
    model = coopnn.mlp(2, [16, 16], 2, seed=3, backend="portable")
    return coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2), seed=5)


def test_two_ranks_at_batch_b_take_the_steps_of_one_trainer_at_2b(require_vulkan):
    def fit(group):
        with DataParallelTrainer(_trainer(), group) as parallel:
            assert isinstance(parallel.steps.transport, HostTransport)
            losses = parallel.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False)
            return losses, parallel.trainer.session.parameters()

    results = run_ranks(2, fit)
    with _trainer() as reference:
        expected = []
        for step in range(STEPS):
            rows = np.concatenate([sample_rows(rank_seed(5, r), step, BATCH, len(X)) for r in range(2)])
            expected.append(reference.step(X[rows], Y[rows]))
        wanted = reference.session.parameters()
    for losses, parameters in results:
        np.testing.assert_allclose(losses, expected, rtol=1e-4, atol=1e-5)
        for name, value in wanted.items():
            np.testing.assert_allclose(parameters[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_one_rank_follows_a_single_process_fit(require_vulkan):
    def fit(group):
        with DataParallelTrainer(_trainer(), group) as parallel:
            return parallel.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False), \
                parallel.trainer.session.parameters()

    (losses, parameters), = run_ranks(1, fit)
    with _trainer() as single:
        np.testing.assert_allclose(losses, single.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False),
                                   rtol=1e-4, atol=1e-5)
        for name, value in single.session.parameters().items():
            np.testing.assert_allclose(parameters[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_status_word_set_on_one_rank_is_set_on_every_rank(require_vulkan):
    from coopnn.shaders.training.step_state import STATUS

    def agree(group):
        with DataParallelTrainer(_trainer(), group) as parallel:
            state = parallel.trainer.session.state
            if group.rank == 1:  # as the gradient kernels flag a non-finite gradient
                state.upload(np.array([1], np.uint32), 4 * STATUS)
            agreed = parallel.steps._agree_on_status()
            return agreed, int(state.download(np.uint32, STATUS + 1)[STATUS])

    assert run_ranks(2, agree) == [(True, 1), (True, 1)]
