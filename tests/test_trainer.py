"""The Trainer on the numpy backend: the loss falls by a stated factor on a fixed task, the model runs the new
weights at once, checkpoints resume exactly, data and backend errors are typed (samples that are not finite
included), optimizers by name, a closed trainer leaves the model its weights, and (where torch is installed) the loss
curve is PyTorch's for the same start and batches."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.shaders.targets.sampler import sample_rows
from coopnn.errors import BackendUnavailableError, CompileError, InputError, ModelFormatError
from coopnn.graph.ir import Activation, Op
from coopnn.model import prepare
from coopnn.backends.numpy.inference import run_graph
from coopnn.backends import training_backends
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.parameters import with_parameters
from coopnn import trainer as trainer_module
from tests.conftest import ROOT, import_torch

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (2048, 2)).astype(np.float32)
Y = np.stack([np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]), X[:, 0] * X[:, 1]], axis=1).astype(np.float32)
FALL = 100  # the fixed task's loss after 200 steps is below its initial loss divided by this (measured: ~360)


def _trainer(seed: int = 0, lr: float = 1e-2, **kwargs) -> coopnn.Trainer:
    model = coopnn.mlp(2, [32, 32], 2, seed=seed, backend="numpy")
    return coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=lr), seed=seed, **kwargs)


def test_loss_falls_by_the_stated_factor_on_a_fixed_regression():
    trainer = _trainer()
    before = trainer.evaluate(X, Y)
    losses = trainer.fit(X, Y, steps=200, batch_size=256, progress=False)
    after = trainer.evaluate(X, Y)
    assert losses.shape == (200,) and trainer.steps == 200
    assert after < before / FALL, (before, after)
    assert losses[-20:].mean() < losses[:20].mean() / FALL * 4


def test_same_seed_same_loss_curve():
    curves = [_trainer().fit(X, Y, steps=30, batch_size=128, progress=False) for _ in range(2)]
    np.testing.assert_array_equal(curves[0], curves[1])
    other = _trainer(seed=1).fit(X, Y, steps=30, batch_size=128, progress=False)
    assert not np.array_equal(curves[0], other)


def test_an_interrupted_fit_counts_the_steps_that_ran(monkeypatch):
    trainer = _trainer()
    step = trainer.session.step
    calls = []

    def interrupt_on_the_third_step(feeds, targets):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return step(feeds, targets)

    monkeypatch.setattr(trainer.session, "step", interrupt_on_the_third_step)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(X, Y, steps=10, batch_size=50, progress=False)
    assert trainer.steps == trainer.session.optimizer.step_count == 2


def test_step_returns_the_batch_loss_before_the_update():
    trainer = _trainer()
    x, y = X[:64], Y[:64]
    before = trainer.evaluate(x, y)
    assert trainer.step(x, y) == pytest.approx(before, rel=1e-6)
    assert trainer.evaluate(x, y) < before


def test_model_runs_the_trained_weights_at_once():
    trainer = _trainer()
    model = trainer.model
    first = model.run(X[:8])
    trainer.step(X, Y)
    after_one = model.run(X[:8])
    assert not np.array_equal(first, after_one)
    want = run_graph(with_parameters(model.graph, trainer.session.parameters()), {"x": X[:8]})["y"]
    np.testing.assert_array_equal(after_one, want)
    trainer.fit(X, Y, steps=3, batch_size=64, progress=False)
    np.testing.assert_allclose(((model.run(X) - Y) ** 2).mean(), trainer.evaluate(X, Y), rtol=1e-5)


def test_on_step_sees_the_current_weights_and_feeds_the_progress_bar(capsys):
    trainer = _trainer()
    seen = []

    def on_step(step, loss):
        seen.append((step, float(((trainer.model.run(X) - Y) ** 2).mean())))
        return f"custom {step}"

    trainer.fit(X, Y, steps=10, batch_size=2048, progress=True, on_step=on_step)
    assert [s for s, _ in seen] == list(range(1, 11))
    assert seen[-1][1] < seen[0][1]
    err = capsys.readouterr().err
    assert "fit [" in err and "loss " in err and "custom 10" in err


def test_full_batch_when_batch_size_covers_the_data():
    a, b = _trainer(), _trainer(seed=0)
    np.testing.assert_array_equal(a.fit(X[:100], Y[:100], steps=3, batch_size=100, progress=False),
                                  [b.step(X[:100], Y[:100]) for _ in range(3)])


def test_checkpoint_round_trip_resumes_exactly(tmp_path):
    whole = _trainer()
    whole.fit(X, Y, steps=20, batch_size=128, progress=False)
    whole.save_checkpoint(tmp_path / "ckpt.safetensors")
    continued = whole.fit(X, Y, steps=10, batch_size=128, progress=False)

    resumed = _trainer(seed=5, lr=0.5)  # other weights, batches and learning rate: all restored from the file
    resumed.load_checkpoint(tmp_path / "ckpt.safetensors")
    assert resumed.steps == 20 and resumed.optimizer.lr == 1e-2
    np.testing.assert_array_equal(resumed.fit(X, Y, steps=10, batch_size=128, progress=False), continued)
    for name, array in whole.session.parameters().items():
        np.testing.assert_array_equal(resumed.session.parameters()[name], array)
        np.testing.assert_array_equal(resumed.model.parameters()[name], array)
    state, other = whole.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert state["step"] == other["step"] == 30
    for slot in state["slots"]:
        for name in state["slots"][slot]:
            np.testing.assert_array_equal(state["slots"][slot][name], other["slots"][slot][name])


def test_checkpoint_that_does_not_fit(tmp_path):
    trainer = _trainer()
    trainer.save_checkpoint(tmp_path / "ckpt.safetensors")
    wider = coopnn.Trainer(coopnn.mlp(2, [16, 32], 2, backend="numpy"))
    with pytest.raises(ModelFormatError, match="does not fit model.*'layers.0.weight' has shape"):
        wider.load_checkpoint(tmp_path / "ckpt.safetensors")
    sgd = coopnn.Trainer(coopnn.mlp(2, [32, 32], 2, backend="numpy"), optimizer=coopnn.optim.SGD(lr=0.1))
    with pytest.raises(ModelFormatError, match="optimizer state of type 'adam' cannot load into 'sgd'"):
        sgd.load_checkpoint(tmp_path / "ckpt.safetensors")
    trainer.model.save_parameters(tmp_path / "w.safetensors")
    with pytest.raises(ModelFormatError, match="not a coopnn checkpoint file"):
        trainer.load_checkpoint(tmp_path / "w.safetensors")


def test_losses_by_name_train():
    for loss in ("l1", "relative_l2", "huber"):
        trainer = coopnn.Trainer(coopnn.mlp(2, [32, 32], 2, backend="numpy"), loss=loss,
                                 optimizer=coopnn.optim.Adam(lr=1e-2))
        before = trainer.evaluate(X, Y)
        trainer.fit(X, Y, steps=60, batch_size=256, progress=False)
        assert trainer.evaluate(X, Y) < before / 3, loss


def test_bce_with_logits_learns_a_classifier():
    labels = (X[:, :1] * X[:, 1:] > 0).astype(np.float32)
    trainer = coopnn.Trainer(coopnn.mlp(2, [32, 32], 1, backend="numpy"), loss="bce_with_logits",
                             optimizer=coopnn.optim.Adam(lr=1e-2))
    trainer.fit(X, labels, steps=200, batch_size=256, progress=False)
    accuracy = ((trainer.model.run(X) > 0) == (labels > 0.5)).mean()
    assert accuracy > 0.95


def test_multi_output_zoo_model_trains_with_targets_by_name():
    model = coopnn.load(ROOT / "models" / "nerf_skip_two_heads.onnx", backend="numpy")
    feeds = {t.name: rng.uniform(-1, 1, (512,) + t.shape[1:]).astype(np.float32) for t in model.inputs}
    start = model.run(feeds)
    targets = {name: np.full_like(value, 0.5) for name, value in start.items()}
    trainer = coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=3e-3))
    before = trainer.evaluate(feeds, targets)
    trainer.fit(feeds, targets, steps=40, batch_size=128, progress=False)
    assert trainer.evaluate(feeds, targets) < before / 5
    one = next(iter(targets))
    assert coopnn.Trainer(model).evaluate(feeds, {one: targets[one]}) > 0  # some outputs only


def test_data_errors_are_typed():
    trainer = _trainer()
    with pytest.raises(InputError, match=r"targets for 'y' have shape \[2048, 3\]; expected \[2048, 2\]"):
        trainer.step(X, np.zeros((2048, 3)))
    with pytest.raises(InputError, match="input 'x' has shape"):
        trainer.step(X[:, :1], Y)
    with pytest.raises(InputError, match="targets"):
        trainer.step(X, {"nope": Y})
    with pytest.raises(InputError, match="give numbers"):
        trainer.step(X, np.full((2048, 2), "a"))
    with pytest.raises(InputError, match="no samples"):
        trainer.fit(X[:0], Y[:0], steps=1, progress=False)
    with pytest.raises(InputError, match="batch_size a whole number >= 1, not 0"):
        trainer.fit(X, Y, steps=1, batch_size=0, progress=False)
    for steps in ("5", 2.0, True, -1):
        with pytest.raises(InputError, match=f"steps a whole number >= 0, not {steps!r}"):
            trainer.fit(X, Y, steps=steps, progress=False)
    with pytest.raises(InputError, match="read_every a whole number >= 1, not 0"):
        trainer.fit(X, Y, steps=1, read_every=0, progress=False)
    with pytest.raises(InputError, match="unknown loss"):
        coopnn.Trainer(trainer.model, loss="cross_entropy")
    with pytest.raises(InputError, match="unknown optimizer 'adamw'; optimizers: adam, sgd, or an Optimizer"):
        coopnn.Trainer(trainer.model, optimizer="adamw")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_samples_that_are_not_finite_are_refused_before_a_step(bad, monkeypatch):
    """One such sample makes every parameter NaN: refused, naming the data and the sample (found in the fourth
    chunk the data is tested in), with the weights kept."""
    monkeypatch.setattr(trainer_module, "FINITE_CHECK_ROWS", 100)
    trainer = _trainer()
    before = trainer.model.parameters()
    x, y = X.copy(), Y.copy()
    x[[369, 1500], 1] = bad
    with pytest.raises(InputError, match=r"input 'x' holds NaN or infinity \(first in sample 369\)"):
        trainer.fit(x, Y, steps=3, batch_size=64, progress=False)
    y[5, 0] = bad
    with pytest.raises(InputError, match=r"targets for 'y' holds NaN or infinity \(first in sample 5\)"):
        trainer.step(X, y)
    for name, value in trainer.model.parameters().items():
        np.testing.assert_array_equal(value, before[name])
    assert not np.isfinite(trainer.evaluate(X, y))  # no step: the loss says it


def test_cuda_arrays_are_found_in_arrays_mappings_and_sequences():
    class CudaLike:  # what the CUDA array interface looks like to coopnn
        __cuda_array_interface__ = {"shape": (4, 2), "typestr": "<f4", "data": (0, False), "version": 3}

    cuda = CudaLike()
    assert not trainer_module._holds_cuda_arrays(X, {"y": Y}, [X, Y])
    assert trainer_module._holds_cuda_arrays(X, cuda)
    assert trainer_module._holds_cuda_arrays({"x": cuda}, Y)
    assert trainer_module._holds_cuda_arrays([X, cuda], Y)


def test_finite_samples_whose_sum_overflows_are_not_refused():
    # the rows' sums overflow to infinity, so every sample is tested, and every one is finite
    x = np.full((300, 4), 3e38, np.float32)
    assert trainer_module._first_non_finite(x) is None
    x[250, 3] = -np.inf
    assert trainer_module._first_non_finite(x) == 250


def test_optimizers_by_name_train_with_their_defaults():
    trainer = coopnn.Trainer(coopnn.mlp(2, [32, 32], 2, backend="numpy"), optimizer="sgd")
    assert type(trainer.optimizer) is coopnn.optim.SGD
    before = trainer.evaluate(X, Y)
    trainer.fit(X, Y, steps=20, batch_size=256, progress=False)
    assert trainer.evaluate(X, Y) < before


def test_backend_without_training_says_which_backends_train():
    assert training_backends() == ["numpy", "portable", "coopvec"]
    with pytest.raises(BackendUnavailableError, match=r"backend 'tpu' cannot train; backends that train: numpy"):
        coopnn.Trainer(coopnn.mlp(2, [4], 1, backend="numpy"), backend="tpu")


def test_graph_that_cannot_be_trained_names_the_node():
    b = GraphBuilder("quantised")
    x = b.input("x", 2)
    h = b.node(Op.LINEAR, "layer", [x, b.constant("w", np.ones((3, 2)))], activation=Activation(Op.TANH))
    y = b.node(Op.FLOOR, "round_down", [h])
    with pytest.raises(CompileError, match="node 'round_down'"):
        coopnn.Trainer(prepare(b.graph([y]), backend="numpy"))


def test_loss_curve_matches_pytorch_from_the_same_start_and_batches():
    torch = import_torch()
    trainer = _trainer()
    weights = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in trainer.model.parameters().items()}
    optimizer = torch.optim.Adam(list(weights.values()), lr=1e-2)
    expected = []
    for step in range(50):
        rows = sample_rows(0, step, 128, len(X))  # the Trainer's sampler with the same seed
        h = torch.tensor(X[rows])
        for i in range(3):
            h = h @ weights[f"layers.{i}.weight"].T + weights[f"layers.{i}.bias"]
            h = torch.relu(h) if i < 2 else h
        loss = ((h - torch.tensor(Y[rows])) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        expected.append(loss.item())
    np.testing.assert_allclose(trainer.fit(X, Y, steps=50, batch_size=128, progress=False), expected, rtol=1e-4)


def test_training_options_the_backend_does_not_take_are_refused_by_name():
    with coopnn.mlp(2, [8], 2, backend="numpy") as model:
        with pytest.raises(coopnn.InputError, match=r"training on 'numpy' takes no options, not gradients='coopmat'"):
            coopnn.Trainer(model, gradients="coopmat")


def test_training_option_values_are_checked_against_the_backend_record():
    from coopnn.backends.base import check_training_options

    class Record:
        name, training_options = "fake", {"gradients": ("auto", "coopmat")}

    check_training_options(Record, {"gradients": "coopmat"})
    with pytest.raises(coopnn.InputError, match=r"gradients must be one of \['auto', 'coopmat'\], not 'tiles'"):
        check_training_options(Record, {"gradients": "tiles"})
    with pytest.raises(coopnn.InputError, match=r"takes gradients=\['auto', 'coopmat'\], not step='tiled'"):
        check_training_options(Record, {"step": "tiled"})
    with pytest.raises(coopnn.InputError, match=r"gradients must be one of \['auto', 'coopmat'\], not array"):
        check_training_options(Record, {"gradients": np.array(["auto", "coopmat"])})


@pytest.mark.parametrize("seed", ["a", None, 1.5, -1, 1 << 32, True])
def test_a_seed_the_sampler_cannot_take_is_refused_by_name(seed):
    with coopnn.mlp(2, [8], 2, backend="numpy") as model:
        with pytest.raises(coopnn.InputError, match="seed must be a whole number from 0 to 2"):
            coopnn.Trainer(model, seed=seed)


def test_a_closed_trainer_leaves_the_model_its_trained_weights_and_refuses_to_train():
    with _trainer() as trainer:
        trainer.fit(X, Y, steps=20, batch_size=256, progress=False)
        trained = {name: value.copy() for name, value in trainer.session.parameters().items()}
        session = trainer.session
    assert session.master == {}  # the session was closed on leaving the block
    for name, value in trainer.model.parameters().items():
        np.testing.assert_array_equal(value, trained[name])
    np.testing.assert_array_equal(trainer.model.run(X), run_graph(with_parameters(trainer.model.graph, trained),
                                                                    {"x": X})["y"])
    for call in (lambda: trainer.step(X, Y), lambda: trainer.fit(X, Y, steps=1, progress=False),
                 lambda: trainer.evaluate(X, Y)):
        with pytest.raises(coopnn.TrainerClosedError, match="this trainer is closed; make a new Trainer"):
            call()
    assert issubclass(coopnn.TrainerClosedError, coopnn.ModelClosedError)
    trainer.close()  # again: nothing
