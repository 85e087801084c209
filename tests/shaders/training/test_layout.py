"""The tape's layout: region starts, and the deltas' layout every weight-gradient kernel checks before it reads; the
parameters' blocked copy."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.shaders.training.coopmat_gradients import coopmat_gradient_shader
from coopnn.backends.coopvec.coopvec_gradients import coopvec_gradient_shader
from coopnn.shaders.training.gradients import tape_gradient_shader
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout

LAYOUT = ParameterLayout.of([("w0", "b0", 16, 8), ("w1", "b1", 8, 16)])


def test_regions_follow_each_other_input_first():
    tape = TapeLayout(LAYOUT.layers)
    assert [(tape.input_start(i), tape.delta_start(i)) for i in range(2)] == [(0, 8), (24, 40)]
    assert tape.width == 48


def test_an_unknown_delta_layout_is_refused():
    with pytest.raises(ValueError, match="deltas must be one of features, samples, not 'rows'"):
        TapeLayout(LAYOUT.layers, "rows")


def test_the_cooperative_matrix_gradients_read_either_delta_layout():
    assert (coopmat_gradient_shader(LAYOUT, TapeLayout(LAYOUT.layers, "samples")).spirv
            != coopmat_gradient_shader(LAYOUT, TapeLayout(LAYOUT.layers, "features")).spirv)


@pytest.mark.parametrize("make, reads", [
    (lambda tape: coopvec_gradient_shader(LAYOUT, tape), "features"),
    (lambda tape: tape_gradient_shader(LAYOUT, tape, 1024), "features"),
])
def test_the_other_gradient_kernels_take_only_feature_major_deltas(make, reads):
    make(TapeLayout(LAYOUT.layers, reads))
    with pytest.raises(ValueError, match="read deltas laid out by features, not by samples"):
        make(TapeLayout(LAYOUT.layers, "samples"))


def test_a_blocked_copy_puts_each_16_x_16_tile_of_a_weight_in_256_contiguous_elements():
    layout = ParameterLayout.of([("w0", "b0", 32, 48), ("w1", "b1", 16, 32)])
    index = layout.block_index(16)
    assert sorted(index.tolist()) == list(range(layout.size))  # a permutation
    blocked = np.empty(layout.size, np.float32)
    blocked[index] = np.arange(layout.size, dtype=np.float32)
    for shape in layout.layers:
        weight = np.arange(shape.weight_offset, shape.bias_offset, dtype=np.float32).reshape(shape.rows, shape.cols)
        tiles = blocked[shape.weight_offset:shape.bias_offset].reshape(shape.rows // 16, shape.cols // 16, 16, 16)
        for i in range(shape.rows // 16):
            for j in range(shape.cols // 16):
                np.testing.assert_array_equal(tiles[i, j], weight[16 * i:16 * i + 16, 16 * j:16 * j + 16])
        np.testing.assert_array_equal(index[shape.bias_offset:shape.bias_offset + shape.rows],
                                      np.arange(shape.bias_offset, shape.bias_offset + shape.rows))


def test_a_blocked_copy_needs_whole_tiles():
    with pytest.raises(ValueError, match="multiples of 16, not 24 x 16"):
        ParameterLayout.of([("w", "b", 24, 16)]).block_index(16)
