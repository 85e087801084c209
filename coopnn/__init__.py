"""coopnn: run and train small neural-shading MLPs on Vulkan GPUs through cooperative vectors.

The public surface: `load`, `Model`, `compile`, `Program`, `backends` (`backends.statuses()`: every backend, whether it can run here, and if not, why), the errors, and training: `Trainer`, `optim`
(Adam, SGD) and `mlp` (models built without ONNX). Nothing here imports the `vulkan` package: Vulkan
is loaded only when a Vulkan backend is asked for or probed.
"""

from __future__ import annotations

from coopnn.errors import (
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
from coopnn.interop.device_arrays import DeviceArray, to_device
from coopnn import backends
from coopnn.backends import BackendStatus
from coopnn.runtime.host_arrays import empty
from coopnn.train import optim
from coopnn.nets.builders import mlp
from coopnn.trainer import Trainer

__version__ = "0.1.0"


__all__ = [
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
    "load",
    "mlp",
    "optim",
    "to_device",
]
