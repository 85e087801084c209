"""The user-facing Model: `coopnn.load(...)` imports, optimises and prepares a graph; `Model.run` checks inputs.

A model's parameters can be replaced (by a trainer, or from a parameters file); the backend then prepares the new
graph when the model next runs, so `run` always uses the latest weights.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from coopnn.disk_cache import refuse_folder, write_atomic
from coopnn.dtypes import ACCEPTED_INPUT_NUMPY
from coopnn.errors import BackendNotice, CompileError, InputError, ModelClosedError, ModelFormatError
from coopnn.graph import parameter_file
from coopnn.graph.ir import Graph, Value
from coopnn.graph.passes import optimize
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.calibration import calibrated
from coopnn.layouts.formats.format import WeightFormat
from coopnn.interop import is_cuda_array
from coopnn.interop.device_arrays import DeviceArray, run_on_device
from coopnn import backends
from coopnn.runtime.executable import KernelExecutable
from coopnn.backends.auto_weights import choose_weights
from coopnn.graph.parameters import parameters, with_parameters

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: its name, its shape with the batch axis as None, and its element type."""

    name: str
    shape: tuple
    dtype: np.dtype

    @classmethod
    def of(cls, value: Value) -> "TensorInfo":
        return cls(value.name, (None,) + value.features, np.dtype(np.bool_ if value.dtype == "bool" else np.float32))


class Model:
    """A graph prepared on one backend. Call `run(x)` (or the model itself); close it, or use it in a `with`."""

    def __init__(self, graph: Graph, choice: backends.Choice, executable: backends.Executable,
                 weights: WeightFormat, device: str | int | None = None):
        self.backend: str = choice.backend.name
        self.backend_reason: str = choice.reason
        self.weight_format = weights
        self.weights: str = weights.name  # what users pass as `weights=` and read back
        self.device = device
        self.inputs = tuple(TensorInfo.of(v) for v in graph.inputs)
        self.outputs = tuple(TensorInfo.of(v) for v in graph.outputs)
        self._graph = graph
        self._prepared_backend = choice.backend
        self._executable: backends.Executable | None = executable
        self._pending_parameters: Callable[[], Mapping[str, np.ndarray]] | None = None
        self._trained_by: backends.TrainingSession | None = None
        self._executable_is_stale = False
        self._lock = threading.RLock()
        self._last_runner: Any = executable

    @property
    def graph(self) -> Graph:
        """The model's graph, holding its latest parameters."""
        self._take_pending_parameters()
        return self._graph

    def _take_pending_parameters(self) -> None:
        if self._pending_parameters is not None:
            source, self._pending_parameters = self._pending_parameters, None
            self._graph = with_parameters(self._graph, source())

    def parameters(self) -> dict[str, np.ndarray]:
        """The trainable parameters (read-only float32 arrays) by stable name, such as "layers.0.weight"."""
        return parameters(self.graph)

    def set_parameters(self, values: Mapping[str, np.ndarray] | Callable[[], Mapping[str, np.ndarray]]) -> None:
        """Replace the parameters named in `values` (InputError for unknown names or wrong shapes).

        `values` may also be a function returning them, called only when the model next needs its graph: a trainer
        hands over its weights this way, so training steps never wait for a copy the model may not use.
        """
        with self._lock:
            self._trained_by = None
            self._executable_is_stale = True
            if callable(values):
                self._pending_parameters = values
                return
            self._graph = with_parameters(self.graph, values)

    def take_trained(self, session: backends.TrainingSession) -> None:
        """Run the parameters `session` (training this model's graph) holds from the next run on: copied on the GPU
        from the session's buffers where the backend can (`Backend.take_trained`), else read back then."""
        with self._lock:
            self._pending_parameters = session.parameters
            self._trained_by = session
            self._executable_is_stale = True

    def settle_training(self, session: backends.TrainingSession) -> None:
        """`session`, which trains this model, is about to close: take the parameters it holds now, into the running
        weights (on the GPU where the backend can) and into the graph, so that nothing reads the session later."""
        with self._lock:
            try:
                if self._trained_by is session and self._executable is not None:
                    self._current_executable()
                self._take_pending_parameters()
            finally:
                if self._trained_by is session:
                    self._trained_by = None

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as an ONNX file (opset and operators in `coopnn.graph.onnx.export`), through a temporary
        file and a rename, so that a crash mid-write leaves any previous file whole (InputError when `path` is a
        folder)."""
        from coopnn.graph.onnx.export import export_onnx

        refuse_folder(path, "model")

        try:
            write_atomic(Path(path), export_onnx(self.graph).SerializeToString(), make_folder=False)
        except OSError as e:
            raise ModelFormatError(f"cannot write {os.fspath(path)!r}: {e.strerror or e}") from e

    def load_parameters(self, path: str | os.PathLike) -> None:
        """Replace every parameter by the tensor of the same stable name in the safetensors file `path` (written by
        `save_parameters`), run from the next call; ModelFormatError naming the file and the tensor, as
        `load(parameters_file=)` gives, when it is unreadable or does not hold exactly this model's parameters (the
        model is then unchanged)."""
        with self._lock:
            self.set_parameters(parameters(parameter_file.load_parameters(self.graph, path)))

    def export_shader(self, directory: str | os.PathLike, *, lang: str = "glsl", name: str | None = None,
                      weights: str = "fp16"):
        """Write the network as an include for an engine's shaders (`coopnn.export.export_shader`)."""
        from coopnn.export import export_shader

        return export_shader(self.graph, directory, lang=lang, name=name, weights=weights)

    def save_parameters(self, path: str | os.PathLike) -> None:
        """Write the parameters to a safetensors file keyed by stable name (read back by `load_parameters` and
        `load(parameters_file=)`); InputError when `path` is a folder."""
        refuse_folder(path, "parameters")
        parameter_file.save_parameters(self.graph, path)

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}{list(t.shape)}" for t in self.outputs)
        return f"<coopnn.Model {self.graph.name!r} ({ins}) -> ({outs}) on {self.backend}, weights {self.weights}>"

    def run(self, x: Any, out: Any = None) -> np.ndarray | dict[str, np.ndarray]:
        """Run a batch: an array for a one-input, one-output model; otherwise dicts keyed by name, in and out.

        Inputs: arrays of shape [batch, *features] (`model.inputs`) in float16, float32 or float64, of either byte
        order and any memory layout (C, Fortran, strided views); each is converted to float32 once, as it is copied.
        PyTorch/CuPy/DLPack CUDA arrays give arrays of the same framework back, `coopnn.to_device` arrays give
        `DeviceArray`s (Vulkan backends only, no `out`).
        Outputs: new float32 arrays (bool for boolean outputs) of shape [batch, *features], yours to keep.
        `out` (an array, or a dict naming some or all outputs) receives the results in place instead: C-contiguous,
        writeable, of the output's dtype and shape; the same arrays are returned.
        Threads: one model may be run from many threads at once, each call with its own memory; `close()` waits for
        the calls in flight, and later calls raise ModelClosedError. InputError names an input or `out` that does
        not fit; Vulkan failures raise DeviceError, DeviceMemoryError or DeviceLostError.
        """
        named = self.named_inputs(x)
        if any(is_cuda_array(v) for v in named.values()):
            return self._run_on_cuda(named, out)
        if any(isinstance(v, DeviceArray) for v in named.values()):
            return self._run_on_device_arrays(named, out)
        feeds = self._check_arrays(named)
        batch = next(iter(feeds.values())).shape[0]
        targets = self._check_out(out, batch)
        executable = self._current_executable()
        outputs = executable.run(feeds, targets) if targets else executable.run(feeds)
        self._last_runner = executable
        return self._unpack(outputs)

    def _run_on_cuda(self, named: dict[str, Any], out: Any):
        """CUDA arrays (PyTorch, CuPy, DLPack) in, arrays of the same framework out, with no host round trip
        (`coopnn.interop.cuda_bridge`)."""
        from coopnn.interop.cuda_bridge import bridge_for

        bridge = bridge_for(self._kernel_executable("CUDA arrays", out))
        outputs = bridge.run(named)
        self._last_runner = bridge
        return self._unpack(outputs)

    def _run_on_device_arrays(self, named: dict[str, Any], out: Any):
        """`coopnn.to_device` arrays in, new device arrays out (`coopnn.interop.device_arrays`)."""
        if not all(isinstance(v, DeviceArray) for v in named.values()):
            raise InputError("pass every input as a device array (coopnn.to_device) or none")
        executable = self._kernel_executable("device arrays", out)
        outputs = run_on_device(executable, named)
        self._last_runner = executable
        return self._unpack(outputs)

    def _kernel_executable(self, what: str, out: Any) -> KernelExecutable:
        """The executable, for inputs (`what`) that only a Vulkan backend takes and that come back as they went in."""
        if out is not None:
            raise InputError(f"out= takes numpy arrays; {what} in give {what} out")
        executable = self._current_executable()
        if not isinstance(executable, KernelExecutable):
            raise InputError(f"{what} need a Vulkan backend; model {self.graph.name!r} runs on {self.backend}")
        return executable

    def _unpack(self, outputs: Mapping[str, Any]):
        single = len(self.inputs) == 1 and len(self.outputs) == 1
        return outputs[self.outputs[0].name] if single else {t.name: outputs[t.name] for t in self.outputs}

    def _current_executable(self) -> backends.Executable:
        """The executable, first taking new parameters (training) in place where the backend can, else preparing
        the graph anew; one thread does it while the others wait."""
        with self._lock:
            if self._executable is None:
                raise ModelClosedError("this model is closed; load it again to run it")
            if self._executable_is_stale:
                session, self._trained_by = self._trained_by, None
                if session is not None and self._prepared_backend.take_trained(self._executable, session):
                    self._executable_is_stale = False
                    return self._executable
                graph = self.graph
                if not self._prepared_backend.refresh(self._executable, graph, weights=self.weight_format):
                    backend = self._prepared_backend
                    examined = backends.examine(backend, graph, self.weight_format, self.device)
                    if examined.reason:
                        raise CompileError(f"backend {backend.name!r} cannot run the new parameters of model "
                                           f"{graph.name!r}: {examined.reason}")
                    executable = backend.prepare(graph, examined.lowered, weights=self.weight_format,
                                                 device=self.device)
                    self._executable.close()
                    self._executable = executable
                self._executable_is_stale = False
            return self._executable

    __call__ = run

    def feeds(self, x: Any) -> dict[str, np.ndarray]:
        """`x` checked as `run` checks it: float arrays keyed by input name (InputError naming what is wrong)."""
        return self._check_arrays(self.named_inputs(x))

    def named_inputs(self, x: Any) -> dict[str, Any]:
        """`x` keyed by input name: a dict with exactly the model's input names, or the one input of the model."""
        if isinstance(x, Mapping):
            return self._check_names(x)
        if len(self.inputs) == 1:
            return {self.inputs[0].name: x}
        names = ", ".join(t.name for t in self.inputs)
        raise InputError(f"model {self.graph.name!r} has {len(self.inputs)} inputs ({names}): pass a dict")

    @property
    def last_gpu_ms(self) -> float | None:
        """GPU time of the last `run()` in milliseconds, from timestamp queries (None on the numpy backend); after a
        run on CUDA arrays, reading it waits for that run."""
        return getattr(self._last_runner, "last_gpu_ms", None)

    @property
    def device_messages(self) -> list[str]:
        """What the Vulkan validation layer reported for this model (it runs when COOPNN_VALIDATION=1)."""
        return list(getattr(self._executable, "debug_messages", []))

    def kernel_statistics(self) -> list:
        """What the device's driver made of this model's kernel: registers, spilled bytes, workgroup memory and so on,
        in the driver's own words (`coopnn.runtime.kernel_statistics`). InputError on the numpy backend (it runs no
        kernel); BackendUnavailableError where the driver reports no statistics."""
        from coopnn.runtime.kernel_statistics import kernel_statistics

        return kernel_statistics({self.graph.name: self._kernel_executable("kernel statistics", None).binary},
                                 self.device)

    def close(self) -> None:
        """Release the backend's resources once the runs in flight are done; later calls raise ModelClosedError."""
        with self._lock:
            executable, self._executable = self._executable, None
        if executable is not None:
            executable.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        # Collection must release the backend's device objects even when the user never called close().
        try:
            self.close()
        except Exception:
            pass

    def _check_names(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        expected = {t.name for t in self.inputs}
        missing, extra = expected - set(feeds), set(feeds) - expected
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing)}")
            if extra:
                parts.append(f"unknown {sorted(extra)}")
            raise InputError(f"inputs of model {self.graph.name!r}: {', '.join(parts)}; expected {sorted(expected)}")
        return dict(feeds)

    def _check_arrays(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out, batch = {}, None
        for info in self.inputs:
            try:
                array = np.asarray(feeds[info.name])
            except (TypeError, ValueError) as e:
                raise InputError(f"input {info.name!r} is not an array: {e}") from None
            if array.dtype.byteorder not in "=|" and array.dtype.newbyteorder("=") in ACCEPTED_INPUT_NUMPY:
                array = array.astype(array.dtype.newbyteorder("="))  # other-endian floats: converted once, here
            if array.dtype not in ACCEPTED_INPUT_NUMPY:
                raise InputError(
                    f"input {info.name!r} has dtype {array.dtype}; supported: float16, float32, float64"
                )
            features = info.shape[1:]
            if array.ndim != len(info.shape) or tuple(array.shape[1:]) != features:
                want = "[batch, " + ", ".join(str(d) for d in features) + "]"
                hint = " (add a batch axis: x[None])" if tuple(array.shape) == features else ""
                raise InputError(f"input {info.name!r} has shape {list(array.shape)}; expected {want}{hint}")
            if batch is not None and array.shape[0] != batch:
                raise InputError(f"input {info.name!r} has batch {array.shape[0]}, other inputs have {batch}")
            batch = array.shape[0]
            out[info.name] = array
        return out

    def _check_out(self, out: Any, batch: int) -> dict[str, np.ndarray]:
        """`run`'s `out` as arrays keyed by output name, each checked to take the results in place."""
        if out is None:
            return {}
        if isinstance(out, Mapping):
            unknown = sorted(set(out) - {t.name for t in self.outputs})
            if unknown:
                raise InputError(f"out= names unknown outputs {unknown}; outputs: {[t.name for t in self.outputs]}")
            given = dict(out)
        elif len(self.outputs) == 1:
            given = {self.outputs[0].name: out}
        else:
            raise InputError(f"model {self.graph.name!r} has {len(self.outputs)} outputs: pass out= as a dict")
        for info in self.outputs:
            if info.name not in given:
                continue
            array = given[info.name]
            shape = (batch,) + tuple(info.shape[1:])
            if not isinstance(array, np.ndarray) or array.dtype != info.dtype or array.shape != shape:
                what = (f"{type(array).__name__}" if not isinstance(array, np.ndarray)
                        else f"{array.dtype} array of shape {list(array.shape)}")
                raise InputError(f"out= for output {info.name!r} is a {what}; expected a {info.dtype} array of shape "
                                 f"{list(shape)}")
            if not array.flags.c_contiguous or not array.flags.writeable:
                raise InputError(f"out= for output {info.name!r} must be C-contiguous and writeable")
        return given


def load(
    model: str | os.PathLike | bytes | onnx.ModelProto,
    *,
    backend: str = "auto",
    weights: str | WeightFormat = "auto",
    device: str | int | None = None,
    parameters_file: str | os.PathLike | None = None,
    calibration: Any = None,
) -> Model:
    """Import an ONNX model (path, bytes or ModelProto), optimise it and prepare it on a backend.

    `weights="auto"` runs in float16 on a device with cooperative vectors when the model's float16 outputs stay within
    0.1% of their range from float32 on `calibration` (a batch of inputs; by default 4096 samples uniform in [-1, 1]),
    and in float32 otherwise (`coopnn.backends.auto_weights`); "fp16", "fp32" and the other formats force one.
    `weights="int8"` needs `calibration`: representative inputs (an array, or a dict of arrays by input name), from
    which each Linear's input scale is measured (`coopnn.layouts.formats.calibration`); InputError without it.
    `model.weights` and `model.backend_reason` say what was chosen and why.
    `parameters_file` (a safetensors file from `Model.save_parameters`) replaces every parameter by the tensor of the
    same stable name; ModelFormatError when it is unreadable or does not hold exactly the model's parameters.
    """
    # onnx (a fifth of a second to import) is imported when a model is loaded, not with coopnn: a model built in
    # Python (`coopnn.mlp`) never needs it.
    from coopnn.graph.onnx.importer import import_model

    graph = optimize(import_model(model))
    if parameters_file is not None:
        graph = parameter_file.load_parameters(graph, parameters_file)
    return prepare(graph, backend=backend, weights=weights, device=device, calibration=calibration)


def prepare(graph: Graph, *, backend: str = "auto", weights: str | WeightFormat = "auto",
            device: str | int | None = None, calibration: Any = None) -> Model:
    """Prepare an already imported and optimised graph on a backend (see `load` for `weights` and `calibration`).
    The weight format is resolved here, once; everything after takes the `WeightFormat`."""
    reasons, examined = [], {}
    if weights == "auto":
        chosen = choose_weights(graph, backend, device, calibration)
        fmt, examined = chosen.weights, chosen.examined
        reasons.append(chosen.reason)
    else:
        fmt = calibrated(weight_format(weights), graph, calibration)
    choice = backends.choose(backend, graph, fmt, device, examined)
    if backend == "auto" and choice.backend.name == "numpy":
        # stacklevel 3: the line of the user's `coopnn.load` or `coopnn.mlp`
        warnings.warn(f"coopnn: {graph.name!r} runs on numpy, as no faster backend runs here (see "
                      f"model.backend_reason)", BackendNotice, stacklevel=3)
    executable = choice.backend.prepare(graph, choice.lowered, weights=fmt, device=device)
    if reasons:
        choice = dataclasses.replace(choice, reason="; ".join([choice.reason] + reasons))
    return Model(graph, choice, executable, fmt, device)
