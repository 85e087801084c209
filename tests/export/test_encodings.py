"""Encoding nodes (`Op.ENCODING`, tiny-cuda-nn configs) in the export: each encoding the export writes computes what
its numpy forward computes, through the compute harness at the float32 tolerance; one with tables (a grid) is refused
naming the node; the manifest carries the encoding's config."""

from __future__ import annotations

import json

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError
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
INPUTS = {"spherical_harmonics": 4}


def encoded_model(config, inputs: int = 2):
    return coopnn.mlp(inputs, [16], 3, encoding=config, output_activation="sigmoid", seed=4, backend="numpy")


# Slang runs the composite, which holds the other encodings' lowerings.
CASES = [(name, "glsl") for name in CONFIGS] + [("composite", "slang")]


@pytest.mark.vulkan
@pytest.mark.parametrize(("config", "lang"), CASES, ids=[f"{c}-{l}" for c, l in CASES])
def test_each_encoding_matches_numpy(vk_context, tmp_path, config, lang):
    require_compilers()
    width = INPUTS.get(config, 2)
    model = encoded_model(CONFIGS[config], width)
    exported = export_shader(model.graph, tmp_path / "export", lang=lang, name="enc", weights="fp32")
    inputs = np.random.default_rng(2).uniform(0, 1, (128, width)).astype(np.float32)
    words = compute_shader(exported, "portable")
    if lang == "slang":
        words = without_debug(words, tmp_path)
    outputs = run_compute(vk_context, exported, words, inputs, "portable")
    np.testing.assert_allclose(outputs, reference(model, inputs, weights="fp32"), **FP32_TOLERANCE)


def test_an_encoding_with_tables_is_refused_naming_the_node(tmp_path):
    model = coopnn.mlp(2, [16], 3, encoding={"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 8},
                       backend="numpy")
    with pytest.raises(CompileError, match="node 'encoding'.*has parameters \\(tables\\)"):
        export_shader(model.graph, tmp_path)


def test_the_manifest_holds_the_encoding_config(tmp_path):
    exported = export_shader(encoded_model(CONFIGS["composite"]).graph, tmp_path, name="enc")
    node = json.loads(exported.manifest.read_text())["input_stage"]["nodes"][0]
    assert node["op"] == "encoding" and node["attrs"]["encoding"]["otype"] == "Composite"
