"""Encoding nodes (`Op.ENCODING`, tiny-cuda-nn configs) in the export: each encoding computes what its numpy forward
computes, through the compute harness at the float32 tolerance, grids (hash, dense, tiled; every interpolation)
reading their tables from the weights file; the manifest carries the encoding's config and the tables."""

from __future__ import annotations

import json

import numpy as np
import pytest

import coopnn
from coopnn.export import export_shader
from tests.export.harness import (FP32_TOLERANCE, compute_shader, reference, require_compilers, run_compute,
                                  without_debug)

CONFIGS = {
    "frequency_tcnn": {"otype": "Frequency", "n_frequencies": 4},
    "frequency_nerf": {"otype": "Frequency", "n_frequencies": 3, "layout": "nerf"},
    "triangle_wave": {"otype": "TriangleWave", "n_frequencies": 5},
    "identity": {"otype": "Identity", "scale": 0.5, "offset": 0.25},
    "oneblob": {"otype": "OneBlob", "n_bins": 8},
    "composite": {"otype": "Composite", "nested": [{"otype": "TriangleWave", "n_dims_to_encode": 1, "n_frequencies": 3},
                                                   {"otype": "Frequency", "n_frequencies": 2}]},
    "spherical_harmonics": {"otype": "Composite", "nested": [{"otype": "SphericalHarmonics", "degree": 8,
                                                             "n_dims_to_encode": 3},
                                                            {"otype": "Identity"}]},
}
GRIDS = {
    "hash_grid": {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 8,
                  "base_resolution": 4, "per_level_scale": 2.0},
    "dense_grid_smoothstep": {"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 4, "base_resolution": 3,
                              "interpolation": "Smoothstep"},
    "tiled_grid_nearest": {"otype": "TiledGrid", "n_levels": 3, "n_features_per_level": 1, "base_resolution": 4,
                           "interpolation": "Nearest"},
    "composite_grid": {"otype": "Composite", "nested": [
        {"otype": "HashGrid", "n_dims_to_encode": 2, "n_levels": 2, "log2_hashmap_size": 6, "base_resolution": 8},
        {"otype": "Frequency", "n_frequencies": 2}]},
}
CONFIGS.update(GRIDS)
INPUTS = {"spherical_harmonics": 4, "composite_grid": 3}


def encoded_model(config, inputs: int = 2):
    return coopnn.mlp(inputs, [16], 3, encoding=config, output_activation="sigmoid", seed=4, backend="numpy")


# Slang runs the composite, which holds the other encodings' lowerings.
CASES = [(name, "glsl") for name in CONFIGS] + [("composite", "slang"), ("composite_grid", "slang")]


@pytest.mark.vulkan
@pytest.mark.parametrize(("config", "lang"), CASES, ids=[f"{c}-{l}" for c, l in CASES])
def test_each_encoding_matches_numpy(vk_context, tmp_path, config, lang):
    require_compilers()
    width = INPUTS.get(config, 2)
    model = encoded_model(CONFIGS[config], width)
    if config in GRIDS:  # tables of trained size rather than tcnn's 1e-4 start, so that they carry the output
        with_tables(model)
    exported = export_shader(model.graph, tmp_path / "export", lang=lang, name="enc", weights="fp32")
    inputs = np.random.default_rng(2).uniform(0, 1, (128, width)).astype(np.float32)
    words = compute_shader(exported, "portable")
    if lang == "slang":
        words = without_debug(words, tmp_path)
    outputs = run_compute(vk_context, exported, words, inputs, "portable")
    np.testing.assert_allclose(outputs, reference(model, inputs, weights="fp32"), **FP32_TOLERANCE)


def with_tables(model) -> None:
    """The model with its encoding's parameters drawn uniformly in [-1, 1]."""
    rng = np.random.default_rng(7)
    model.set_parameters({name: rng.uniform(-1, 1, value.shape).astype(np.float32)
                          for name, value in model.parameters().items() if name.startswith("encoding")})


def test_the_manifest_lists_the_tables(tmp_path):
    model = encoded_model(GRIDS["hash_grid"])
    exported = export_shader(model.graph, tmp_path, name="enc", weights="fp16")
    manifest = json.loads(exported.manifest.read_text())
    [table] = manifest["tables"]
    assert table["elements"] == model.graph.nodes[0].attrs["encoding"].n_parameters
    assert table["spec_constant"] == 2 * len(manifest["layers"]) and table["component_type"] == "float16"
    assert "TEX" not in exported.source.read_text() and "enc_table0" in exported.source.read_text()


def test_the_manifest_holds_the_encoding_config(tmp_path):
    exported = export_shader(encoded_model(CONFIGS["composite"]).graph, tmp_path, name="enc")
    node = json.loads(exported.manifest.read_text())["input_stage"]["nodes"][0]
    assert node["op"] == "encoding" and node["attrs"]["encoding"]["otype"] == "Composite"
