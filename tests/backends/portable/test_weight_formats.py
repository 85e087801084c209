"""Each weight format the portable backend accepts reaches the device as that format stores it: the weight buffer
read back from the device holds every matrix and vector of the kernel program encoded by the format (its width
included), decoding to the format's numpy emulation, when the model is prepared and after new parameters are taken
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
    assert set(entries) == {p.name for p in program.params_of("matrix", "vector")}
    for name, entry in entries.items():
        values = np.asarray(program.constants[name], np.float32)
        raw = executable.weight_buffer.download(np.uint8, entry.size, entry.offset).tobytes()
        assert entry.dtype == fmt.name and len(raw) == values.size * fmt.bits // 8
        assert raw == fmt.encode(values).tobytes(), f"{fmt.name}: {name} on the device is not the format's encoding"
        stored = np.frombuffer(raw, fmt.storage).reshape(values.shape)
        np.testing.assert_array_equal(fmt.decode(stored), fmt.emulate(values))
    assert model.device_messages == []


@pytest.mark.parametrize("fmt", PortableBackend.formats, ids=lambda f: f.name)
def test_the_device_weight_buffer_holds_the_format_asked_for(fmt):
    check_weights_prepared_and_refreshed(MODEL, "portable", fmt, _check_device_weights)
