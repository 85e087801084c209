"""Sharded inference: a batch across two models equals one model's run of it, in order, for array and dict
inputs, on the numpy backend and (vulkan marker) on lavapipe listed twice; bad shards are typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.distributed import ShardedModel
from coopnn.distributed.devices import all_devices, device_with_uuid, normalized_uuid
from coopnn.errors import InputError

X = np.random.default_rng(1).uniform(-1, 1, (1001, 3)).astype(np.float32)


def _models(count: int, **options):
    return [coopnn.mlp(3, [16], 2, seed=4, **options) for _ in range(count)]


@pytest.mark.parametrize("count", [1, 2, 3])
def test_shards_of_a_batch_equal_one_model_on_numpy(count):
    single = coopnn.mlp(3, [16], 2, seed=4, backend="numpy")
    with ShardedModel(_models(count, backend="numpy")) as sharded:
        np.testing.assert_array_equal(sharded.run(X), single.run(X))
        named = sharded.run({single.inputs[0].name: X[:5]})
        np.testing.assert_array_equal(named, single.run(X[:5]))


def test_a_batch_smaller_than_the_shards_runs_on_some_of_them():
    single = coopnn.mlp(3, [16], 2, seed=4, backend="numpy")
    with ShardedModel(_models(4, backend="numpy")) as sharded:
        np.testing.assert_array_equal(sharded.run(X[:2]), single.run(X[:2]))


@pytest.mark.vulkan
def test_lavapipe_listed_twice_equals_one_model(require_vulkan):
    devices = all_devices()
    single = coopnn.mlp(3, [16], 2, seed=4, backend="portable", device=devices[0])
    sharded = ShardedModel([coopnn.mlp(3, [16], 2, seed=4, backend="portable", device=d) for d in devices * 2])
    with sharded:
        np.testing.assert_allclose(sharded.run(X), single.run(X), rtol=1e-4, atol=1e-5)
    single.close()


def test_mismatched_models_and_bad_device_lists_are_input_errors():
    with pytest.raises(InputError, match="same inputs"):
        ShardedModel([coopnn.mlp(3, [16], 2, backend="numpy"), coopnn.mlp(4, [16], 2, backend="numpy")])
    with pytest.raises(InputError, match="at least one"):
        ShardedModel([])
    with pytest.raises(InputError, match="non-empty list"):
        ShardedModel.load(b"", devices="gpu")


class _Info:
    def __init__(self, index, uuid, name="GPU", device_type="discrete"):
        self.index, self.device_uuid, self.name, self.device_type = index, uuid, name, device_type
        self.unsuitable_reason = None


def test_cuda_uuids_match_vulkan_uuids_in_either_spelling():
    infos = [_Info(0, "00" * 16), _Info(1, "8c1d2e3f" + "ab" * 12)]
    assert device_with_uuid("GPU-8c1d2e3f-abab-abab-abab-abababababab", infos) == 1
    assert normalized_uuid("8C1D2E3F" + "AB" * 12) == "8c1d2e3f" + "ab" * 12
    with pytest.raises(InputError, match="no Vulkan device"):
        device_with_uuid("11" * 16, infos)
    with pytest.raises(InputError, match="not a device UUID"):
        normalized_uuid("GPU-xyz")


def test_all_devices_are_those_of_the_best_kind():
    infos = [_Info(0, "", device_type="cpu"), _Info(1, "", device_type="discrete"),
             _Info(2, "", device_type="discrete")]
    assert all_devices(infos) == [1, 2]
    assert all_devices(infos[:1]) == [0]


@pytest.mark.gpu
def test_cuda_tensors_across_the_gpu_listed_twice_equal_one_model(coopvec_device):
    from tests.conftest import import_torch

    torch = import_torch()
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with a CUDA device")
    device = all_devices()[0]
    single = coopnn.mlp(3, [16], 2, seed=4, backend="coopvec", weights="fp16", device=device)
    x = torch.from_numpy(X).cuda()
    shards = [coopnn.mlp(3, [16], 2, seed=4, backend="coopvec", weights="fp16", device=device) for _ in range(2)]
    with ShardedModel(shards) as s:
        out = s.run(x)
        assert out.is_cuda and out.device == x.device
        np.testing.assert_allclose(out.cpu().numpy(), single.run(X), rtol=1e-3, atol=2.5e-3)
    single.close()


@pytest.mark.vulkan
def test_load_on_a_device_list_equals_one_loaded_model(require_vulkan):
    from tests.conftest import ROOT

    path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    device = all_devices()[0]
    single = coopnn.load(path, backend="portable", device=device)
    with ShardedModel.load(path, devices=[device, device], backend="portable") as sharded:
        assert len(sharded.models) == 2
        np.testing.assert_allclose(sharded.run(X), single.run(X), rtol=1e-4, atol=1e-5)
    single.close()
