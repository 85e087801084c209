"""Encodings through ONNX: every encoding exports in standard operators that onnxruntime runs with coopnn's
outputs at float32 tolerance (grids outside [0, 1] too), and `coopnn.load` fuses the subgraph back into the
ENCODING node, checked by the verifier; a subgraph edited since is not fused."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import coopnn
from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx.export import export_onnx
from coopnn.graph.onnx.fuse_encodings import DOMAIN, fuse_encodings
from coopnn.graph.verify import verify
from tests.graph.encodings.cases import ENCODINGS, IDS, inputs

def model_for(config, n_in):
    model = coopnn.mlp(n_in, [16], 3, encoding=config, backend="numpy", seed=1)
    params = model.parameters().get("encoding.params")
    if params is not None:  # tables of order one, so that every lookup shows in the outputs
        model.set_parameters({"encoding.params": np.random.default_rng(2).standard_normal(params.shape)})
    return model


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


@pytest.mark.parametrize("value", ["not json", "[1, 2]", '{"config": {"otype": "HashGrid"}}',
                                   '{"config": {"otype": "Nope"}, "n_input_dims": 2, "input": "x", "params": "",'
                                   ' "output": "y"}',
                                   '{"config": {"otype": "Identity"}, "n_input_dims": -3, "input": "x", "params": "",'
                                   ' "output": "y"}'])
def test_metadata_that_does_not_describe_the_nodes_fuses_nothing(value):
    config, n_in = ENCODINGS[0]
    proto = export_onnx(model_for(config, n_in).graph)
    proto.metadata_props[0].value = value
    assert not any(node.op_type == "Encoding" for node in fuse_encodings(proto).graph.node)


@pytest.mark.parametrize("change", [{"n_input_dims": float("inf")}, {"input": ["x"]}, {"params": ["p"]},
                                    {"output": {"y": 1}}, "[" * 100000],
                         ids=["infinite-dims", "input-list", "params-list", "output-object", "deep-json"])
def test_a_hostile_record_fuses_nothing(change):
    config, n_in = ENCODINGS[0]
    proto = export_onnx(model_for(config, n_in).graph)
    record = json.loads(proto.metadata_props[0].value)
    proto.metadata_props[0].value = change if isinstance(change, str) else json.dumps({**record, **change})
    assert not any(node.op_type == "Encoding" for node in fuse_encodings(proto).graph.node)


@pytest.mark.parametrize("config, message", [(2.5, "the JSON object must be str"),
                                             ("[" * 100000, "maximum recursion depth"),
                                             ('{"otype": "HashGrid", "log2_hashmap_size": 40}',
                                              "'log2_hashmap_size' is 40")],
                         ids=["float-attribute", "deep-json", "huge-table"])
def test_an_encoding_node_with_a_hostile_config_names_the_node(config, message):
    node = helper.make_node("Encoding", ["x"], ["y"], name="enc", domain=DOMAIN, config=config, n_input_dims=2)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(DOMAIN, 1)])
    with pytest.raises(UnsupportedOperatorError, match=f"node 'enc'.*cannot be built: .*{message}"):
        coopnn.load(proto.SerializeToString(), backend="numpy")
