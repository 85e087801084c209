"""The check both GPU backends' weight-format tests share: the device's weight buffer holds the format asked for
when the model is prepared and again after new parameters are taken in place (`refresh`), with no new executable."""

from __future__ import annotations

from typing import Callable

import numpy as np

import coopnn
from coopnn.backends.quantized_layers import layer_entry
from coopnn.layouts.formats.integer import QuantizedLayer, quantize_layer
from coopnn.shaders.kernel.lower import lower


def check_weights_prepared_and_refreshed(model_path, backend: str, fmt,
                                         check_device_weights: Callable[[object, object], None]) -> None:
    """Load `model_path` on `backend` in `fmt` (calibrated on the inputs where it quantizes them), check the device
    weights, set new parameters, run, and check again."""
    x = np.random.default_rng(0).uniform(-1, 1, (65, 3)).astype(np.float32)
    calibration = x if fmt.input_quantization is not None else None
    with coopnn.load(model_path, backend=backend, weights=fmt.name, calibration=calibration) as model:
        assert (model.backend, model.weights, model.weight_format) == (backend, fmt.name, fmt)
        check_device_weights(model, fmt)
        executable = model._executable
        model.set_parameters({name: 1.5 * value + 0.01 for name, value in model.parameters().items()})
        model.run(x)
        assert model._executable is executable, "new parameters were not taken in place"
        check_device_weights(model, fmt)


def stored_layers(model) -> dict[str, QuantizedLayer]:
    """For a model whose format quantizes inputs: each Linear's weight-buffer entry name and the layer as
    `quantize_layer` stores it with the model's input scales (what the device must hold)."""
    fmt, program = model.weight_format, lower(model.graph)
    layers = {}
    for instr in program.body:
        if instr.op == "gemv":
            layer = instr.attrs["layer"]
            bias = program.constants[instr.args[2]] if len(instr.args) > 2 else None
            layers[layer_entry(layer)] = quantize_layer(fmt, program.constants[instr.args[0]], bias,
                                                        fmt.input_scale(layer), layer)
    return layers
