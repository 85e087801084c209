"""coopnn: run and train small neural-shading MLPs on Vulkan GPUs through cooperative vectors.

The public surface is `__all__`, and nothing else: `load`, `Model` (and its `TensorInfo`), `compile`, `Program`,
`backends` (`backends.statuses()`: every backend, whether it can run here, and if not, why; `BackendStatus`), the
errors and the `BackendNotice` warning, device arrays (`to_device`, `DeviceArray`, `empty`), and training:
`Trainer`, `optim` (Adam, SGD), `mlp` (models built without ONNX) and `from_tcnn_config` (a tiny-cuda-nn JSON
config). Nothing here imports the `vulkan` package: Vulkan is loaded only when a Vulkan backend is asked for or probed.
"""

from coopnn.errors import (
    BackendNotice,
    BackendUnavailableError,
    CompileError,
    CoopnnError,
    DeviceError,
    DeviceLostError,
    DeviceMemoryError,
    InputError,
    ModelClosedError,
    ModelFormatError,
    TrainerClosedError,
    UnsupportedOperatorError,
)
from coopnn.compiler import Program, compile
from coopnn.model import Model, TensorInfo, load
from coopnn.interop import device_arrays as _device_arrays
from coopnn.interop.device_arrays import DeviceArray
from coopnn import backends
from coopnn.backends import BackendStatus
from coopnn.runtime.host_arrays import empty
from coopnn.train import optim
from coopnn.nets.builders import mlp
from coopnn.nets.tcnn_config import from_tcnn_config
from coopnn.trainer import Trainer

__version__ = "0.1.0"


def to_device(x, device=None, dtype="float32") -> DeviceArray:
    """`x` (any float array) copied once into GPU memory as `dtype` (float32, or float16: models on the coopvec
    backend then read and write float16, half the bytes): a `DeviceArray` that `Model.run` takes and returns without
    host round trips. `device` as `coopnn.load` takes it; models must run on the same device.

    Every backend declares its device features first, so the array's context is the one models load into: an array
    made before any model would otherwise sit in a second VkDevice and be imported by fd into the models' one."""
    backends.all_backends()
    return _device_arrays.to_device(x, device, dtype)


__all__ = [
    "BackendNotice",
    "BackendStatus",
    "BackendUnavailableError",
    "CompileError",
    "DeviceArray",
    "CoopnnError",
    "DeviceError",
    "DeviceLostError",
    "DeviceMemoryError",
    "InputError",
    "ModelClosedError",
    "Model",
    "Program",
    "compile",
    "empty",
    "ModelFormatError",
    "TensorInfo",
    "Trainer",
    "TrainerClosedError",
    "UnsupportedOperatorError",
    "__version__",
    "backends",
    "from_tcnn_config",
    "load",
    "mlp",
    "optim",
    "to_device",
]


def __dir__() -> list[str]:
    # The documented names only: the subpackages imported on the way (coopnn.model, coopnn.graph, ...) stay
    # importable but are not the API.
    return sorted(__all__)
