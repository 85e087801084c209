"""On a device with VK_KHR_cooperative_matrix (the H100): every zoo model the coopmat target takes against the float16
emulation at 1, 17, 1000 and 2^16 + 3 samples, chunks ending inside a tile, new parameters in place, and the models
it refuses saying why."""

from __future__ import annotations

import pytest

from tests.backends.tile_zoo import (check_chunks_of_part_tiles, check_new_parameters_in_place, check_refused,
                                     check_zoo_model)
from tests.shaders.targets.test_tile_plan import ACCEPTED, REFUSED

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopmat_device")]


@pytest.mark.parametrize("stem", ACCEPTED)
def test_zoo_model_matches_the_fp16_emulation(stem):
    check_zoo_model(stem, "coopmat")


def test_chunks_ending_inside_a_tile():
    check_chunks_of_part_tiles("mlp_3_64x2_3", "coopmat")


def test_new_parameters_are_taken_in_place():
    check_new_parameters_in_place("gelu_silu_mlp", "coopmat")


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_the_models_it_refuses_say_why(stem):
    check_refused(stem, "coopmat")
