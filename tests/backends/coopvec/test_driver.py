"""VK_NV_cooperative_vector: clean refusal where absent; on a device with it, queries and matrix conversion."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import BackendUnavailableError

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]


def _formats(rows: int, columns: int, layout_name: str):
    from coopnn.backends.coopvec.driver import MatrixFormat
    from coopnn.runtime.vk.nv_ffi import ComponentType, MatrixLayout

    row_major = MatrixFormat(rows, columns, ComponentType.FLOAT16, MatrixLayout.ROW_MAJOR, columns * 2)
    return row_major, MatrixFormat(rows, columns, ComponentType.FLOAT16, MatrixLayout[layout_name])


def test_conversion_without_the_extension_is_refused_clearly(vk_context):
    from coopnn.backends.coopvec.driver import converted_size

    if vk_context.info.cooperative_vector is not None:
        pytest.skip(f"{vk_context.info.name} supports cooperative vectors")
    with pytest.raises(BackendUnavailableError, match="VK_NV_cooperative_vector is not supported"):
        converted_size(vk_context, *_formats(64, 64, "INFERENCING_OPTIMAL"))


@pytest.fixture
def coopvec_context(make_context):
    from coopnn.runtime.vk.context import list_devices

    capable = [d for d in list_devices() if d.cooperative_vector and d.cooperative_vector.cooperative_vector]
    if not capable:
        pytest.skip("no device with VK_NV_cooperative_vector")
    features = {"cooperativeVector", "bufferDeviceAddress"}
    return make_context(device=capable[0].index, features=features)


@pytest.mark.gpu
def test_cooperative_vector_properties_are_reported(coopvec_context):
    from coopnn.runtime.vk.nv_ffi import ComponentType

    support = coopvec_context.info.cooperative_vector
    assert support.max_components > 0 and support.supported_stages
    f16 = ComponentType.FLOAT16
    assert any((c.input_type, c.matrix_interpretation, c.result_type) == (f16, f16, f16)
               for c in support.combinations)


@pytest.mark.gpu
@pytest.mark.parametrize("layout_name", ["INFERENCING_OPTIMAL", "TRAINING_OPTIMAL"])
@pytest.mark.parametrize("rows, columns", [(64, 64), (16, 64), (3, 64), (64, 3)])
def test_host_conversion_round_trips(coopvec_context, layout_name, rows, columns):
    from coopnn.backends.coopvec.driver import convert_on_host, converted_size

    row_major, optimal = _formats(rows, columns, layout_name)
    matrix = np.random.default_rng(rows * columns).standard_normal((rows, columns)).astype(np.float16)
    size = converted_size(coopvec_context, row_major, optimal)
    assert size >= matrix.nbytes
    packed = convert_on_host(coopvec_context, matrix, row_major, optimal)
    assert len(packed) == size
    back = convert_on_host(coopvec_context, packed, optimal, row_major)
    np.testing.assert_array_equal(np.frombuffer(back, np.float16).reshape(rows, columns), matrix)


@pytest.mark.gpu
def test_device_conversion_matches_host_conversion(coopvec_context):
    from coopnn.backends.coopvec.driver import (MatrixConversion, convert_on_host, converted_size,
                                           record_conversions)

    row_major, optimal = _formats(64, 32, "INFERENCING_OPTIMAL")
    matrix = np.random.default_rng(7).standard_normal((64, 32)).astype(np.float16)
    size = converted_size(coopvec_context, row_major, optimal)
    src = coopvec_context.create_buffer(matrix.nbytes + 64, device_address=True)
    dst = coopvec_context.create_buffer(size + 128, device_address=True)
    src.upload(matrix, offset=64)
    dst.upload(np.zeros(size + 128, np.uint8))
    conversion = MatrixConversion(src, 64, matrix.nbytes, row_major, dst, 128, size, optimal)
    coopvec_context.submit(lambda cmd: record_conversions(coopvec_context, cmd, [conversion]))
    device_packed = dst.download(np.uint8, size, 128).tobytes()
    assert device_packed == convert_on_host(coopvec_context, matrix, row_major, optimal)
