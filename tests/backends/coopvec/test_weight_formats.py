"""Each weight format the coopvec backend accepts reaches the GPU as that format stores it: read back from the
device, every matrix (converted from the driver's InferencingOptimal layout back to row-major by the driver) and
every bias is the kernel program's value padded to 16-byte groups and encoded by the format, decoding to the format's
numpy emulation; when the model is prepared and after new parameters are converted in place (`refresh`)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopvec.backend import CoopvecBackend
from coopnn.backends.coopvec.layouts import padded
from coopnn.shaders.kernel.lower import lower
from tests.backends.weights_in_place import check_weights_prepared_and_refreshed
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


def _check_device_weights(model, fmt) -> None:
    executable = model._executable
    program = lower(model.graph)
    entries = executable.binary.weight_image.entries
    gemvs = [i for i in program.body if i.op == "gemv"]
    assert set(entries) == {i.args[0] for i in gemvs} | {i.args[2] for i in gemvs if len(i.args) > 2}
    assert {e.layout for e in entries.values()} == {"inferencing_optimal", "vector"}
    for name, entry in entries.items():
        values = np.asarray(program.constants[name], np.float32)
        values = values.reshape(-1) if entry.layout == "vector" else values
        assert entry.dtype == fmt.name and entry.shape == tuple(padded(n) for n in values.shape)
        want = np.zeros(entry.shape, np.float32)
        want[tuple(slice(0, n) for n in values.shape)] = values
        raw = executable.weight_buffer.download(np.uint8, entry.size, entry.offset).tobytes()
        stored = _row_major(executable, fmt, entry, raw)
        assert stored.tobytes() == fmt.encode(want).tobytes(), f"{fmt.name}: {name} on the GPU is not the encoding"
        np.testing.assert_array_equal(fmt.decode(stored), fmt.emulate(want))


@pytest.mark.parametrize("fmt", CoopvecBackend.formats, ids=lambda f: f.name)
def test_the_gpu_weight_buffer_holds_the_format_asked_for(coopvec_device, fmt):
    check_weights_prepared_and_refreshed(MODEL, "coopvec", fmt, _check_device_weights)
