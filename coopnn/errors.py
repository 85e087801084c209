"""The typed errors coopnn raises (every user-facing failure is a subclass of CoopnnError), and the category of the
one notice it gives as a Python warning (`BackendNotice`)."""

from __future__ import annotations


class CoopnnError(Exception):
    """Base of every error coopnn raises on purpose."""


class ModelFormatError(CoopnnError):
    """The model could not be read: not ONNX, fails the checker, bad initializers, unsafe external data."""


class UnsupportedOperatorError(CoopnnError):
    """An ONNX node uses an operator (or an operator form) that coopnn cannot run."""

    def __init__(self, op_type: str, node_name: str, opset: int, supported: list[str], detail: str = ""):
        self.op_type = op_type
        self.node_name = node_name
        self.opset = opset
        self.supported = list(supported)
        what = f"operator {op_type!r} (node {node_name!r}, opset {opset})"
        why = f": {detail}" if detail else " is not supported"
        super().__init__(f"{what}{why}. Supported operators: {', '.join(self.supported)}")


class InputError(CoopnnError):
    """Inputs given to a model do not match its name, shape or dtype."""


class ModelClosedError(InputError):
    """The model (or what runs it) was closed; load it again to use it."""


class TrainerClosedError(ModelClosedError):
    """The trainer was closed; make a new Trainer to train the model again."""


class BackendUnavailableError(CoopnnError):
    """The requested backend cannot run here; the message says what is missing and how to get it.

    A device asked for (`device=`, `--device` or COOPNN_DEVICE) that matches none raises this too, under every
    backend (numpy, which runs on no device, included): whether a device exists is a fact about the machine, not about
    the call (`device=1` is right on one machine and wrong on the next), just like a backend whose device is absent,
    and one type for the mistake lets a caller catch it the same way whatever the backend."""


class CompileError(CoopnnError):
    """A model cannot be compiled for the requested target (for example a shape the target does not support)."""


class TensorAddressingError(CompileError):
    """A tensor layout, tensor view or cooperative-matrix tensor load/store breaks a rule of SPV_NV_tensor_addressing
    or SPV_NV_cooperative_matrix2, or reaches behaviour those specifications leave undefined."""


class DeviceError(CoopnnError):
    """A Vulkan call failed while running work on the device; the message names the call and the Vulkan result."""


class DeviceMemoryError(DeviceError):
    """The device or the driver ran out of memory; smaller batches or freeing other GPU work may help."""


class DeviceLostError(DeviceError):
    """The device was lost (driver reset, hang or crash): every later call on this model fails; load it anew."""


class BackendNotice(UserWarning):
    """`backend="auto"` ran a model on numpy, as no faster backend runs it here: one line, with the detail in
    `model.backend_reason` (and `coopnn info MODEL`). Naming a backend (`backend="numpy"`) or
    `warnings.simplefilter("ignore", coopnn.BackendNotice)` silences it."""
