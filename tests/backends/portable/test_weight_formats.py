"""Each weight format the portable backend accepts reaches the device as that format stores it: the weight buffer
read back from the device holds every matrix and vector of the kernel program encoded by the format (its width
included; a block format's matrices in GGML's blocks), decoding to the format's numpy emulation (with a scaled
format, its row scales beside each matrix; with one that quantizes inputs, each Linear's elements, dequantization
scales, integer bias and input multiplier), when the model is prepared and after new parameters are taken in place
(`refresh`)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.portable.backend import PortableBackend
from coopnn.shaders.kernel.lower import lower
from tests.backends.weights_in_place import check_weights_prepared_and_refreshed, stored_layers
from tests.conftest import ROOT

pytestmark = pytest.mark.vulkan
MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _check_device_layers(model, fmt) -> None:
    """A format that quantizes inputs: one entry per Linear, as `quantize_layer` stores it with the model's scales."""
    executable = model._executable
    entries = executable.binary.weight_image.entries
    layers = stored_layers(model)
    assert set(entries) == set(layers) and len(entries) == 3
    buffer = executable.weight_buffer
    for name, stored in layers.items():
        entry = entries[name]
        rows = entry.shape[0]
        assert entry.dtype == fmt.name and entry.input_scale == stored.input_scale
        assert buffer.download(np.uint8, entry.size, entry.offset).tobytes() == stored.elements.tobytes()
        np.testing.assert_array_equal(buffer.download(np.float32, rows, entry.scale_offset), stored.dequantization)
        np.testing.assert_array_equal(buffer.download(np.int32, rows, entry.bias_offset), stored.bias)
        assert buffer.download(np.float32, 1, entry.input_offset)[0] == stored.multiplier
    assert model.device_messages == []


# GGML's blocks of 32 weights of a row, in bytes (ggml/src/ggml-common.h: block_q8_0, block_q4_0)
GGML_BLOCK_BYTES = {"q8_0": 34, "q4_0": 18}


def _stored_bytes(values: np.ndarray, fmt) -> int:
    """Bytes `values` take in `fmt`: its width per weight, or for a block format whole blocks per matrix row."""
    if fmt.blocks is None:
        return values.size * fmt.bits // 8
    rows, columns = values.shape
    return rows * -(-columns // 32) * GGML_BLOCK_BYTES[fmt.name]


def _check_device_weights(model, fmt) -> None:
    if fmt.input_quantization is not None:
        _check_device_layers(model, fmt)
        return
    executable = model._executable
    program = lower(model.graph)
    entries = executable.binary.weight_image.entries
    params = program.params_of("matrix", "vector")
    assert set(entries) == {p.name for p in params}
    buffer = executable.weight_buffer
    for param in params:
        entry, values = entries[param.name], np.asarray(program.constants[param.name], np.float32)
        elements, scales = fmt.stored(values, param.role)
        element_format = fmt if param.role == "matrix" else fmt.vectors
        raw = buffer.download(np.uint8, entry.size, entry.offset).tobytes()
        assert entry.dtype == element_format.name and len(raw) == _stored_bytes(values, element_format)
        assert raw == elements.tobytes(), f"{fmt.name}: {param.name} on the device is not the format's encoding"
        if scales is None:
            assert entry.scale_offset is None
            decoded = element_format.decode(elements)[..., :values.shape[-1]]  # a block format's padding dropped
            np.testing.assert_array_equal(decoded, element_format.emulate(values))
        else:
            storage = fmt.row_scales.storage
            device_scales = buffer.download(storage, len(scales), entry.scale_offset)
            np.testing.assert_array_equal(device_scales, scales.astype(storage))
    assert model.device_messages == []


@pytest.mark.parametrize("fmt", PortableBackend.formats, ids=lambda f: f.name)
def test_the_device_weight_buffer_holds_the_format_asked_for(fmt):
    check_weights_prepared_and_refreshed(MODEL, "portable", fmt, _check_device_weights)
