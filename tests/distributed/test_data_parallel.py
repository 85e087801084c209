"""Data-parallel training on the numpy backend against an in-process group of threads: N ranks at batch B take the
steps of one process at batch N x B on the same batches, rank 0 draws a single process's batches, ranks start from
rank 0's parameters, an overflowing rank makes every rank skip the step, and rank 0 alone writes checkpoints that a
single-process trainer loads."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.distributed import DataParallelTrainer, rank_seed
from coopnn.errors import InputError
from coopnn.shaders.targets.sampler import sample_rows
from tests.distributed.thread_group import run_ranks

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (1024, 2)).astype(np.float32)
Y = np.stack([np.sin(3 * X[:, 0]), X[:, 0] * X[:, 1]], axis=1).astype(np.float32)
BATCH, STEPS = 64, 12


def _trainer(seed: int = 0) -> coopnn.Trainer:
    model = coopnn.mlp(2, [16, 16], 2, seed=seed, backend="numpy")
    return coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2), seed=7)


def _fit(group, steps: int = STEPS, x=X, y=Y):
    with DataParallelTrainer(_trainer(), group) as parallel:
        losses = parallel.fit(x(group.rank) if callable(x) else x, y(group.rank) if callable(y) else y,
                              steps=steps, batch_size=BATCH, progress=False)
        return losses, parallel.trainer.session.parameters(), parallel.steps.skipped


@pytest.mark.parametrize("world_size", [2, 3])
def test_n_ranks_at_batch_b_take_the_steps_of_one_process_at_n_times_b(world_size):
    results = run_ranks(world_size, _fit)
    reference = _trainer()
    expected = []
    for step in range(STEPS):
        rows = np.concatenate([sample_rows(rank_seed(7, r), step, BATCH, len(X)) for r in range(world_size)])
        expected.append(reference.step(X[rows], Y[rows]))
    for losses, parameters, _ in results:
        np.testing.assert_allclose(losses, expected, rtol=1e-4, atol=1e-5)
        for name, value in reference.session.parameters().items():
            np.testing.assert_allclose(parameters[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_one_rank_is_a_single_process_fit():
    (losses, parameters, _), = run_ranks(1, _fit)
    single = _trainer()
    np.testing.assert_array_equal(losses, single.fit(X, Y, steps=STEPS, batch_size=BATCH, progress=False))
    for name, value in single.session.parameters().items():
        np.testing.assert_array_equal(parameters[name], value)


def test_rank_seeds_keep_rank_0_and_differ_between_ranks():
    seeds = [rank_seed(7, r) for r in range(8)]
    assert seeds[0] == 7 and len(set(seeds)) == 8
    batches = [sample_rows(s, 0, BATCH, len(X)) for s in seeds[:2]]
    assert not np.array_equal(*batches)
    with pytest.raises(ValueError):
        rank_seed(7, -1)


def test_ranks_start_from_rank_0s_parameters():
    def start(group):
        model = coopnn.mlp(2, [16, 16], 2, seed=group.rank, backend="numpy")
        return DataParallelTrainer(coopnn.Trainer(model), group).trainer.model.parameters()

    first, second = run_ranks(2, start)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
def test_an_overflowing_rank_makes_every_rank_skip_the_step():
    huge = np.full_like(X, 1e30)
    results = run_ranks(2, lambda group: _fit(group, steps=1, x=lambda rank: X if rank == 0 else huge))
    initial = _trainer().session.parameters()
    for _, parameters, skipped in results:
        assert skipped == 1
        for name, value in initial.items():
            np.testing.assert_array_equal(parameters[name], value)


def test_rank_0_alone_writes_a_checkpoint_a_single_process_loads(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    writers = []
    save = coopnn.Trainer.save_checkpoint
    monkeypatch.setattr(coopnn.Trainer, "save_checkpoint",
                        lambda self, p: (writers.append(p), save(self, p))[1])

    def train_and_save(group):
        parallel = DataParallelTrainer(_trainer(), group)
        parallel.fit(X, Y, steps=5, batch_size=BATCH, progress=False)
        parallel.save_checkpoint(path)
        assert path.exists()  # on every rank: the barrier comes after rank 0's write
        return parallel.trainer.session.parameters(), group.calls

    results = run_ranks(2, train_and_save)
    assert writers == [path]
    single = _trainer()
    single.load_checkpoint(path)
    assert single.steps == 5
    for name, value in single.session.parameters().items():
        np.testing.assert_array_equal(results[1][0][name], value)
    assert results[0][1] == results[1][1]  # every rank called the same collectives in the same order


def test_bad_fit_arguments_are_input_errors():
    def bad(group):
        with pytest.raises(InputError, match="batch_size"):
            DataParallelTrainer(_trainer(), group).fit(X, Y, steps=1, batch_size=0)

    run_ranks(1, bad)
