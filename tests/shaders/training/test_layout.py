"""The tape's layout: region starts, and the deltas' layout every weight-gradient kernel checks before it reads."""

from __future__ import annotations

import pytest

from coopnn.backends.coopvec.coopmat_gradients import coopmat_gradient_shader
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
