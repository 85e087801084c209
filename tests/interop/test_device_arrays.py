"""`coopnn.to_device` arrays on a Vulkan device (lavapipe in CI, validation layer on): round trips, runs that keep data
on the device, chaining models, outputs that outlive their model, errors naming what is wrong, no growth."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from tests.conftest import ROOT

pytestmark = pytest.mark.vulkan
MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
TWO_HEADS = ROOT / "models" / "nerf_skip_two_heads.onnx"


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _x(batch, features=32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, features)).astype(np.float32)


def test_round_trip_converts_to_float32_once():
    x = _x(77).astype(np.float64)
    d = coopnn.to_device(x)
    assert d.shape == (77, 32) and d.dtype == np.float32 and d.nbytes == 77 * 32 * 4
    np.testing.assert_array_equal(d.numpy(), x.astype(np.float32))
    assert "DeviceArray shape=(77, 32)" in repr(d)


def test_run_on_device_arrays_equals_the_numpy_path_and_chains():
    with coopnn.load(MLP, backend="portable") as model:
        x = _x(1000, seed=1)
        y = model.run(coopnn.to_device(x))
        assert isinstance(y, coopnn.DeviceArray) and y.shape == (1000, 16)
        np.testing.assert_array_equal(y.numpy(), model.run(x))
        assert model.last_gpu_ms is not None and model.device_messages == []
        with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable") as small:
            with pytest.raises(InputError, match=r"device array for input .* has shape \[1000, 16\]"):
                small.run(y)


def test_several_inputs_and_outputs():
    with coopnn.load(TWO_HEADS, backend="portable") as model:
        feeds = {t.name: np.random.default_rng(2).uniform(-1, 1, (64,) + t.shape[1:]).astype(np.float32)
                 for t in model.inputs}
        got = model.run({name: coopnn.to_device(v) for name, v in feeds.items()})
        want = model.run(feeds)
        for name in want:
            np.testing.assert_array_equal(got[name].numpy(), want[name])


def test_an_output_outlives_its_model():
    model = coopnn.load(MLP, backend="portable")
    x = _x(100, seed=3)
    want = model.run(x)
    y = model.run(coopnn.to_device(x))
    model.close()
    gc.collect()
    np.testing.assert_array_equal(y.numpy(), want)


def test_mixed_inputs_out_and_numpy_backend_are_refused():
    with coopnn.load(TWO_HEADS, backend="portable") as model:
        names = [t.name for t in model.inputs]
        feeds = {names[0]: coopnn.to_device(np.zeros((4, 3), np.float32)), names[1]: np.zeros((4, 3), np.float32)}
        with pytest.raises(InputError, match="every input as a device array"):
            model.run(feeds)
    with coopnn.load(MLP, backend="portable") as model:
        with pytest.raises(InputError, match="out= takes numpy arrays"):
            model.run(coopnn.to_device(_x(4)), out=np.empty((4, 16), np.float32))
    with coopnn.load(MLP, backend="numpy") as model:
        with pytest.raises(InputError, match="device arrays need a Vulkan backend"):
            model.run(coopnn.to_device(_x(4)))


def test_repeated_runs_grow_nothing(monkeypatch):
    monkeypatch.delenv("COOPNN_VALIDATION", raising=False)
    with coopnn.load(MLP, backend="portable") as model:
        d = coopnn.to_device(_x(64, seed=4))
        for _ in range(20):
            model.run(d)
        gc.collect()
        context = model._executable.context
        objects = context.live_objects()
        for _ in range(300):
            model.run(d)
        gc.collect()
        assert context.live_objects() == objects


def test_a_model_in_the_arrays_shared_context_binds_them_without_importing():
    with coopnn.load(MLP, backend="portable") as model:
        x = coopnn.to_device(_x(64, seed=4))
        y = model.run(x)
        context = model._executable.context
        assert context.shared_context is x.arena.shared_context
        assert x._storage.imports == {} and y._storage.imports == {}
        np.testing.assert_allclose(y.numpy(), model.run(x.numpy()), rtol=1e-6, atol=1e-7)
