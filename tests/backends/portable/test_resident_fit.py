"""Device-resident training on the portable target (lavapipe in CI, validation layer on): `fit` uploads the data
once, gathers every batch on the device and reads losses once per run of steps, with the same results as step by
step; a data set too large for the device is streamed in shards, with a warning. `step` takes a batch of device
arrays, copied on the device into the step's inputs, with the same results as from the host and no recording per
batch."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import coopnn
from coopnn.runtime.executable import MAX_DEVICE_BYTES_ENV
from coopnn.shaders.targets.sampler import sample_rows
from coopnn.train.gpu import resident
from coopnn.train.gpu.recorded_runs import BLOCKS, LANES
from tests.backends.resident_fit import SEED, fit_equals_step_by_step

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _data(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    return x, np.stack([np.sin(2 * x[:, 0]), x[:, 1] * x[:, 2]], axis=1).astype(np.float32)


def _model():
    return coopnn.mlp(3, [16, 16], 2, encoding="frequency", octaves=2, seed=3, backend="portable")


# 86: blocks of 1, 4, 16 and more; 1100 in one run: more steps than the schedule and history rings hold
@pytest.mark.parametrize("steps, read_every", [(7, None), (7, 1), (7, 3), (86, 86), (1100, None)])
def test_fit_on_the_device_equals_step_by_step(steps, read_every):
    x, y = _data(500)
    fit_equals_step_by_step(_model, x, y, steps=steps, batch_size=67, read_every=read_every)


def test_a_run_hands_over_its_losses_block_by_block_and_fit_without_on_step_is_one_run():
    x, y = _data(300)
    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        session = trainer.session
        data = session.upload_data({model.inputs[0].name: x}, {model.outputs[0].name: y})
        try:
            pieces = []
            losses = session.run_steps(data, 0, 86, 50, SEED, on_losses=lambda values: pieces.append(values.copy()))
        finally:
            data.close()
        sizes = [len(p) for p in pieces]
        assert sum(sizes) == 86 and sizes[0] == 1 and set(sizes) <= set(BLOCKS)
        assert all(size <= 4 * before for before, size in zip(sizes, sizes[1:]))
        np.testing.assert_array_equal(np.concatenate(pieces), losses)
        runs = []
        run_steps = session.run_steps
        session.run_steps = lambda *args, **kwargs: runs.append(args[2]) or run_steps(*args, **kwargs)
        trainer.fit(x, y, steps=30, batch_size=50, progress=False)
        assert runs == [30]
        trainer.fit(x, y, steps=30, batch_size=50, progress=False, on_step=lambda step, loss: None)
        assert len(runs) > 2 and sum(runs) == 60  # runs read back one by one for on_step


def test_a_fit_on_data_of_the_same_shapes_refills_the_last_fits_buffers_and_runs_its_recording():
    """A second fit on other data of the same shapes fills the first fit's buffers anew and runs the steps recorded
    for them, with the losses and weights of a session that made new ones; data of other shapes replaces them."""
    first, second = _data(300, seed=1), _data(300, seed=2)
    results = []
    for keep in (True, False):
        with _model() as model:
            trainer = coopnn.Trainer(model, seed=SEED)
            trainer.fit(*first, steps=5, batch_size=50, progress=False)
            kept = dict(trainer.session.kept_data.buffers)
            assert len(kept) == 2  # the inputs and the targets
            if not keep:
                trainer.session.kept_data.destroy()
            losses = trainer.fit(*second, steps=5, batch_size=50, progress=False)
            assert len(trainer.session.recordings) == (1 if keep else 2)
            results.append((losses, model.run(second[0])))
            if keep:
                assert trainer.session.kept_data.buffers == kept
                context, kept_when_made = trainer.session.context, []
                create_buffer = context.create_buffer
                context.create_buffer = lambda *a, **k: (kept_when_made.append(len(trainer.session.kept_data.buffers)),
                                                         create_buffer(*a, **k))[1]
                trainer.fit(*_data(200), steps=2, batch_size=50, progress=False)
                assert kept_when_made == [0, 0]  # the buffers of other sizes went first
                assert set(trainer.session.kept_data.buffers).isdisjoint(kept)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_a_data_set_larger_than_the_session_keeps_is_freed_when_its_fit_ends():
    x, y = _data(300)
    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        trainer.session.kept_data.limit = 300 * (3 + 2) * 4 - 1  # one byte short of the data set's two buffers
        made = []
        create_buffer = trainer.session.context.create_buffer
        trainer.session.context.create_buffer = lambda *a, **k: made.append(create_buffer(*a, **k)) or made[-1]
        trainer.fit(x, y, steps=2, batch_size=50, progress=False)
        data_set = [buffer for buffer in made if buffer.size in (300 * 3 * 4, 300 * 2 * 4)]
        assert trainer.session.kept_data.buffers == {} and len(data_set) == 2
        assert not any(buffer.alive for buffer in data_set)


def test_a_closed_trainer_frees_its_session_and_the_model_runs_the_trained_weights():
    """Closed before the model ran the new weights: the model takes them first, then the session frees its buffers,
    the last fit's data set among them."""
    x, y = _data(300)
    with _model() as model:
        with coopnn.Trainer(model, seed=SEED) as trainer:
            trainer.fit(x, y, steps=5, batch_size=50, progress=False)
            trained = {name: value.copy() for name, value in trainer.session.parameters().items()}
            session = trainer.session
            kept = list(session.kept_data.buffers.values())
        assert kept and not any(buffer.alive for buffer in kept)
        with coopnn.mlp(3, [16, 16], 2, encoding="frequency", octaves=2, backend="numpy") as reference:
            reference.set_parameters(trained)
            np.testing.assert_allclose(model.run(x), reference.run(x), rtol=1e-4, atol=1e-5)
        with pytest.raises(coopnn.TrainerClosedError):
            trainer.fit(x, y, steps=1, progress=False)


def test_a_batch_as_large_as_the_data_takes_the_whole_data_in_order():
    x, y = _data(90)
    fit_equals_step_by_step(_model, x, y, steps=3, batch_size=1000)


def test_on_step_sees_the_weights_of_its_step_at_multiples_of_read_every():
    x, y = _data(300)
    seen = {}
    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        trainer.fit(x, y, steps=6, batch_size=50, progress=False, read_every=3,
                    on_step=lambda step, loss: seen.setdefault(step, model.run(x[:4])))
        assert sorted(seen) == [1, 2, 3, 4, 5, 6]
        np.testing.assert_array_equal(seen[6], model.run(x[:4]))
        with _model() as again:
            stepped = coopnn.Trainer(again, seed=SEED)
            for step in range(3):
                rows = sample_rows(SEED, step, 50, len(x))
                stepped.step(x[rows], y[rows])
            np.testing.assert_array_equal(seen[3], again.run(x[:4]))


def test_a_data_set_too_large_for_the_device_is_streamed_in_shards(monkeypatch):
    x, y = _data(400)
    row_bytes = 4 * (3 + 2)
    monkeypatch.setattr(resident, "data_budget", lambda context: (1 << 30, 150 * row_bytes))
    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        with pytest.warns(UserWarning, match=r"streamed in 3 shards of 150 samples"):
            losses = trainer.fit(x, y, steps=6, batch_size=40, progress=False, read_every=2)
        with _model() as again:
            stepped = coopnn.Trainer(again, seed=SEED)
            expected = []
            for step in range(6):
                start = 150 * (step // 2 % 3)  # each run of 2 steps draws from the next shard
                shard = min(150, len(x) - start)
                rows = start + sample_rows(SEED, step, 40, shard)
                expected.append(stepped.step(x[rows], y[rows]))
        np.testing.assert_array_equal(losses, expected)


def test_fit_refuses_a_read_interval_below_one():
    x, y = _data(10)
    with _model() as model:
        with pytest.raises(coopnn.InputError, match="read_every"):
            coopnn.Trainer(model).fit(x, y, steps=1, read_every=0)


def test_a_fit_resumed_from_a_checkpoint_continues_as_an_uninterrupted_one(tmp_path):
    x, y = _data(400)
    with _model() as straight:
        expected = coopnn.Trainer(straight, seed=SEED).fit(x, y, steps=10, batch_size=50, progress=False)
        final = straight.run(x)
    with _model() as first:
        trainer = coopnn.Trainer(first, seed=SEED)
        before = trainer.fit(x, y, steps=4, batch_size=50, progress=False)
        trainer.save_checkpoint(tmp_path / "ckpt")
    with _model() as resumed:
        trainer = coopnn.Trainer(resumed, seed=SEED + 1)  # the checkpoint's seed wins
        trainer.load_checkpoint(tmp_path / "ckpt")
        after = trainer.fit(x, y, steps=6, batch_size=50, progress=False)
        np.testing.assert_array_equal(np.concatenate([before, after]), expected)
        np.testing.assert_array_equal(resumed.run(x), final)


def test_checkpoints_keep_the_loss_scaling_and_refuse_a_malformed_one(tmp_path):
    from coopnn.train.checkpoint import Checkpoint, read_checkpoint, write_checkpoint

    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        trainer.session.loss_scale, trainer.session.books.good_steps = 4.0, 3
        trainer.save_checkpoint(tmp_path / "ckpt")
        resumed = coopnn.Trainer(model, seed=SEED)
        resumed.load_checkpoint(tmp_path / "ckpt")
        assert resumed.session.scaling_state() == {"loss_scale": 4.0, "good_steps": 3}
        saved = read_checkpoint(tmp_path / "ckpt")
        write_checkpoint(tmp_path / "bad", Checkpoint(saved.parameters, saved.optimizer,
                                                      {**saved.trainer, "loss_scaling": {"loss_scale": -1.0,
                                                                                         "good_steps": 0}}))
        with pytest.raises(coopnn.ModelFormatError, match="malformed loss-scaling state"):
            resumed.load_checkpoint(tmp_path / "bad")


@pytest.mark.parametrize("shards", [1, 3])
def test_fit_on_device_arrays_equals_fit_on_numpy_arrays_without_a_host_copy(monkeypatch, shards):
    from coopnn.interop.device_arrays import DeviceArray

    x, y = _data(300)
    if shards > 1:
        monkeypatch.setattr(resident, "data_budget", lambda context: (1 << 30, 100 * 4 * (3 + 2)))
    runs = []
    for data in ((x, y), (coopnn.to_device(x), coopnn.to_device(y))):
        with _model() as model:
            host_copies = []
            monkeypatch.setattr(DeviceArray, "numpy", lambda self: host_copies.append(1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the shard warning
                losses = coopnn.Trainer(model, seed=SEED).fit(*data, steps=5, batch_size=40, progress=False,
                                                             read_every=2)
            monkeypatch.undo()
            if shards > 1:
                monkeypatch.setattr(resident, "data_budget", lambda context: (1 << 30, 100 * 4 * (3 + 2)))
            assert host_copies == []
            runs.append((losses, model.run(x)))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@pytest.mark.parametrize("on_device", ["x", "y", "both"])
def test_step_on_device_arrays_equals_step_on_numpy_arrays_without_a_host_copy(monkeypatch, on_device):
    from coopnn.interop.device_arrays import DeviceArray

    x, y = _data(120)
    batches = [(x[i:i + 40], y[i:i + 40]) for i in range(0, 120, 40)]
    runs = []
    for placed in (False, True):
        with _model() as model:
            trainer = coopnn.Trainer(model, seed=SEED)
            data = [(coopnn.to_device(bx) if placed and on_device in ("x", "both") else bx,
                     coopnn.to_device(by) if placed and on_device in ("y", "both") else by) for bx, by in batches]
            host_copies = []
            monkeypatch.setattr(DeviceArray, "numpy", lambda self: host_copies.append(1))
            losses = [trainer.step(bx, by) for bx, by in data]
            monkeypatch.undo()
            assert host_copies == [] and trainer.steps == 3
            runs.append((losses, trainer.session.parameters(), model.run(x)))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        np.testing.assert_array_equal(value, runs[1][1][name], err_msg=name)
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_loss_and_gradients_on_device_arrays_equal_those_on_numpy_arrays():
    x, y = _data(45)
    with _model() as model:
        session = coopnn.Trainer(model, seed=SEED).session
        name, output = model.inputs[0].name, model.outputs[0].name
        on_host = session.loss({name: x}, {output: y}), session.gradients({name: x}, {output: y})
        on_device = (session.loss({name: coopnn.to_device(x)}, {output: coopnn.to_device(y)}),
                     session.gradients({name: coopnn.to_device(x)}, {output: coopnn.to_device(y)}))
    assert on_host[0] == on_device[0]
    for parameter, value in on_host[1].items():
        np.testing.assert_array_equal(value, on_device[1][parameter], err_msg=parameter)


def test_a_step_on_device_arrays_larger_than_a_step_holds_is_refused_before_any_copy(monkeypatch):
    x, y = _data(300)
    limit = 60_000
    monkeypatch.setenv(MAX_DEVICE_BYTES_ENV, str(limit))
    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        before = trainer.session.parameters()
        with pytest.raises(coopnn.InputError, match=rf"a training step of 300 samples does not fit.*at most (\d+) "
                                                    rf"samples.*{MAX_DEVICE_BYTES_ENV}={limit}") as refused:
            trainer.step(coopnn.to_device(x), coopnn.to_device(y))
        assert trainer.steps == 0
        for name, value in trainer.session.parameters().items():
            np.testing.assert_array_equal(value, before[name], err_msg=name)
        most = int(re.search(r"at most (\d+) samples", str(refused.value)).group(1))
        trainer.step(coopnn.to_device(x[:most]), coopnn.to_device(y[:most]))  # still usable, up to the bound
        assert trainer.steps == 1


def test_steps_of_one_size_record_one_step_whatever_arrays_they_take(monkeypatch):
    """A step is recorded once per batch size and submitted again; each batch in device arrays is copied into the
    step's own inputs by a copy submitted ahead of it, so a training loop feeding new device arrays every step
    records no step (recording a step cost 0.4 ms of a 1.0 ms step's host time on the H100)."""
    from coopnn.runtime.vk import recording

    x, y = _data(120)
    made = []
    record = recording.Recording.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        record(self, *args, **kwargs)

    with _model() as model:
        trainer = coopnn.Trainer(model, seed=SEED)
        monkeypatch.setattr(recording.Recording, "__init__", counted)
        for i in range(0, 120, 40):
            trainer.step(coopnn.to_device(x[i:i + 40]), coopnn.to_device(y[i:i + 40]))
        for i in range(0, 120, 40):
            trainer.step(x[i:i + 40], y[i:i + 40])
        assert trainer.steps == 6 and len(made) == 2  # one for batches in device arrays, one for host arrays
        trainer.step(x[:7], y[:7])
        assert len(made) == 3


@pytest.mark.parametrize("read_every", [40, None])  # runs of 40 steps, or the whole fit as one run
def test_an_interrupted_fit_waits_for_the_gpu_counts_the_steps_that_ran_and_leaves_the_trainer_usable(
        monkeypatch, read_every):
    from coopnn.runtime.vk.recording import Recording

    x, y = _data(400)
    with _model() as model:
        before = model.run(x[:8])
        trainer = coopnn.Trainer(model, seed=SEED)
        submitted, sizes = [], []
        submit = Recording.submit

        def interrupt_on_the_third_block(self, repeat=1, lane=0):
            submit(self, repeat, lane)
            submitted.append(self)
            sizes.append(repeat)
            if len(submitted) == 3:
                raise KeyboardInterrupt

        monkeypatch.setattr(Recording, "submit", interrupt_on_the_third_block)
        with pytest.raises(KeyboardInterrupt):
            trainer.fit(x, y, steps=40, batch_size=50, progress=False, read_every=read_every)
        monkeypatch.undo()
        assert not any(recording.in_flight(lane) for recording in submitted for lane in range(LANES))
        ran = sum(sizes)  # the three blocks submitted ran to their end
        assert 0 < ran < 40 and trainer.steps == trainer.session.optimizer.step_count == ran
        assert not np.array_equal(model.run(x[:8]), before)  # the model runs the weights of the steps that ran
        losses = trainer.fit(x, y, steps=3, batch_size=50, progress=False)
        assert np.isfinite(losses).all() and trainer.session.optimizer.step_count == ran + 3
        assert trainer.session.books.drawn == ran + 3  # the sampler numbers batches on from the trainer's count
        assert model.device_messages == []


@pytest.mark.parametrize("make_optimizer, change", [
    (lambda: coopnn.optim.SGD(lr=0.1, momentum=0.5), lambda o, step: setattr(o, "lr", 0.1 / (step + 1))),
    (lambda: coopnn.optim.Adam(lr=1e-2), lambda o, step: setattr(o, "betas", (0.9 - 0.1 * step, 0.99))),
    (lambda: coopnn.optim.Adam(lr=1e-2), lambda o, step: setattr(o, "weight_decay", 0.01 * step))])
def test_optimizer_settings_changed_within_a_fit_take_effect_at_the_next_run(make_optimizer, change):
    """A schedule set from `on_step` (SGD's learning rate, Adam's betas or weight decay) reaches the steps of the
    next run of steps, as it reaches the next `step`: runs recorded with other settings are not reused."""
    x, y = _data(40)
    results = []
    for by_fit in (True, False):
        with _model() as model:
            trainer = coopnn.Trainer(model, optimizer=make_optimizer(), seed=SEED)
            if by_fit:
                trainer.fit(x, y, steps=6, batch_size=1000, progress=False, read_every=1,
                            on_step=lambda step, loss: change(trainer.optimizer, step))
            else:
                for step in range(1, 7):
                    trainer.step(x, y)
                    change(trainer.optimizer, step)
            results.append(trainer.session.parameters())
    for name, value in results[0].items():
        np.testing.assert_array_equal(value, results[1][name], err_msg=name)
