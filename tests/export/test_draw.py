"""The export runs: a fragment shader that includes it draws a neural texture into an offscreen image, and the
compute harness evaluates it per row; both match numpy at the float16 tolerance. The portable variant runs on any
Vulkan device (lavapipe in CI, with the validation layer); the cooperative-vector variant on a GPU with
VK_NV_cooperative_vector."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.export import export_shader
from coopnn.export.render import COOPVEC_FEATURES, draw_texture, texture_shaders
from tests.devices import assert_no_validation_messages
from tests.export.harness import (FP16_TOLERANCE, LANGUAGES, compute_shader, coopvec_reference, hash_grid_texture,
                                  reference, require_compilers, run_compute, spirv_val, texture_model,
                                  texture_reference, without_debug)

TEXTURES = {"frequency": texture_model, "hash_grid": hash_grid_texture}

SIDE = 24


@pytest.fixture(scope="module", autouse=True)
def _compilers():
    require_compilers()


def _shaders(exported, variant, tmp_path, lang):
    """The texture's modules, validated; Slang's without debug instructions (see `without_debug`)."""
    modules = texture_shaders(exported.manifest, variant)
    for words in modules:
        spirv_val(words, tmp_path)
    return tuple(without_debug(w, tmp_path) for w in modules) if lang == "slang" else modules


def _drawn(context, model, variant, tmp_path, lang):
    """The export of `model` in `lang` drawn as a SIDE x SIDE texture on `context`, in `variant`."""
    exported = export_shader(model.graph, tmp_path / "export", lang=lang, name="tex")
    return draw_texture(context, exported.manifest, SIDE, SIDE, variant=variant,
                        shaders=_shaders(exported, variant, tmp_path, lang))


@pytest.mark.vulkan
@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("texture", TEXTURES)
def test_the_portable_texture_draws_what_numpy_computes(vk_context, tmp_path, lang, texture):
    model = TEXTURES[texture]()
    image = _drawn(vk_context, model, "portable", tmp_path, lang)
    np.testing.assert_allclose(image[..., :3], texture_reference(model, SIDE), **FP16_TOLERANCE)
    np.testing.assert_array_equal(image[..., 3], 1.0)
    assert_no_validation_messages(vk_context)


@pytest.mark.vulkan
@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("activation", [None, "tanh", "softplus"])
def test_the_compute_harness_runs_the_portable_export(vk_context, tmp_path, lang, activation):
    model = texture_model(output_activation=activation, hidden=(20, 12))
    exported = export_shader(model.graph, tmp_path / "export", lang=lang, name="net")
    inputs = np.random.default_rng(0).uniform(-1, 1, (100, 2)).astype(np.float16).astype(np.float32)
    words = compute_shader(exported, "portable")
    spirv_val(words, tmp_path)
    if lang == "slang":
        words = without_debug(words, tmp_path)
    outputs = run_compute(vk_context, exported, words, inputs, "portable")
    np.testing.assert_allclose(outputs, reference(model, inputs), **FP16_TOLERANCE)
    assert_no_validation_messages(vk_context)


@pytest.mark.vulkan
def test_fp32_weights_run_at_the_fp32_tolerance(vk_context, tmp_path):
    from tests.export.harness import FP32_TOLERANCE

    model = texture_model()
    exported = export_shader(model.graph, tmp_path / "export", lang="glsl", name="net", weights="fp32")
    inputs = np.random.default_rng(1).uniform(0, 1, (64, 2)).astype(np.float32)
    outputs = run_compute(vk_context, exported, compute_shader(exported, "portable"), inputs, "portable")
    np.testing.assert_allclose(outputs, reference(model, inputs, weights="fp32"), **FP32_TOLERANCE)


@pytest.fixture
def coopvec_context(coopvec_device):
    from coopnn.runtime.vk.context import VulkanContext

    with VulkanContext(features=COOPVEC_FEATURES) as context:
        stages = context.info.cooperative_vector.supported_stages
        if not stages & 0x10:  # VK_SHADER_STAGE_FRAGMENT_BIT
            pytest.skip(f"{context.info.name} has no cooperative vectors in fragment shaders (stages {stages:#x})")
        yield context


@pytest.mark.gpu
@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("texture", TEXTURES)
def test_the_coopvec_texture_draws_what_the_float16_emulation_computes(coopvec_context, tmp_path, lang, texture):
    model = TEXTURES[texture]()
    image = _drawn(coopvec_context, model, "coopvec", tmp_path, lang)
    np.testing.assert_allclose(image[..., :3], texture_reference(model, SIDE, coopvec_reference), **FP16_TOLERANCE)


@pytest.mark.gpu
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_compute_harness_runs_the_coopvec_export(coopvec_context, tmp_path, lang):
    model = texture_model(output_activation="tanh", hidden=(64, 64, 32))
    exported = export_shader(model.graph, tmp_path / "export", lang=lang, name="net")
    inputs = np.random.default_rng(0).uniform(0, 1, (1000, 2)).astype(np.float16).astype(np.float32)
    words = compute_shader(exported, "coopvec")
    spirv_val(words, tmp_path)
    outputs = run_compute(coopvec_context, exported, words, inputs, "coopvec")
    np.testing.assert_allclose(outputs, coopvec_reference(model, inputs), **FP16_TOLERANCE)
