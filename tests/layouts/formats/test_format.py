"""Every registered weight format is self-consistent: it stores elements of its numpy type and width (a block format:
blocks), decoding what it encoded gives its emulation, the emulation is idempotent (packing emulated weights changes
nothing), and float32 comes in and out."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.layouts.formats import format_names, weight_format


def _weights() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(size=200), [0.0, -0.0, 1 / 3, 1e-7, 2.0 ** -24, 6e4, -6e4]]).astype(np.float32)


@pytest.mark.parametrize("name", format_names())
def test_encoding_stores_elements_of_the_formats_type_and_width(name):
    """One element per weight, or for a block format one per block: its float16 scale and its codes."""
    fmt = weight_format(name)
    stored = fmt.encode(_weights())
    assert stored.dtype == fmt.storage
    if fmt.blocks is None:
        assert stored.shape == _weights().shape and fmt.bits == 8 * fmt.storage.itemsize
    else:
        assert stored.shape == (fmt.blocks.count(_weights().size),)
        assert 8 * fmt.storage.itemsize == 16 + fmt.blocks.size * fmt.bits


@pytest.mark.parametrize("name", format_names())
def test_emulation_is_decoded_encoding_in_float32_and_idempotent(name):
    fmt = weight_format(name)
    w = _weights()
    emulated = fmt.emulate(w)
    assert emulated.dtype == np.float32
    np.testing.assert_array_equal(emulated, fmt.decode(fmt.encode(w))[..., :w.size])  # a last block's padding dropped
    np.testing.assert_array_equal(fmt.emulate(emulated), emulated)
    np.testing.assert_array_equal(fmt.encode(emulated), fmt.encode(w))


@pytest.mark.parametrize("name", format_names())
def test_every_format_names_what_vulkan_needs(name):
    from coopnn.runtime.vk.nv_ffi import ComponentType

    fmt = weight_format(name)
    # None: no component type holds one element (a 4-bit code), and cooperative vectors cannot take the format
    assert fmt.component_type is None or fmt.component_type in ComponentType.__members__
    assert all(isinstance(feature, str) for feature in fmt.shader_features)
