"""The sign bits of the tiled step kernel (`coopnn.shaders.training.tiles.signs`): how many a row tile takes for the
device's smallest subgroup (no GPU; the kernels that keep them are checked in test_tiled_step.py)."""

from __future__ import annotations

import pytest

from coopnn.shaders.training.tiles.signs import WORD_BITS, bits_per_row_tile


@pytest.mark.parametrize("min_subgroup_size, bits", [(64, 4), (32, 8), (16, 16), (8, 32), (4, None), (1, None)])
def test_a_row_tile_takes_the_components_an_invocation_holds_up_to_a_word(min_subgroup_size, bits):
    assert bits_per_row_tile(min_subgroup_size) == bits
    assert bits is None or WORD_BITS % bits == 0  # whole row tiles to a word
