"""Each weight format the coopvec backend accepts reaches the GPU as that format stores it: read back from the
device, every matrix (converted from the driver's InferencingOptimal layout back to row-major by the driver) and
every bias is the kernel program's value encoded by the format and padded to 16-byte groups, decoding to the format's
numpy emulation (a scaled format: its elements and its row scales; one that quantizes inputs: each Linear's
elements, dequantization scales and integer bias); when the model is prepared and after new parameters are converted
in place (`refresh`)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopvec.backend import CoopvecBackend
from coopnn.backends.coopvec.layouts import matrix_alignment, padded
from coopnn.shaders.kernel.lower import lower
from tests.backends.weights_in_place import check_weights_prepared_and_refreshed, stored_layers
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"  # 3 inputs and outputs: padded rows and columns


def _row_major(executable, fmt, entry, raw: bytes) -> np.ndarray:
    """An entry's stored elements as a row-major array of its (padded) shape, through the driver for its layouts."""
    if entry.layout != "vector":
        from coopnn.backends.coopvec.driver import convert_on_host, matrix_format

        rows, columns = entry.shape
        raw = convert_on_host(executable.context, raw,
                              matrix_format(fmt, rows, columns, entry.layout),
                              matrix_format(fmt, rows, columns, "row_major", columns * fmt.storage.itemsize))
    return np.frombuffer(raw, fmt.storage).reshape(entry.shape)


def _check_device_layers(model, fmt) -> None:
    """A format that quantizes inputs: one entry per Linear, as `quantize_layer` stores it with the model's scales,
    its elements padded to 16 a side (through the driver's layout) and its dequantization scales and bias to as many
    rows, with zeros."""
    executable = model._executable
    entries = executable.binary.weight_image.entries
    layers = stored_layers(model)
    assert set(entries) == set(layers)
    buffer = executable.weight_buffer
    for name, stored in layers.items():
        entry = entries[name]
        rows, columns = stored.elements.shape
        assert entry.dtype == fmt.name and entry.input_scale == stored.input_scale
        assert entry.shape == (padded(rows, 16), padded(columns, 16))
        elements = _row_major(executable, fmt, entry, buffer.download(np.uint8, entry.size, entry.offset).tobytes())
        np.testing.assert_array_equal(elements[:rows, :columns], stored.elements)
        assert not elements[rows:].any() and not elements[:, columns:].any()
        scales = buffer.download(np.float32, entry.shape[0], entry.scale_offset)
        np.testing.assert_array_equal(scales[:rows], stored.dequantization)
        np.testing.assert_array_equal(buffer.download(np.int32, rows, entry.bias_offset), stored.bias)


def _check_device_weights(model, fmt) -> None:
    if fmt.input_quantization is not None:
        _check_device_layers(model, fmt)
        return
    executable = model._executable
    program = lower(model.graph)
    entries = executable.binary.weight_image.entries
    gemvs = [i for i in program.body if i.op == "gemv"]
    assert set(entries) == {i.args[0] for i in gemvs} | {i.args[2] for i in gemvs if len(i.args) > 2}
    assert {e.layout for e in entries.values()} == {"inferencing_optimal", "vector"}
    alignment = matrix_alignment(fmt)
    for name, entry in entries.items():
        values = np.asarray(program.constants[name], np.float32)
        role = "vector" if entry.layout == "vector" else "matrix"
        values = values.reshape(-1) if role == "vector" else values
        element_format = fmt if role == "matrix" else fmt.vectors
        assert entry.dtype == element_format.name and entry.shape == tuple(padded(n, alignment) for n in values.shape)
        elements, scales = fmt.stored(values, role)
        want = np.zeros(entry.shape, element_format.storage)
        want[tuple(slice(0, n) for n in values.shape)] = elements
        raw = executable.weight_buffer.download(np.uint8, entry.size, entry.offset).tobytes()
        stored = _row_major(executable, element_format, entry, raw)
        assert stored.tobytes() == want.tobytes(), f"{fmt.name}: {name} on the GPU is not the encoding"
        if scales is None:
            assert entry.scale_offset is None
            np.testing.assert_array_equal(element_format.decode(stored)[tuple(slice(0, n) for n in values.shape)],
                                          element_format.emulate(values))
        else:
            storage = fmt.row_scales.storage
            device_scales = executable.weight_buffer.download(storage, entry.shape[0], entry.scale_offset)
            np.testing.assert_array_equal(device_scales[:len(scales)], scales.astype(storage))
            assert (device_scales[len(scales):] == 1).all(), "padded rows keep scale 1"


@pytest.mark.parametrize("fmt", CoopvecBackend.formats, ids=lambda f: f.name)
def test_the_gpu_weight_buffer_holds_the_format_asked_for(coopvec_device, fmt):
    check_weights_prepared_and_refreshed(MODEL, "coopvec", fmt, _check_device_weights)
