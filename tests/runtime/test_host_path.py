"""The host path on a real Vulkan device (lavapipe in CI, validation layer on): chunk boundaries and odd batches,
`out=`, inputs of every memory order and float type, many threads on one model, closing under load, and no growth
over 2,000 calls."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from tests.conftest import ROOT, random_feeds

pytestmark = pytest.mark.vulkan
MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
SMALL = ROOT / "models" / "mlp_3_64x2_3.onnx"
TWO_HEADS = ROOT / "models" / "nerf_skip_two_heads.onnx"


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _reference(path, feeds):
    with coopnn.load(path, backend="numpy") as model:
        return model.run(feeds)


@pytest.mark.parametrize("chunk", [64, 100])
def test_odd_batches_across_chunk_boundaries_match_numpy(chunk):
    with coopnn.load(MLP, backend="portable") as model:
        whole = {}
        for batch in (1, 63, 64, 65, 127, 129, 1000):
            x = random_feeds(model, batch, seed=batch)[model.inputs[0].name]
            whole[batch] = (x, model.run(x))
        model._executable.chunk = chunk
        for batch, (x, single_chunk) in whole.items():
            got = model.run(x)
            np.testing.assert_array_equal(got, single_chunk, err_msg=f"batch {batch}, chunks of {chunk}")
            np.testing.assert_allclose(got, _reference(MLP, x), rtol=1e-4, atol=1e-5)
        assert model._executable.last_timing.chunks == -(-1000 // chunk)
        assert model.device_messages == []


def test_several_inputs_and_outputs_across_chunks():
    with coopnn.load(TWO_HEADS, backend="portable") as model:
        model._executable.chunk = 64
        feeds = random_feeds(model, 333, seed=1)
        got, want = model.run(feeds), _reference(TWO_HEADS, feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_out_receives_the_results_in_place():
    with coopnn.load(MLP, backend="portable") as model:
        model._executable.chunk = 64
        x = random_feeds(model, 300)[model.inputs[0].name]
        out = np.full((300, 16), np.nan, np.float32)
        result = model.run(x, out=out)
        assert result is out
        np.testing.assert_array_equal(out, model.run(x))
        same = model.run(x, out={model.outputs[0].name: out})
        assert same is out


@pytest.mark.parametrize("bad, message", [
    (np.zeros((300, 16), np.float64), "expected a float32 array of shape"),
    (np.zeros((299, 16), np.float32), "expected a float32 array of shape"),
    (np.zeros((16, 300), np.float32).T, "C-contiguous"),
    ([[0.0] * 16] * 300, "is a list"),
])
def test_bad_out_is_an_input_error_naming_the_output(bad, message):
    with coopnn.load(MLP, backend="portable") as model:
        x = random_feeds(model, 300)[model.inputs[0].name]
        with pytest.raises(InputError, match=message):
            model.run(x, out=bad)
        readonly = np.zeros((300, 16), np.float32)
        readonly.flags.writeable = False
        with pytest.raises(InputError, match="writeable"):
            model.run(x, out=readonly)


def test_inputs_of_every_memory_order_and_float_type_are_converted_once():
    with coopnn.load(MLP, backend="portable") as model:
        model._executable.chunk = 64
        base = np.random.default_rng(5).uniform(-1, 1, (500, 32))
        cases = {
            "float32": base.astype(np.float32),
            "float64": base,
            "float16": base.astype(np.float16),
            "fortran": np.asfortranarray(base.astype(np.float32)),
            "strided rows": np.repeat(base.astype(np.float32), 2, axis=0)[::2],
            "strided columns": np.repeat(base.astype(np.float32), 2, axis=1)[:, ::2],
            "reversed": base.astype(np.float32)[::-1][::-1],
        }
        for name, x in cases.items():
            want = model.run(np.ascontiguousarray(x, np.float32))
            np.testing.assert_array_equal(model.run(x), want, err_msg=name)


def test_empty_batch_gives_empty_outputs():
    with coopnn.load(MLP, backend="portable") as model:
        assert model.run(np.zeros((0, 32), np.float32)).shape == (0, 16)


def test_eight_threads_share_one_model_exactly():
    with coopnn.load(SMALL, backend="portable") as model:
        inputs = [np.random.default_rng(t).uniform(-1, 1, (16 + 7 * t, 3)).astype(np.float32) for t in range(8)]
        expected = [model.run(x) for x in inputs]
        failures = []

        def work(t: int) -> None:
            try:
                for call in range(500):
                    got = model.run(inputs[t])
                    if not np.array_equal(got, expected[t]):
                        failures.append(f"thread {t}, call {call}: wrong results")
                        return
            except Exception as exc:  # noqa: BLE001 - reported below with the thread that saw it
                failures.append(f"thread {t}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert model.device_messages == []


def test_threads_with_large_batches_pipeline_over_the_shared_slots():
    with coopnn.load(MLP, backend="portable") as model:
        model._executable.chunk = 128
        xs = [np.random.default_rng(t).uniform(-1, 1, (1000 + t, 32)).astype(np.float32) for t in range(4)]
        expected = [model.run(x) for x in xs]
        results = [None] * 4

        def work(t: int) -> None:
            results[t] = [model.run(xs[t]) for _ in range(5)]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for t in range(4):
            for got in results[t]:
                np.testing.assert_array_equal(got, expected[t])
        assert len(model._executable.slots) <= 4


def test_close_waits_for_runs_in_flight_and_later_calls_are_refused():
    model = coopnn.load(MLP, backend="portable")
    x = np.random.default_rng(0).uniform(-1, 1, (4096, 32)).astype(np.float32)
    want = model.run(x)
    started, finished = threading.Event(), []

    def work() -> None:
        started.set()
        finished.append(np.array_equal(model.run(x), want))

    thread = threading.Thread(target=work)
    thread.start()
    started.wait()
    model.close()
    thread.join()
    assert finished in ([True], [])
    with pytest.raises(InputError, match="closed"):
        model.run(x)


def test_2000_calls_grow_neither_vulkan_objects_nor_host_memory(monkeypatch):
    monkeypatch.delenv("COOPNN_VALIDATION", raising=False)  # the layer's own bookkeeping grows by design
    from tests.backends.portable.test_backend import _rss_bytes

    with coopnn.load(MLP, backend="portable") as model:
        model._executable.chunk = 64
        x = np.random.default_rng(0).uniform(-1, 1, (200, 32)).astype(np.float32)
        out = np.empty((200, 16), np.float32)
        for _ in range(100):
            model.run(x, out=out)
        gc.collect()
        context = model._executable.context
        objects, rss = context.live_objects(), _rss_bytes()
        for i in range(2000):
            if i % 2:
                model.run(x, out=out)
            else:
                model.run(x[:131])
        gc.collect()
        assert context.live_objects() == objects
        assert _rss_bytes() - rss < 8 << 20, "host memory grew by more than 8 MiB over 2,000 runs"


def test_large_results_are_copied_by_the_gpu_into_the_result_array(monkeypatch):
    from coopnn.runtime import executable as kernel_backend, host_arrays
    from coopnn.runtime.vk.host_import import import_alignment

    monkeypatch.setattr(kernel_backend, "IMPORT_MIN_BYTES", 1 << 20)
    with coopnn.load(MLP, backend="portable") as model:
        executable = model._executable
        if import_alignment(executable.context) is None:
            pytest.skip(f"{executable.context.info.name} lacks VK_EXT_external_memory_host")
        executable.chunk = 8192
        x = np.random.default_rng(2).uniform(-1, 1, (40000, 32)).astype(np.float32)
        y = model.run(x)
        assert host_arrays.block_of(y) is not None
        assert executable.last_timing.copy_out_ms < executable.last_timing.total_ms / 10
        np.testing.assert_allclose(y, _reference(MLP, x), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(model.run(x, out=np.empty_like(y)), y)  # numpy's own memory: through staging
        out = coopnn.empty(y.shape)
        assert model.run(x, out=out) is out and host_arrays.block_of(out) is not None
        assert executable.last_timing.copy_out_ms < executable.last_timing.total_ms / 10
        np.testing.assert_array_equal(out, y)
        assert model.device_messages == []
    np.testing.assert_allclose(y, _reference(MLP, x), rtol=1e-4, atol=1e-5)  # the result outlives its model


def test_an_interrupted_run_waits_for_its_chunks_and_leaves_the_model_usable(monkeypatch):
    from coopnn.runtime.host_path import IOSlot

    with coopnn.load(MLP, backend="portable") as model:
        x = random_feeds(model, 1000, seed=4)[model.inputs[0].name]
        expected = model.run(x)
        model._executable.chunk = 64
        finished = []
        finish = IOSlot.finish

        def interrupt_on_the_third_chunk(self):
            finished.append(self)
            if len(finished) == 3:
                raise KeyboardInterrupt
            return finish(self)

        monkeypatch.setattr(IOSlot, "finish", interrupt_on_the_third_chunk)
        with pytest.raises(KeyboardInterrupt):
            model.run(x)
        monkeypatch.undo()
        assert not any(slot.lane.in_flight for slot in finished)
        np.testing.assert_array_equal(model.run(x), expected)
        assert model.device_messages == []


def test_a_device_byte_limit_splits_runs_into_smaller_chunks_with_the_same_results(monkeypatch):
    from coopnn.runtime.executable import MAX_DEVICE_BYTES_ENV

    with coopnn.load(MLP, backend="portable") as model:
        x = random_feeds(model, 3000, seed=5)[model.inputs[0].name]
        expected = model.run(x)
    monkeypatch.setenv(MAX_DEVICE_BYTES_ENV, str(4 * (32 + 16) * 4 * 256))  # 256 samples in each of 4 slots
    with coopnn.load(MLP, backend="portable") as model:
        assert model._executable.max_chunk == 256
        np.testing.assert_array_equal(model.run(x), expected)
        assert model._executable.last_timing.chunks >= 3000 // 256
    monkeypatch.setenv(MAX_DEVICE_BYTES_ENV, "lots")
    with pytest.raises(InputError, match="COOPNN_MAX_DEVICE_BYTES='lots': give a positive number of bytes"):
        coopnn.load(MLP, backend="portable")


def test_a_run_out_of_device_memory_is_retried_once_with_half_the_chunk(monkeypatch):
    from coopnn.errors import DeviceMemoryError
    from coopnn.runtime.host_path import IOSlot

    with coopnn.load(MLP, backend="portable") as model:
        x = random_feeds(model, 1000, seed=6)[model.inputs[0].name]
        expected = model.run(x)
        model._executable.chunk = model._executable.max_chunk = 512
        ensure = IOSlot.ensure

        def refuse_large_chunks(self, samples, max_samples, largest=300):
            if samples > largest:
                raise DeviceMemoryError("vkAllocateMemory reported VK_ERROR_OUT_OF_DEVICE_MEMORY (injected)")
            return ensure(self, samples, max_samples)

        monkeypatch.setattr(IOSlot, "ensure", refuse_large_chunks)
        np.testing.assert_array_equal(model.run(x), expected)
        assert model._executable.max_chunk == 256  # kept for later runs
        monkeypatch.setattr(IOSlot, "ensure", lambda self, samples, max_samples: refuse_large_chunks(
            self, samples, max_samples, largest=100))
        with pytest.raises(DeviceMemoryError, match="injected"):
            model.run(x)
        monkeypatch.undo()
        np.testing.assert_array_equal(model.run(x), expected)
        assert model.device_messages == []
