"""Encoded models on the portable backend (lavapipe in CI, the validation layer on): every encoding test model
(every otype, both Frequency layouts, spherical harmonics of every degree, grids of 1 to 4 dimensions with 1 to 8
features, every grid type and interpolation, 32 levels, composites) against the numpy backend at float32 tolerance,
grids outside [0, 1] too; new tables reach the compiled model without compiling again; float16 weights store the
tables in float16, as the numpy backend's float16 weights round them; 8-bit float weights are their float16
emulation, block formats the numpy backend's."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.layouts.formats.emulation import run_fp16_emulation
from tests.shaders.targets.encoding_cases import EVERY, EVERY_IDS, ENCODINGS, inputs, kernel_model, model_for

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_encoded_model_matches_the_numpy_backend(config, n_in):
    model, reference = kernel_model(config, n_in, "portable")
    with model:
        assert model.backend == "portable"
        x = inputs(config, n_in)
        np.testing.assert_allclose(model.run(x), reference.run(x), rtol=1e-4, atol=1e-5)
        assert model.device_messages == []


def test_new_tables_reach_the_compiled_model():
    config, n_in = ENCODINGS[6]
    model, reference = kernel_model(config, n_in, "portable")
    with model:
        tables = np.random.default_rng(9).standard_normal(reference.parameters()["encoding.params"].shape)
        for m in (model, reference):
            m.set_parameters({"encoding.params": tables})
        x = inputs(config, n_in)
        np.testing.assert_allclose(model.run(x), reference.run(x), rtol=1e-4, atol=1e-5)
        assert model.device_messages == []


@pytest.mark.parametrize("config, n_in", [ENCODINGS[6], ENCODINGS[9]], ids=["HashGrid-2d", "TiledGrid-4d"])
def test_fp16_weights_round_the_tables_as_the_numpy_backend_does(config, n_in):
    reference = model_for(config, n_in)
    x = inputs(config, n_in)
    with coopnn.mlp(n_in, [16], 3, encoding=config, backend="portable", weights="fp16", seed=1) as model, \
            coopnn.mlp(n_in, [16], 3, encoding=config, backend="numpy", weights="fp16", seed=1) as rounded:
        for m in (model, rounded):
            m.set_parameters(reference.parameters())
        np.testing.assert_allclose(model.run(x), rounded.run(x), rtol=1e-4, atol=1e-5)
        assert not np.allclose(rounded.run(x), reference.run(x), rtol=1e-5, atol=1e-6)
        assert model.device_messages == []


@pytest.mark.parametrize("weights", ["fp8_e4m3", "fp8_e5m2", "q8_0", "q4_0"])
def test_other_weight_formats_read_the_tables_as_stored(weights):
    """The tables are vectors of each format (float16 for the 8-bit floats, the blocks' vectors for q8_0 and q4_0)."""
    config, n_in = ENCODINGS[6]
    reference = model_for(config, n_in)
    x = inputs(config, n_in)
    with coopnn.mlp(n_in, [16], 3, encoding=config, backend="portable", weights=weights, seed=1) as model, \
            coopnn.mlp(n_in, [16], 3, encoding=config, backend="numpy", weights=weights, seed=1) as numpy_model:
        for m in (model, numpy_model):
            m.set_parameters(reference.parameters())
        if weights.startswith("fp8"):
            want = run_fp16_emulation(model.graph, {"x": x}, model.weight_format)[model.outputs[0].name]
            np.testing.assert_array_equal(model.run(x), want)
        else:
            np.testing.assert_allclose(model.run(x), numpy_model.run(x), rtol=1e-4, atol=1e-5)
        assert model.device_messages == []
