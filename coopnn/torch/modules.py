"""tiny-cuda-nn's PyTorch modules made of coopnn models: `Network`, `Encoding`, `NetworkWithInputEncoding` (the same
constructor arguments and JSON configs as `tinycudann`), and `from_model` for a coopnn model of any backend that
runs kernels.

A module holds its own coopnn model (prepared for it; `from_model` copies the given model's parameters) and its
parameters as one `torch.nn.Parameter`, `params`: the float32 vector of `flat_layout.FlatLayout` in memory Vulkan
and CUDA share (`master.MasterWeights`). torch's optimizers, gradient clipping, GradScaler and checkpoints work on it
in place, and the next forward pass refreshes the kernel's weights from it on the GPU (`forward.ForwardRunner`);
backward passes run coopnn's training kernels (`backward.BackwardRunner`).
Modules need PyTorch with a CUDA device that is also the model's Vulkan device; elsewhere constructing one raises
`BackendUnavailableError` saying what is missing (configs are checked first, on any machine).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from coopnn.errors import BackendUnavailableError, InputError
from coopnn.model import Model, prepare
from coopnn.runtime.executable import KernelExecutable
from coopnn.torch import builders, sync
from coopnn.torch.backward import BackwardRunner
from coopnn.torch.flat_layout import FlatLayout
from coopnn.torch.forward import ForwardRunner
from coopnn.torch.function import CoopnnForward
from coopnn.torch.master import MasterWeights

OUTPUT_DTYPES = {torch.float32: "float32", torch.float16: "float16"}


def cuda_unavailable_reason() -> str | None:
    """None when PyTorch sees a CUDA device; otherwise why coopnn.torch modules cannot run here."""
    if not torch.cuda.is_available():
        return (f"coopnn.torch modules run on CUDA tensors, and PyTorch {torch.__version__} sees no CUDA device "
                f"(torch.cuda.is_available() is False); on a machine without one, run coopnn models on numpy "
                f"arrays (coopnn.mlp, coopnn.load)")
    return None


def _output_dtype(dtype: Any) -> torch.dtype:
    if dtype not in OUTPUT_DTYPES:
        raise InputError(f"output_dtype must be torch.float32 or torch.float16, not {dtype!r}")
    return dtype


def _bridge_device(executable: KernelExecutable) -> int:
    from coopnn.interop.cuda_driver import cuda_driver
    from coopnn.interop.vk_export import interop_unavailable_reason

    reason = interop_unavailable_reason(executable.context)
    if reason is not None:
        raise BackendUnavailableError(reason)
    info = executable.context.info
    ordinal = cuda_driver().ordinal_of_uuid(info.device_uuid)
    if ordinal is None:
        raise BackendUnavailableError(f"CUDA does not see {info.name} (Vulkan device UUID {info.device_uuid}); "
                                      f"check CUDA_VISIBLE_DEVICES")
    return ordinal


def _refuse_replaced(params: torch.Tensor, vector: torch.Tensor) -> None:
    """InputError unless `params` still is `vector`, the float32 vector in shared memory that the kernels read:
    `module.half()`, `.double()`, `.to(another device)`, `params.data = ...` or `load_state_dict(assign=True)` put a
    copy in its place, which the kernels would never see."""
    if params.dtype != torch.float32 or params.device != vector.device or params.data_ptr() != vector.data_ptr():
        raise InputError(f"a coopnn.torch module's params must stay the float32 vector {vector.device} shares with "
                         f"its kernels; they were replaced by a {params.dtype} tensor on {params.device} (by "
                         f"module.half(), .double(), .to(), or assigning params); for float16 outputs give "
                         f"output_dtype=torch.float16, and change params in place")


class Module(torch.nn.Module):
    """A coopnn model as a torch module: `forward(x)` takes a CUDA tensor [batch, n_input_dims] (float32 or
    float16) and returns [batch, n_output_dims] in `output_dtype`; `params` are its parameters."""

    def __init__(self, model: Model, output_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.output_dtype = _output_dtype(output_dtype)
        reason = cuda_unavailable_reason()
        if reason is not None:
            model.close()
            raise BackendUnavailableError(reason)
        try:
            self._runner = self._attach(model)
        except BaseException:
            model.close()
            raise
        self.params = torch.nn.Parameter(self._runner.master.tensor)
        self._backward = BackwardRunner(model, self._runner.master.layout, self._runner.member, self._runner.master)

    def _attach(self, model: Model) -> ForwardRunner:
        if len(model.inputs) != 1 or len(model.outputs) != 1:
            raise InputError(f"a coopnn.torch module runs a model of one input and one output; {model.graph.name!r} "
                             f"has {len(model.inputs)} and {len(model.outputs)}")
        executable = model._current_executable()
        if not isinstance(executable, KernelExecutable):
            raise BackendUnavailableError(f"a coopnn.torch module needs a Vulkan backend; model "
                                          f"{model.graph.name!r} runs on {model.backend}")
        ordinal = _bridge_device(executable)
        values = model.parameters()
        layout = FlatLayout.of({name: array.shape for name, array in values.items()})
        member = sync.member(model.backend)
        master = MasterWeights(executable, model.device, layout, ordinal,
                               halves=member is not None and member.READS_HALVES)
        with torch.cuda.device(ordinal):
            master.tensor.copy_(torch.from_numpy(layout.flatten(values)))
            # the first refresh may run on another stream than this copy's
            torch.cuda.current_stream().synchronize()
        return ForwardRunner(model, master, member)

    @property
    def n_input_dims(self) -> int:
        return int(self._runner.model.inputs[0].shape[1])

    @property
    def n_output_dims(self) -> int:
        return int(self._runner.model.outputs[0].shape[1])

    @property
    def n_params(self) -> int:
        return self.params.numel()

    @property
    def backend(self) -> str:
        return self._runner.model.backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise InputError(f"a coopnn.torch module takes a CUDA tensor [batch, {self.n_input_dims}], not "
                             f"{type(x).__name__}{'' if not isinstance(x, torch.Tensor) else ' on ' + str(x.device)}")
        _refuse_replaced(self.params, self._runner.master.tensor)
        return CoopnnForward.apply(self._runner, self._backward, self.output_dtype, x, self.params)

    def named_parameter_views(self) -> dict[str, torch.Tensor]:
        """Each of the model's parameters ("layers.0.weight", ...) as a view of `params`."""
        return self._runner.master.layout.views(self.params)

    def to_model(self, **prepare_options: Any) -> Model:
        """A new coopnn Model with the parameters as they are now (copied through the host), on the module's backend
        unless `prepare_options` (as `coopnn.model.prepare` takes them) say otherwise."""
        model = self._runner.model
        values = {k: v.detach().cpu().numpy() for k, v in self.named_parameter_views().items()}
        options = {"backend": model.backend, "weights": model.weights, "device": model.device} | prepare_options
        made = prepare(model.graph, **options)
        made.set_parameters(values)
        return made

    def extra_repr(self) -> str:
        return (f"n_input_dims={self.n_input_dims}, n_output_dims={self.n_output_dims}, n_params={self.n_params}, "
                f"backend={self.backend!r}, output_dtype={OUTPUT_DTYPES[self.output_dtype]}")

    def close(self) -> None:
        """Release the model, its training session and the Vulkan side of the parameters (tensors viewing them keep
        their memory)."""
        self._backward.close()
        self._runner.model.close()
        self._runner.master.close()


def _options(backend: str, weights: str, device: Any) -> dict:
    return {"backend": backend, "weights": weights, "device": device}


class Network(Module):
    """tcnn.Network: an MLP from `network_config` (tiny-cuda-nn's `network` section)."""

    def __init__(self, n_input_dims: int, n_output_dims: int, network_config: Mapping[str, Any], seed: int = 1337,
                 output_dtype: torch.dtype = torch.float32, backend: str = "auto", weights: str = "auto",
                 device: Any = None):
        make = builders.network(n_input_dims, n_output_dims, network_config, seed)
        _output_dtype(output_dtype)
        super().__init__(_made(make, backend, weights, device), output_dtype)


class NetworkWithInputEncoding(Module):
    """tcnn.NetworkWithInputEncoding: the encoding of `encoding_config`, then the MLP of `network_config`."""

    def __init__(self, n_input_dims: int, n_output_dims: int, encoding_config: Mapping[str, Any],
                 network_config: Mapping[str, Any], seed: int = 1337, output_dtype: torch.dtype = torch.float32,
                 backend: str = "auto", weights: str = "auto", device: Any = None):
        make = builders.network_with_input_encoding(n_input_dims, n_output_dims, encoding_config, network_config,
                                                    seed)
        _output_dtype(output_dtype)
        super().__init__(_made(make, backend, weights, device), output_dtype)


class Encoding(Module):
    """tcnn.Encoding: the encoding of `encoding_config` alone; its `n_output_dims` is the encoding's width."""

    def __init__(self, n_input_dims: int, encoding_config: Mapping[str, Any], seed: int = 1337,
                 output_dtype: torch.dtype = torch.float32, backend: str = "auto", weights: str = "auto",
                 device: Any = None):
        make = builders.encoding(n_input_dims, encoding_config, seed)
        _output_dtype(output_dtype)
        super().__init__(_made(make, backend, weights, device), output_dtype)


def _made(make: builders.ModelMaker, backend: str, weights: str, device: Any) -> Model:
    """The module's model, made only where modules can run (the reason otherwise, before any device is opened)."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(reason)
    return make(backend, weights, device)


def from_model(model: Model, output_dtype: torch.dtype = torch.float32) -> Module:
    """A module running `model`'s graph with its current parameters, on its backend, weight format and device (the
    module prepares a model of its own: training the module leaves `model` as it is; `Module.to_model` gives the
    trained one back)."""
    if not isinstance(model, Model):
        raise InputError(f"coopnn.torch.from_model takes a coopnn Model, not {type(model).__name__}")
    _output_dtype(output_dtype)
    own = _made(lambda backend, weights, device: prepare(model.graph, backend=backend, weights=weights,
                                                         device=device),
                model.backend, model.weights, model.device)
    return Module(own, output_dtype)
