"""On a device with cooperative matrix 2 (the H100): every zoo model the coopmat2 target takes, in each weight format,
against the tile kernels' float16 arithmetic (`tests.backends.tile_reference`) at 1, 17, 1000 and 2^16 + 3 samples,
every weight of the block formats decoded to its float16 value (one-hot inputs), chunks ending inside a tile, new
parameters in place, the models it refuses saying why, and backend='auto' taking it for block formats."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.model import prepare
from tests.backends.coopmat2.test_block_formats import block_weights
from tests.backends.portable.test_backend import _one_linear
from tests.backends.tile_zoo import (assert_matches_emulation, check_chunks_of_part_tiles,
                                     check_new_parameters_in_place, check_refused, check_zoo_model, model_path)
from tests.conftest import random_feeds
from tests.shaders.targets.test_tile_plan import ACCEPTED, REFUSED

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopmat2_device")]


@pytest.mark.parametrize("weights", ["fp16", "q8_0", "q4_0"])
@pytest.mark.parametrize("stem", ACCEPTED)
def test_zoo_model_matches_the_tile_emulation(stem, weights):
    check_zoo_model(stem, "coopmat2", weights)


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
def test_the_device_decodes_every_block_weight_to_its_float16_value(weights):
    """W e_c is column c of the decoded W exactly: every code, both scale signs, float16-subnormal results."""
    w = block_weights()
    with prepare(_one_linear(w), backend="coopmat2", weights=weights) as model:
        got = model.run(np.eye(290, dtype=np.float32))
    np.testing.assert_array_equal(got, round_fp16(weight_format(weights).emulate(w)).T)


def test_chunks_ending_inside_a_tile():
    check_chunks_of_part_tiles("mlp_3_64x2_3", "coopmat2")


def test_new_parameters_are_taken_in_place():
    check_new_parameters_in_place("gelu_silu_mlp", "coopmat2")


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_the_models_it_refuses_say_why(stem):
    check_refused(stem, "coopmat2")


@pytest.mark.parametrize("stem", ["mlp_3_64x2_3", "mlp_64_128x4_16"])
def test_auto_takes_it_for_block_formats_which_coopvec_cannot_run(stem):
    with coopnn.load(model_path(stem), weights="q4_0") as model:
        assert model.backend == "coopmat2"
        assert "coopvec skipped (the coopvec backend stores weights as" in model.backend_reason
        assert_matches_emulation(model, random_feeds(model, 1000, seed=5), "q4_0")
