"""Encodings through ONNX: every encoding exports in standard operators that onnxruntime runs with coopnn's
outputs at float32 tolerance (grids outside [0, 1] too), and `coopnn.load` fuses the subgraph back into the
ENCODING node, checked by the verifier; a subgraph edited since is not fused."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import coopnn
from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx.export import export_onnx
from coopnn.graph.onnx.fuse_encodings import fuse_encodings
from coopnn.graph.verify import verify

ENCODINGS = [
    ({"otype": "Identity", "scale": 2.0, "offset": 0.5}, 2),
    ({"otype": "Frequency", "n_frequencies": 4}, 2),
    ({"otype": "Frequency", "layout": "nerf", "n_frequencies": 3}, 3),
    ({"otype": "TriangleWave", "n_frequencies": 5}, 2),
    ({"otype": "OneBlob", "n_bins": 8}, 2),
    ({"otype": "SphericalHarmonics", "degree": 8}, 3),
    ({"otype": "HashGrid", "n_levels": 6, "log2_hashmap_size": 8, "base_resolution": 4, "per_level_scale": 1.5}, 2),
    ({"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 4, "interpolation": "Nearest",
      "log2_hashmap_size": 6}, 3),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 1, "interpolation": "Smoothstep"}, 1),
    ({"otype": "TiledGrid", "n_levels": 3, "n_features_per_level": 8, "base_resolution": 3}, 4),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1},
                                       {"otype": "HashGrid", "n_dims_to_encode": 2, "n_levels": 2},
                                       {"otype": "SphericalHarmonics", "degree": 2}]}, 6),
]
IDS = [f"{config['otype']}-{config.get('interpolation', config.get('layout', ''))}-{n}d" for config, n in ENCODINGS]


def model_for(config, n_in):
    model = coopnn.mlp(n_in, [16], 3, encoding=config, backend="numpy", seed=1)
    params = model.parameters().get("encoding.params")
    if params is not None:  # tables of order one, so that every lookup shows in the outputs
        model.set_parameters({"encoding.params": np.random.default_rng(2).standard_normal(params.shape)})
    return model


def inputs(config, n_in):
    x = np.random.default_rng(3).random((400, n_in), dtype=np.float32)
    if "Grid" in config["otype"]:
        x[:40] = x[:40] * 4 - 2  # outside [0, 1]: the tables wrap around as tcnn's do
    x[40] = 0
    x[41] = 1
    x[42] = np.nextafter(np.float32(1), np.float32(0))
    return x


@pytest.mark.parametrize("config, n_in", ENCODINGS, ids=IDS)
def test_onnxruntime_runs_the_export_with_coopnns_outputs(config, n_in):
    model = model_for(config, n_in)
    proto = export_onnx(model.graph)
    onnx.checker.check_model(proto, full_check=True)
    allowed = {schema.name for schema in onnx.defs.get_all_schemas()}
    assert all(node.domain == "" and node.op_type in allowed for node in proto.graph.node)
    x = inputs(config, n_in)
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, model.run(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("config, n_in", ENCODINGS, ids=IDS)
def test_load_fuses_the_subgraph_back_into_the_encoding(config, n_in, tmp_path):
    model = model_for(config, n_in)
    model.save(tmp_path / "model.onnx")
    loaded = coopnn.load(tmp_path / "model.onnx", backend="numpy")
    verify(loaded.graph)
    assert [node.op for node in loaded.graph.nodes] == [Op.ENCODING, Op.LINEAR, Op.LINEAR]
    assert loaded.graph.nodes[0].attrs["encoding"] == model.graph.nodes[0].attrs["encoding"]
    assert sorted(loaded.parameters()) == sorted(model.parameters())
    x = inputs(config, n_in)
    np.testing.assert_array_equal(loaded.run(x), model.run(x))


def test_an_edited_subgraph_is_not_fused():
    config, n_in = ENCODINGS[6]
    proto = export_onnx(model_for(config, n_in).graph)
    scale = next(i for i in proto.graph.initializer if i.name.startswith("encoding/scale"))
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 2, scale.name))
    fused = fuse_encodings(onnx.ModelProto.FromString(proto.SerializeToString()))
    assert not any(node.op_type == "Encoding" for node in fused.graph.node)
    with pytest.raises(UnsupportedOperatorError, match="to INT64 is not supported"):
        coopnn.load(proto.SerializeToString(), backend="numpy")
