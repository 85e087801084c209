"""Kernel statistics (VK_KHR_pipeline_executable_properties): the table and values made of what a driver reports
(made-up reports), the typed errors where no statistics can be had (the numpy backend; a driver without the
extension, as lavapipe here), and on a GPU whose driver has it, what it reports for inference and training kernels."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.errors import BackendUnavailableError, InputError
from coopnn.runtime.kernel_statistics import KernelStatistics, statistics_table
from coopnn.runtime.vk.pipeline_statistics import EXTENSION, ExecutableStatistics, Statistic
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"


def _kernel(name: str, *executables: tuple[str, int, dict]) -> KernelStatistics:
    return KernelStatistics(name, (64, 1, 1), tuple(
        ExecutableStatistics(exe, f"{exe} stage", subgroup, tuple(Statistic(k, f"what {k} is", v)
                                                                  for k, v in values.items()))
        for exe, subgroup, values in executables))


def test_the_table_has_a_column_per_statistic_and_says_what_each_is():
    kernels = [_kernel("step", ("compute", 32, {"Registers": 128, "Spill bytes": 0, "Uses barriers": True})),
               _kernel("optimizer", ("compute", 32, {"Registers": 40, "Occupancy": 0.75}))]
    table = statistics_table(kernels)
    assert table.splitlines()[:4] == [
        "| kernel | workgroup | subgroup | Registers | Spill bytes | Uses barriers | Occupancy |",
        "|---|---|---|---|---|---|---|",
        "| step | 64x1x1 | 32 | 128 | 0 | True | - |",
        "| optimizer | 64x1x1 | 32 | 40 | - | - | 0.75 |",
    ]
    assert "- Spill bytes: what Spill bytes is" in table


def test_a_later_executables_statistic_of_the_same_name_is_named_with_its_executable():
    kernel = _kernel("split", ("first", 32, {"Registers": 64}), ("second", 32, {"Registers": 96}))
    assert kernel.values() == {"Registers": 64, "second: Registers": 96}


def test_the_numpy_backend_has_no_kernels():
    with coopnn.load(MLP, backend="numpy") as model:
        with pytest.raises(InputError, match="kernel statistics need a Vulkan backend; model .* runs on numpy"):
            model.kernel_statistics()
        with pytest.raises(InputError, match="kernel statistics need a Vulkan backend"):
            coopnn.Trainer(model).kernel_statistics()


@pytest.mark.vulkan
def test_a_driver_without_the_extension_is_named(validated_device):
    from coopnn.runtime.vk.context import list_devices
    from coopnn.runtime.vk.pipeline_statistics import FEATURE
    from coopnn.runtime.vk.selection import select_device

    if select_device(list_devices()).features.get(FEATURE):
        pytest.skip("this device's driver reports pipeline statistics (the GPU tests cover it)")
    with coopnn.load(MLP, backend="portable") as model:
        with pytest.raises(BackendUnavailableError, match=f"does not report kernel statistics: its driver lacks "
                                                          f"{EXTENSION}"):
            model.kernel_statistics()


@pytest.mark.vulkan
def test_a_training_session_names_every_kernel_of_a_step(validated_device):
    from coopnn.shaders.targets.base import Binary

    with coopnn.load(MLP, backend="portable") as model:
        binaries = coopnn.Trainer(model).session.binaries()
    names = list(binaries)
    assert names[0] == "step" and {"optimizer", "loss tile"} <= set(names)
    assert any(n.startswith("gradients ") for n in names)
    assert all(isinstance(b, Binary) and b.spirv for b in binaries.values())
