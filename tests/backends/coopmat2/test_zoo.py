"""On a device with cooperative matrix 2 (the H100): every zoo model the coopmat2 target takes, in each weight format,
against the tile kernels' float16 arithmetic (`tests.backends.tile_reference`) at 1, 17, 1000 and 2^16 + 3 samples,
chunks ending inside a tile, new parameters in place, and the models it refuses saying why."""

from __future__ import annotations

import pytest

from tests.backends.tile_zoo import (check_chunks_of_part_tiles, check_new_parameters_in_place, check_refused,
                                     check_zoo_model)
from tests.shaders.targets.test_tile_plan import ACCEPTED, REFUSED

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopmat2_device")]


@pytest.mark.parametrize("weights", ["fp16", "q8_0", "q4_0"])
@pytest.mark.parametrize("stem", ACCEPTED)
def test_zoo_model_matches_the_tile_emulation(stem, weights):
    check_zoo_model(stem, "coopmat2", weights)


def test_chunks_ending_inside_a_tile():
    check_chunks_of_part_tiles("mlp_3_64x2_3", "coopmat2")


def test_new_parameters_are_taken_in_place():
    check_new_parameters_in_place("gelu_silu_mlp", "coopmat2")


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_the_models_it_refuses_say_why(stem):
    check_refused(stem, "coopmat2")
