"""Each weight format the portable backend accepts reaches the device as that format stores it: the weight buffer
read back from the device holds every matrix and vector of the kernel program encoded by the format (its width
included), decoding to the format's numpy emulation (with a scaled format, its row scales beside each matrix), when the model is prepared and after new parameters are taken
in place (`refresh`)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.portable.backend import PortableBackend
from coopnn.shaders.kernel.lower import lower
from tests.backends.weights_in_place import check_weights_prepared_and_refreshed
from tests.conftest import ROOT

pytestmark = pytest.mark.vulkan
MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _check_device_weights(model, fmt) -> None:
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
        assert entry.dtype == element_format.name and len(raw) == values.size * element_format.bits // 8
        assert raw == elements.tobytes(), f"{fmt.name}: {param.name} on the device is not the format's encoding"
        if scales is None:
            assert entry.scale_offset is None
            np.testing.assert_array_equal(element_format.decode(elements), element_format.emulate(values))
        else:
            storage = fmt.row_scales.storage
            device_scales = buffer.download(storage, len(scales), entry.scale_offset)
            np.testing.assert_array_equal(device_scales, scales.astype(storage))
    assert model.device_messages == []


@pytest.mark.parametrize("fmt", PortableBackend.formats, ids=lambda f: f.name)
def test_the_device_weight_buffer_holds_the_format_asked_for(fmt):
    check_weights_prepared_and_refreshed(MODEL, "portable", fmt, _check_device_weights)
