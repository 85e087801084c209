"""`coopnn.to_device` arrays on a Vulkan device (lavapipe in CI, validation layer on): round trips, runs that keep data
on the device, chaining models, outputs that outlive their model, errors naming what is wrong, no growth."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

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


def test_arrays_made_before_any_model_share_the_models_context():
    """`coopnn.to_device` declares every backend's device features before the arena's context is made, so a model
    loaded afterwards joins that context and binds the array as it is; the array used to sit in a second VkDevice and
    be imported by fd into the model's. A fresh interpreter, as nothing else may have loaded a backend first."""
    code = ("import numpy as np, coopnn; "
            "x = coopnn.to_device(np.ones((64, 32), np.float32)); "
            f"m = coopnn.load({str(MLP)!r}, backend='portable'); y = m.run(x); "
            "print(m._executable.context.shared_context is x.arena.shared_context, len(x._storage.imports), "
            "len(y._storage.imports))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.split() == ["True", "0", "0"]


def test_a_run_is_one_dispatch_over_the_whole_batch_on_the_arrays_own_buffers(monkeypatch):
    """The shape of a run on device arrays: the model's kernel once, with a group for every workgroup of samples, on
    the weights and the arrays' own buffers (no import, no copy), with the batch in the push constants."""
    with coopnn.load(MLP, backend="portable") as model:
        executable = model._executable
        context = executable.context.shared_context
        x = coopnn.to_device(_x(1000, seed=5))
        runs = []
        real_run = type(context).run
        monkeypatch.setattr(type(context), "run", lambda self, steps, **kw: runs.append(list(steps)) or
                            real_run(self, steps, **kw))
        y = model.run(x)
        (dispatch,), = runs
        assert dispatch.kernel is executable.kernel
        assert dispatch.group_count == -(-1000 // executable.binary.workgroup_size[0])
        assert dispatch.buffers == (executable.weight_buffer, x._buffer, y._buffer)
        assert bytes(dispatch.push_constants) == bytes(executable.binary.pack_push(count=1000))
        np.testing.assert_allclose(y.numpy(), model.run(x.numpy()), rtol=1e-6, atol=1e-7)


def test_float16_arrays_round_trip_and_say_so():
    x = _x(50, seed=6)
    d = coopnn.to_device(x, dtype="float16")
    assert d.dtype == np.float16 and d.nbytes == 50 * 32 * 2 and "float16" in repr(d)
    np.testing.assert_array_equal(d.numpy(), x.astype(np.float16))
    with pytest.raises(InputError, match="device arrays hold float32 or float16, not 'int8'"):
        coopnn.to_device(x, dtype="int8")


def test_float16_arrays_are_refused_where_float32_is_read():
    """Only coopvec has float16-I/O kernels; training steps (and anything else binding a device array) read
    float32 ones: both say so by name rather than reading the halves as floats."""
    with coopnn.load(MLP, backend="portable") as model:
        half = coopnn.to_device(_x(64), dtype="float16")
        with pytest.raises(InputError, match="reads and writes f32 arrays, not f16: float16 device arrays run on the "
                                             "coopvec backend"):
            model.run(half)
        with pytest.raises(InputError, match=r"holds float16; float32 is read here: make it with "
                                             r"coopnn.to_device\(x, dtype='float32'\)"):
            half.bound_in(model._executable.context)


def test_one_run_takes_one_dtype():
    with coopnn.load(TWO_HEADS, backend="portable") as model:
        names = [i.name for i in model.inputs]
        feeds = {name: coopnn.to_device(_x(8, model.inputs[k].shape[1]), dtype=("float16" if k else "float32"))
                 for k, name in enumerate(names)}
        with pytest.raises(InputError, match="device arrays of one run hold one dtype; these hold float16, float32"):
            model.run(feeds)
