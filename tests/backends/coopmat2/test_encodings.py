"""Encoded models on the coopmat2 target: the kernel's steps run in numpy (`kernel_model`, no device: the staged
rows of the per-sample input stage, the layouts of the first load) against the float16 reference at ragged batches,
and on a GPU with VK_NV_cooperative_matrix2 every encoding test model against the same reference."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopmat2.target import GRANULARITY, TILE, pack_program
from coopnn.backends.coopmat2.steps import tile_kernel
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.coopmat2.kernel_model import run_steps
from tests.shaders.targets.encoding_cases import (ENCODINGS, EVERY, EVERY_IDS, IDS, assert_matches_fp16_reference,
                                                  fp16_reference, inputs, model_for)

RTOL, ATOL = 1e-3, 2.5e-3


@pytest.mark.parametrize("config, n_in", ENCODINGS, ids=IDS)
def test_the_steps_in_numpy_give_the_fp16_reference(config, n_in):
    model = model_for(config, n_in)
    program = lower(model.graph)
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, FP16)
    packed = pack_program(program, FP16)
    x = inputs(config, n_in)
    for batch in (1, 17, len(x)):
        got = run_steps(kernel, packed, x[:batch])
        assert not np.isnan(got).any(), "an output element was never stored"
        np.testing.assert_allclose(got, fp16_reference(model.graph, x[:batch]), rtol=RTOL, atol=ATOL)


@pytest.mark.gpu
@pytest.mark.usefixtures("coopmat2_device")
@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_encoded_model_matches_the_fp16_reference_on_the_gpu(config, n_in):
    assert_matches_fp16_reference(config, n_in, "coopmat2")
