"""Bad input to the export is refused naming what is wrong: a node or activation no shader function expresses, a
weight format the shaders cannot read, a name that is no identifier; and a weights file that does not match its
manifest is refused by the Python helper (the C helper's refusal is in test_example_c.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError, InputError
from coopnn.export import export_shader
from coopnn.export.device import read_export
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.graph.onnx.importer import import_model
from tests.export.harness import texture_model

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_a_node_after_the_first_linear_is_named(tmp_path):
    graph = import_model(MODELS / "activations_zoo.onnx")
    with pytest.raises(CompileError, match="node 'node_prelu' \\(prelu\\) follows the first Linear"):
        export_shader(graph, tmp_path)


def test_an_input_stage_node_without_a_lowering_is_named(tmp_path):
    builder = GraphBuilder("softmaxed")
    x = builder.input("x", 4)
    soft = builder.node(Op.SOFTMAX, "stage.softmax", [x], axis=1)
    weight = builder.constant("w", np.ones((3, 4)))
    bias = builder.constant("b", np.zeros(3))
    builder.node(Op.LINEAR, "layer", [soft, weight, bias], output="y")
    with pytest.raises(CompileError, match="node 'stage.softmax' \\(softmax\\) has no lowering.*sin"):
        export_shader(builder.graph(["y"]), tmp_path)


def test_an_activation_without_a_shader_function_is_named(tmp_path):
    model = coopnn.mlp(2, [8], 3, activation="gelu", backend="numpy")
    with pytest.raises(CompileError, match="layers.0.*gelu.*approximate='tanh'"):
        export_shader(model.graph, tmp_path)


@pytest.mark.parametrize("weights", ["fp8_e4m3", "int8", "q4_0"])
def test_a_format_the_shaders_cannot_read_is_named(tmp_path, weights):
    with pytest.raises(CompileError, match=f"weights={weights!r}: the shader export writes fp16 or fp32"):
        export_shader(texture_model().graph, tmp_path, weights=weights)


@pytest.mark.parametrize("name", ["3d", "bad-name", "a__b", ""])
def test_a_name_that_is_no_identifier_is_refused(tmp_path, name):
    with pytest.raises(InputError, match="must be a C identifier"):
        export_shader(texture_model().graph, tmp_path, name=name)


def test_an_unknown_language_is_refused(tmp_path):
    with pytest.raises(InputError, match="glsl or slang"):
        export_shader(texture_model().graph, tmp_path, lang="hlsl")


def test_several_outputs_are_refused(tmp_path):
    graph = import_model(MODELS / "legacy_layernorm_softmax.onnx")
    with pytest.raises(CompileError, match="one input and one output"):
        export_shader(graph, tmp_path)


@pytest.fixture
def exported(tmp_path):
    return export_shader(texture_model().graph, tmp_path, name="tex")


def test_the_manifest_matches_its_file(exported):
    files = read_export(exported.manifest)
    assert files.manifest["weights"]["size"] == len(files.data) == exported.weights.stat().st_size
    layers = files.manifest["layers"]
    assert [(l["inputs"], l["outputs"]) for l in layers] == [(14, 16), (16, 16), (16, 3)]
    assert layers[0]["matrix"] == {**layers[0]["matrix"], "rows": 16, "columns": 16, "stride": 32,
                                   "layout": "row_major", "convert_to": "inferencing_optimal",
                                   "component_type": "float16", "spec_constant": 0}
    assert files.manifest["input_stage"]["constants"]["encoding.frequencies"] == pytest.approx(
        [np.pi, 2 * np.pi, 4 * np.pi])


def test_a_changed_weights_file_is_refused(exported):
    data = bytearray(exported.weights.read_bytes())
    data[100] ^= 1
    exported.weights.write_bytes(bytes(data))
    with pytest.raises(InputError, match="does not match its manifest's SHA-256"):
        read_export(exported.manifest)


def test_a_truncated_weights_file_is_refused(exported):
    exported.weights.write_bytes(exported.weights.read_bytes()[:-16])
    with pytest.raises(InputError, match=r"holds \d+ bytes; its manifest describes"):
        read_export(exported.manifest)


def test_a_weights_file_of_another_export_is_refused(tmp_path, exported):
    other = export_shader(texture_model(seed=5).graph, tmp_path / "other", name="tex")
    exported.weights.write_bytes(other.weights.read_bytes())
    with pytest.raises(InputError, match="SHA-256"):
        read_export(exported.manifest)


def test_a_manifest_that_is_no_export_is_refused(tmp_path, exported):
    exported.manifest.write_text(json.dumps({"name": "tex"}))
    with pytest.raises(InputError, match="is not a version-1 coopnn shader export manifest"):
        read_export(exported.manifest)
    exported.manifest.write_text("{")
    with pytest.raises(InputError, match="not a readable export manifest"):
        read_export(exported.manifest)


def test_an_encoding_without_a_lowering_is_named(tmp_path):
    from dataclasses import dataclass

    from coopnn.graph.encodings.base import Encoding

    @dataclass(frozen=True)
    class Novel(Encoding):
        otype = "Novel"

        @property
        def n_output_dims(self) -> int:
            return self.n_input_dims

        def forward(self, x, params):
            return x

        def backward(self, x, params, dy):
            return params, dy

        def to_config(self):
            return {"otype": self.otype}

    builder = GraphBuilder("novel")
    encoded = builder.node(Op.ENCODING, "stage.novel", [builder.input("x", 2)], encoding=Novel(2))
    weight, bias = builder.constant("w", np.ones((3, 2))), builder.constant("b", np.zeros(3))
    builder.node(Op.LINEAR, "layer", [encoded, weight, bias], output="y")
    with pytest.raises(CompileError, match="node 'stage.novel': Novel has no lowering.*Frequency.*Grid"):
        export_shader(builder.graph(["y"]), tmp_path)
