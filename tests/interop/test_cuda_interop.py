"""PyTorch CUDA tensors in and out of coopvec models through `CudaBridge`, against the numpy path of the same model:
conversions of dtype and layout, ordering against other work on the caller's stream, outputs that outlive their
model, reuse across calls and no leak over 2,000 of them. Skips, with the reason, without PyTorch, a CUDA device or
cooperative vectors."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from tests.conftest import ROOT, import_torch

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
TWO_HEADS = ROOT / "models" / "nerf_skip_two_heads.onnx"


@pytest.fixture(scope="module")
def torch():
    torch = import_torch()
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


def _bridge(model):
    from coopnn.interop import CudaBridge

    return CudaBridge(model._executable)


@pytest.fixture(scope="module")
def mlp(torch):
    model = coopnn.load(MLP, backend="coopvec", weights="fp16")
    bridge = _bridge(model)
    yield model, bridge
    bridge.close()
    model.close()


def _numpy_path(model, feeds):
    """The model's outputs for `feeds` (CUDA tensors) through the host path, as numpy arrays keyed by name."""
    out = model.run({name: t.cpu().numpy() for name, t in feeds.items()})
    return out if isinstance(out, dict) else {model.outputs[0].name: out}


def _same(got, want):
    assert set(got) == set(want)
    for name in want:
        assert got[name].is_cuda and got[name].dtype.is_floating_point
        np.testing.assert_array_equal(got[name].cpu().numpy(), want[name], err_msg=name)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _own_device_bytes(context) -> tuple[int, int]:
    """The device memory this process holds through coopnn on `context`'s device, in bytes: its Vulkan buffers alive
    in the device's shared context, and the part of them mapped into CUDA. Unlike the device's free memory, which
    every process on the GPU moves, only this process changes them (so the GPU tests may run in parallel processes)."""
    from coopnn.interop.shared_objects import SharedBuffer
    from coopnn.interop.vk_export import ExportedBuffer
    from coopnn.runtime.vk.memory import RawBuffer

    tracker = context.shared_context.tracker
    gc.collect()
    vulkan = mapped = 0
    for obj in gc.get_objects():
        if isinstance(obj, RawBuffer) and tracker.alive(obj.tokens[-1]):  # its last token is its VkDeviceMemory
            vulkan += obj.size
        elif isinstance(obj, ExportedBuffer) and obj.alive:
            vulkan += obj.allocation_size
        elif isinstance(obj, SharedBuffer) and obj._cuda_alive:
            mapped += obj.vulkan.allocation_size
    return vulkan, mapped


def test_torch_tensors_in_and_out_match_the_numpy_path(torch, mlp):
    model, bridge = mlp
    for batch in (1, 63, 1000, 65537):
        x = torch.rand(batch, 32, device="cuda") * 2 - 1
        got = bridge.run({"x": x})
        assert got["y"].shape == (batch, 16) and got["y"].device == x.device
        _same(got, _numpy_path(model, {"x": x}))
    assert bridge.last_gpu_ms > 0


def test_model_run_takes_and_returns_torch_cuda_tensors(torch):
    with coopnn.load(MLP) as model:
        assert model.backend == "coopvec"
        x = torch.rand(4097, 32, device="cuda") * 2 - 1
        y = model.run(x)
        assert isinstance(y, torch.Tensor) and y.is_cuda and y.shape == (4097, 16)
        np.testing.assert_array_equal(y.cpu().numpy(), model.run(x.cpu().numpy()))
        model.run(x)
        assert model.last_gpu_ms > 0
        with pytest.raises(InputError, match="out= takes numpy arrays"):
            model.run(x, out=np.empty((4097, 16), np.float32))
    with coopnn.load(MLP, backend="numpy") as model:
        with pytest.raises(InputError, match="CUDA arrays need a Vulkan backend"):
            model.run(torch.rand(3, 32, device="cuda"))


def test_other_dtypes_and_layouts_are_converted_on_the_gpu(torch, mlp):
    model, bridge = mlp
    base = torch.rand(3000, 40, device="cuda", dtype=torch.float64) * 2 - 1
    for x in (base[:, :32].float(),                 # padded rows: copied by a 2D copy
              base[:, :32].half(),                  # float16
              base[:, :32],                         # float64, padded
              base[:, :32].float().t().contiguous().t(),  # column-major
              base[::3, 4:36].float()):             # every third row
        _same(bridge.run({"x": x}), _numpy_path(model, {"x": x}))


def test_empty_batches_give_empty_tensors(torch, mlp):
    _, bridge = mlp
    y = bridge.run({"x": torch.empty(0, 32, device="cuda")})["y"]
    assert y.shape == (0, 16) and y.is_cuda


def test_two_inputs_and_two_outputs(torch):
    with coopnn.load(TWO_HEADS, backend="coopvec", weights="fp16") as model:
        bridge = _bridge(model)
        feeds = {"xyz": torch.rand(5000, 3, device="cuda"), "view_dir": torch.rand(5000, 3, device="cuda")}
        got = bridge.run(feeds)
        assert got["sigma"].shape == (5000, 1) and got["rgb"].shape == (5000, 3)
        _same(got, _numpy_path(model, feeds))
        bridge.close()


def test_batches_of_several_dispatches_fill_one_output(torch):
    with coopnn.load(MLP, backend="coopvec", weights="fp16") as model:
        bridge = _bridge(model)
        bridge.chunk_limit = 1000  # ten dispatches, more than there are slots, into one pooled output
        x = torch.rand(9500, 32, device="cuda")
        _same(bridge.run({"x": x}), _numpy_path(model, {"x": x}))
        assert bridge.last_gpu_ms > 0
        bridge.close()


def test_work_queued_around_a_run_on_the_same_stream_is_ordered(torch, mlp):
    model, bridge = mlp
    source = torch.rand(200_000, 32, device="cuda")
    want = _numpy_path(model, {"x": source * 2 - 1})["y"] * 3 + 1
    busy = torch.rand(4096, 4096, device="cuda")
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        for _ in range(20):  # keeps the stream busy long after run() has returned on the host
            busy = torch.tanh(busy @ busy)
        x = source * 2 - 1  # written only once the work above is done
        y = bridge.run({"x": x})["y"]
        z = y * 3 + 1  # queued right after, with no synchronisation in between
        del x, y  # the input is re-used by PyTorch's allocator, the output returns to the bridge's pool
        scratch = bridge.run({"x": torch.zeros(200_000, 32, device="cuda")})["y"]  # reuses that output buffer
    stream.synchronize()
    np.testing.assert_array_equal(z.cpu().numpy(), want)
    assert scratch.shape == (200_000, 16)


def test_runs_on_two_streams_keep_to_their_own(torch, mlp):
    model, bridge = mlp
    inputs = [torch.rand(50_000, 32, device="cuda") for _ in range(2)]
    wants = [_numpy_path(model, {"x": x})["y"] for x in inputs]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    busy = torch.rand(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    results = []
    for i in range(10):
        for x, stream in zip(inputs, streams):
            with torch.cuda.stream(stream):
                if i == 0 and stream is streams[0]:
                    busy = busy @ busy  # the first stream starts late
                results.append(bridge.run({"x": x})["y"] + 0)
    torch.cuda.synchronize()
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result.cpu().numpy(), wants[i % 2])


def test_an_output_outlives_its_model(torch):
    model = coopnn.load(MLP, backend="coopvec", weights="fp16")
    bridge = _bridge(model)
    x = torch.rand(100_000, 32, device="cuda")
    want = _numpy_path(model, {"x": x})["y"]
    y = bridge.run({"x": x})["y"]
    view = y[10:20]  # a view keeps the memory too
    bridge.close()
    model.close()
    # memory freed by the closed model would be handed out again here and overwritten
    filler = [torch.full((64 << 20,), 7.0, device="cuda") for _ in range(8)]
    with coopnn.load(MLP, backend="coopvec", weights="fp16") as other:
        other_bridge = _bridge(other)
        for _ in range(5):
            other_bridge.run({"x": torch.rand(100_000, 32, device="cuda")})
        other_bridge.close()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want)
    del y, filler
    gc.collect()
    np.testing.assert_array_equal(view.cpu().numpy(), want[10:20])
    del view  # the last tensor viewing the memory: freed now
    gc.collect()
    torch.cuda.synchronize()


def test_a_closed_bridge_refuses_runs(torch):
    with coopnn.load(MLP, backend="coopvec", weights="fp16") as model:
        bridge = _bridge(model)
        bridge.close()
        bridge.close()
        with pytest.raises(InputError, match="closed"):
            bridge.run({"x": torch.rand(10, 32, device="cuda")})


def test_input_errors_name_the_input(torch, mlp):
    _, bridge = mlp
    with pytest.raises(InputError, match=r"input 'x' has shape \[10, 31\]; expected \[batch, 32\]"):
        bridge.run({"x": torch.rand(10, 31, device="cuda")})
    with pytest.raises(InputError, match="input 'x' has dtype torch.int32"):
        bridge.run({"x": torch.zeros(10, 32, device="cuda", dtype=torch.int32)})
    with pytest.raises(InputError, match="missing inputs \\['x'\\]"):
        bridge.run({"other": torch.rand(10, 32, device="cuda")})


def test_outputs_held_by_the_caller_get_memory_of_their_own(torch, mlp):
    model, bridge = mlp
    inputs = [torch.rand(4000, 32, device="cuda") for _ in range(6)]
    held = [bridge.run({"x": x})["y"] for x in inputs]
    assert len({y.data_ptr() for y in held}) == len(held)
    for x, y in zip(inputs, held):
        np.testing.assert_array_equal(y.cpu().numpy(), _numpy_path(model, {"x": x})["y"])


def test_reuse_over_2000_calls_leaks_nothing(torch):
    with coopnn.load(MLP, backend="coopvec", weights="fp16") as model:
        bridge = _bridge(model)
        context = model._executable.context
        batches = (1, 777, 4096, 65_536)
        inputs = {b: torch.rand(b, 32, device="cuda") for b in batches}
        wants = {b: _numpy_path(model, {"x": x})["y"] for b, x in inputs.items()}

        def run_many(calls):
            y = None
            for i in range(calls):
                batch = batches[i % len(batches)]
                y = bridge.run({"x": inputs[batch]})["y"]
            return y

        run_many(100)  # slots, pools and descriptor sets reach their steady size
        torch.cuda.synchronize()
        gc.collect()
        # all of it this process's own: what other processes on the GPU do changes none of it
        before = (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(),
                  _own_device_bytes(context))
        last = run_many(2000)
        torch.cuda.synchronize()
        gc.collect()
        after = (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(),
                 _own_device_bytes(context))
        np.testing.assert_array_equal(last.cpu().numpy(), wants[batches[1999 % len(batches)]])
        assert after == before
        assert before[3][1] > 0  # the bridge's buffers are among those counted
        assert bridge.pool_counts()["idle"] <= 8
        bridge.close()


def test_half_tensors_run_the_float16_kernel_and_come_back_half(torch):
    """Float16 in, float16 out, read and written as float16 by the kernel: the same values as the float32 path gives
    for the same (float16-exact) inputs, which rounds inputs and outputs to float16 too; the numpy oracle of
    float16-rounded weights within the float16 tolerance."""
    from coopnn.graph.onnx.importer import import_model
    from coopnn.graph.passes import optimize
    from coopnn.interop.cuda_bridge import bridge_for
    from coopnn.layouts.formats.emulation import run_fp16_emulation

    with coopnn.load(MLP, backend="coopvec", weights="fp16") as model:
        x = (torch.rand(5001, 32, device="cuda") * 2 - 1).half()
        y = model.run(x)
        assert y.dtype == torch.float16 and y.shape == (5001, 16) and "f16" in bridge_for(model._executable)._bridges
        got = y.float().cpu().numpy()
        np.testing.assert_array_equal(got, model.run(x.float().cpu().numpy()))
        assert model.run(x.float()).dtype == torch.float32  # float32 in: the float32 kernel, as before
        graph = optimize(import_model(MLP))
        want = run_fp16_emulation(graph, {"x": x.float().cpu().numpy()})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2.5e-3)
        assert model.last_gpu_ms > 0
