"""Training data given as PyTorch CUDA tensors (H100): `fit` copies them into the training device's memory on the GPU
(no trip through the host) and trains exactly as it does on the same data given as numpy arrays; `step` on a batch
of them copies it on the GPU too (through memory shared with CUDA) and trains as on the same batch from numpy, also
when the batch is written late on the caller's stream or on streams its arrays name."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import coopnn
from tests.backends.resident_fit import SEED
from tests.conftest import import_torch

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch():
    torch = import_torch()
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


@contextlib.contextmanager
def _trainer():
    """A fresh model of 2 inputs and 3 outputs on the H100, and its trainer (the same for every run)."""
    with coopnn.mlp(2, [32, 32], 3, backend="coopvec", weights="fp16", seed=1) as model:
        yield model, coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2), seed=SEED)


def test_fit_on_cuda_tensors_equals_fit_on_numpy_arrays(coopvec_device, torch, monkeypatch):
    from coopnn.interop import tensors

    rng = np.random.default_rng(6)
    x = rng.uniform(0, 1, (3000, 2)).astype(np.float32)
    y = rng.uniform(0, 1, (3000, 3)).astype(np.float32)
    runs = []
    for data in ((x, y), (torch.from_numpy(x).cuda(), torch.from_numpy(y).double().cuda())):
        with _trainer() as (model, trainer):
            to_host = []
            monkeypatch.setattr(tensors, "to_host", lambda name, value: to_host.append(name))
            losses = trainer.fit(*data, steps=9, batch_size=500, progress=False, read_every=4)
            monkeypatch.undo()
            assert to_host == [], "the CUDA data went through the host"
            runs.append((losses, model.run(x)))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_a_second_fit_on_cuda_tensors_of_the_same_shapes_refills_the_shared_buffers(coopvec_device, torch):
    rng = np.random.default_rng(7)
    sets = [(rng.uniform(0, 1, (3000, 2)).astype(np.float32), rng.uniform(0, 1, (3000, 3)).astype(np.float32))
            for _ in range(2)]
    runs = []
    for on_cuda in (False, True):
        with _trainer() as (model, trainer):
            for index, (x, y) in enumerate(sets):
                data = (torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) if on_cuda else (x, y)
                losses = trainer.fit(*data, steps=5, batch_size=500, progress=False)
                if index == 0:
                    kept = dict(trainer.session.kept_data.buffers)
            assert trainer.session.kept_data.buffers == kept and len(trainer.session.recordings) == 1
            runs.append((losses, model.run(sets[1][0])))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_step_on_cuda_tensors_equals_step_on_numpy_arrays_without_a_host_copy(coopvec_device, torch, monkeypatch):
    from coopnn.interop import tensors

    rng = np.random.default_rng(7)
    # sizes that grow (the shared buffers are made anew), shrink, and are not multiples of the kernel's granularity
    batches = [(rng.uniform(0, 1, (n, 2)).astype(np.float32), rng.uniform(0, 1, (n, 3)).astype(np.float32))
               for n in (700, 700, 1500, 33, 1500)]
    runs = []
    for on_gpu in (False, True):
        with _trainer() as (model, trainer):
            to_host = []
            monkeypatch.setattr(tensors, "to_host", lambda name, value: to_host.append(name))
            losses = [trainer.step(*((torch.from_numpy(bx).cuda(), torch.from_numpy(by).double().cuda()) if on_gpu
                                     else (bx, by))) for bx, by in batches]
            monkeypatch.undo()
            assert to_host == [], "the CUDA batch went through the host"
            runs.append((losses, model.run(batches[0][0])))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


class _Interface:
    """A CUDA array known only by its `__cuda_array_interface__`, which names the stream its data is written on."""

    def __init__(self, tensor, stream):
        self.tensor = tensor
        self.__cuda_array_interface__ = {**tensor.__cuda_array_interface__, "version": 3, "stream": stream.cuda_stream}


def _late_copy(torch, values: np.ndarray, stream):
    """A CUDA tensor that holds NaN until `stream`, held up by a long spin, writes `values` into it."""
    source = torch.from_numpy(values).cuda()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        late = torch.full_like(source, float("nan"))
        torch.cuda._sleep(100_000_000)
        late.copy_(source)
    source.record_stream(stream)  # its memory is not handed out again before `stream` has read it
    return late


@pytest.mark.parametrize("streams", ["one", "two"])
def test_step_copies_cuda_batches_only_once_their_streams_wrote_them(coopvec_device, torch, streams):
    """The batch is written late on the caller's stream ("one": the GPU waits for CUDA's copies), or on two streams
    named by the arrays ("two": the host waits for CUDA); either way the step trains on the written values."""
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 1, (900, 2)).astype(np.float32)
    y = rng.uniform(0, 1, (900, 3)).astype(np.float32)
    runs = []
    for on_gpu in (False, True):
        with _trainer() as (model, trainer):
            losses = []
            for _ in range(3):
                if not on_gpu:
                    losses.append(trainer.step(x, y))
                elif streams == "one":
                    side = torch.cuda.Stream()
                    xt, yt = _late_copy(torch, x, side), _late_copy(torch, y, side)
                    with torch.cuda.stream(side):
                        losses.append(trainer.step(xt, yt))
                else:
                    first, second = torch.cuda.Stream(), torch.cuda.Stream()
                    xt, yt = _late_copy(torch, x, first), _late_copy(torch, y, second)
                    losses.append(trainer.step(_Interface(xt, first), _Interface(yt, second)))
            runs.append((losses, model.run(x)))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
