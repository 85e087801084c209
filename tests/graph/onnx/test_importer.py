"""import_model end to end: the sources it reads, safe external data, model errors, inputs and outputs."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, external_data_helper, helper

from coopnn.errors import CoopnnError, ModelFormatError, UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model, supported_operators
from coopnn.graph.verify import verify
from coopnn.backends.numpy.inference import run_graph

RNG = np.random.default_rng(4)
W1 = RNG.standard_normal((8, 3)).astype(np.float32)
B1 = RNG.standard_normal(8).astype(np.float32)
W2 = RNG.standard_normal((2, 8)).astype(np.float32)


def mlp_nodes():
    return [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["a"], name="act"),
        helper.make_node("Gemm", ["a", "w2"], ["y"], transB=1, name="fc2"),
    ]


@pytest.fixture
def mlp(onnx_model) -> onnx.ModelProto:
    return onnx_model(mlp_nodes(), {"x": ["batch", 3]}, ["y"], {"w1": W1, "b1": B1, "w2": W2})


def _reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W1.T + B1, 0) @ W2.T


# ----- sources --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["path", "str", "bytes", "proto"])
def test_import_from_every_source(mlp, tmp_path, source):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp.SerializeToString())
    model = {"path": path, "str": str(path), "bytes": path.read_bytes(), "proto": mlp}[source]
    graph = verify(import_model(model))
    assert [n.op for n in graph.nodes] == [Op.GEMM, Op.RELU, Op.GEMM]
    assert [v.name for v in graph.inputs] == ["x"] and graph.inputs[0].shape == (None, 3)
    assert graph.outputs[0].shape == (None, 2) and graph.opset == 13
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(run_graph(graph, {"x": x})["y"], _reference(x), rtol=1e-5, atol=1e-6)


def test_fixed_and_symbolic_batch_sizes_both_become_the_batch_axis(onnx_model):
    for batch in ("N", 1, 16, None):
        graph = import_model(onnx_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [batch, 4]}, ["y"]))
        assert graph.inputs[0].shape == (None, 4) and graph.outputs[0].shape == (None, 4)


@pytest.mark.parametrize("elem_type", [TensorProto.FLOAT16, TensorProto.DOUBLE])
def test_half_and_double_inputs_become_float32_values(onnx_model, elem_type):
    graph = import_model(onnx_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 4]}, ["y"],
                                    input_type=elem_type))
    assert graph.inputs[0].dtype == "f32" and graph.outputs[0].dtype == "f32"


def test_double_initializers_become_float32_constants(onnx_model, check_import):
    nodes = [
        helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE),
        helper.make_node("Mul", ["xd", "c"], ["y"]),
    ]
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"c": np.float64([0.5, 2.0, -1.0])}))
    assert graph.constants["c"].dtype == np.float32


def test_several_outputs_keep_their_order_and_an_input_may_be_an_output(onnx_model, check_import):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Tanh", ["x"], ["t"])]
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, {"t": ["N", 3], "x": ["N", 3], "s": ["N", 3]}))
    assert [v.name for v in graph.outputs] == ["t", "x", "s"]


def test_initializer_listed_as_an_input_is_a_constant(mlp):
    mlp.graph.input.append(helper.make_tensor_value_info("w2", TensorProto.FLOAT, [2, 8]))
    graph = import_model(mlp)
    assert [v.name for v in graph.inputs] == ["x"] and "w2" in graph.constants


def test_unnamed_nodes_get_unique_names(onnx_model):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    graph = verify(import_model(onnx_model(nodes, {"x": ["N", 3]}, ["y"])))
    assert len({n.name for n in graph.nodes}) == 2


def test_the_callers_proto_is_left_alone(tmp_path, mlp):
    _externalize(mlp, "w1", tmp_path / "w1.bin")
    before = mlp.SerializeToString()
    import_model(mlp, base_dir=tmp_path)
    assert mlp.SerializeToString() == before


# ----- unreadable models ----------------------------------------------------------------------------------------


def test_object_that_is_not_a_model():
    with pytest.raises(ModelFormatError, match="not int"):
        import_model(12345)


def test_missing_file(tmp_path):
    with pytest.raises(ModelFormatError, match="cannot read model file"):
        import_model(tmp_path / "absent.onnx")


@pytest.mark.parametrize("cut", [0.5, 0.9, -1, 10])
def test_truncated_file(mlp, tmp_path, cut):
    data = mlp.SerializeToString()
    end = int(len(data) * cut) if isinstance(cut, float) else (cut if cut > 0 else len(data) + cut)
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:end])
    with pytest.raises(ModelFormatError):
        import_model(path)


@pytest.mark.parametrize("data", [b"", b"hello, not a model\n", np.random.default_rng(0).bytes(4096)],
                         ids=["empty", "text", "random"])
def test_bytes_that_are_not_a_model(data):
    with pytest.raises(ModelFormatError):
        import_model(data)


def test_model_failing_the_checker(onnx_model):
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 3]}, ["y"])
    model.graph.node[0].input[0] = "nowhere"
    with pytest.raises(ModelFormatError, match="checker"):
        import_model(model)


def test_model_failing_shape_inference(onnx_model):
    model = onnx_model([helper.make_node("Add", ["x", "c"], ["y"])], {"x": ["N", 3]}, {"y": ["N", 3]},
                       {"c": np.zeros(4, np.float32)})
    with pytest.raises(ModelFormatError, match="shape inference"):
        import_model(model)


@pytest.mark.parametrize("damage", ["raw_too_long", "raw_too_short", "typed_count", "negative_dim"])
def test_initializer_whose_size_does_not_match_its_shape(mlp, damage):
    tensor = next(t for t in mlp.graph.initializer if t.name == "w1")
    if damage == "raw_too_long":
        tensor.raw_data += b"\0" * 4
    elif damage == "raw_too_short":
        tensor.raw_data = tensor.raw_data[:-4]
    elif damage == "typed_count":
        tensor.ClearField("raw_data")
        tensor.float_data.extend([1.0] * 5)
    else:
        tensor.dims[0] = -8
    with pytest.raises(ModelFormatError, match="initializer 'w1'"):
        import_model(mlp)


def test_huge_declared_initializer_is_refused_without_allocating(mlp):
    tensor = next(t for t in mlp.graph.initializer if t.name == "w1")
    tensor.dims[:] = [1 << 40, 1 << 20]
    with pytest.raises(ModelFormatError, match="initializer 'w1'"):
        import_model(mlp)


def test_input_with_unknown_feature_size(onnx_model):
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", "features"]}, ["y"])
    with pytest.raises(ModelFormatError, match="input 'x'.*axis 1"):
        import_model(model)


def test_output_that_does_not_depend_on_an_input(onnx_model):
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["c"], ["k"], name="const_neg")]
    model = onnx_model(nodes, {"x": ["N", 3]}, ["y", "k"], {"c": np.ones(3, np.float32)})
    with pytest.raises(UnsupportedOperatorError, match="const_neg.*output 'k' does not depend on any input"):
        import_model(model)


# ----- unsupported operators and inputs -------------------------------------------------------------------------


def test_unsupported_operator_names_the_node_the_opset_and_what_is_supported(onnx_model):
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_1")
    model = onnx_model([node], {"x": ["N", 1, 5, 5]}, ["y"], {"w": np.ones((1, 1, 3, 3), np.float32)}, opset=15)
    with pytest.raises(UnsupportedOperatorError) as caught:
        import_model(model)
    error = caught.value
    assert (error.op_type, error.node_name, error.opset) == ("Conv", "conv_1", 15)
    assert error.supported == supported_operators() and "Gemm" in error.supported
    assert "'Conv' (node 'conv_1', opset 15)" in str(error) and "Supported operators: Abs, Add" in str(error)


def test_operator_below_its_first_supported_opset(onnx_model):
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], broadcast=1, name="old")
    model = onnx_model([node], {"x": ["N", 3]}, ["y"], {"w": W1.T.copy(), "b": B1}, opset=6)
    with pytest.raises(UnsupportedOperatorError, match="'Gemm' \\(node 'old', opset 6\\): supported from opset 7"):
        import_model(model)


def test_operator_of_another_domain(mlp):
    mlp.opset_import.append(helper.make_opsetid("com.example", 1))
    mlp.graph.node.append(helper.make_node("Fancy", ["y"], ["z"], domain="com.example", name="fancy"))
    mlp.graph.output[0].name = "z"
    with pytest.raises(UnsupportedOperatorError, match="'Fancy' \\(node 'fancy', opset 1\\)"):
        import_model(mlp)


@pytest.mark.parametrize("elem_type", [TensorProto.INT64, TensorProto.INT32, TensorProto.UINT8])
def test_integer_input_is_unsupported_at_the_node_reading_it(onnx_model, elem_type):
    model = onnx_model([helper.make_node("Abs", ["x"], ["y"], name="absolute")], {"x": ["N", 3]}, ["y"],
                       input_type=elem_type)
    with pytest.raises(UnsupportedOperatorError, match="absolute.*input 'x' has element type"):
        import_model(model)


def test_scalar_input_is_unsupported_at_the_node_reading_it(onnx_model):
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"], name="r")], {"x": []}, ["y"])
    with pytest.raises(UnsupportedOperatorError, match="'r'.*input 'x' is a scalar"):
        import_model(model)


# ----- external data --------------------------------------------------------------------------------------------


def _externalize(model: onnx.ModelProto, name: str, path: Path, location: str | None = None) -> None:
    """Move initializer `name` into the file `path`, referenced by `location` (default: the file's name)."""
    tensor = next(t for t in model.graph.initializer if t.name == name)
    path.write_bytes(b"\x00" * 16 + tensor.raw_data)
    external_data_helper.set_external_data(tensor, location or path.name, offset=16, length=len(tensor.raw_data))
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """Every path the code under test opens for reading (a spy on open)."""
    paths: list[str] = []
    real_open = builtins.open

    def spy(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)):
            paths.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    return paths


def test_external_data_inside_the_models_folder(mlp, tmp_path):
    _externalize(mlp, "w1", tmp_path / "weights.bin")
    (tmp_path / "mlp.onnx").write_bytes(mlp.SerializeToString())
    graph = import_model(tmp_path / "mlp.onnx")
    np.testing.assert_array_equal(graph.constants["w1"], W1)


def test_external_data_in_a_subfolder(mlp, tmp_path):
    (tmp_path / "data").mkdir()
    _externalize(mlp, "w1", tmp_path / "data" / "w1.bin", location="data/w1.bin")
    (tmp_path / "mlp.onnx").write_bytes(mlp.SerializeToString())
    np.testing.assert_array_equal(import_model(tmp_path / "mlp.onnx").constants["w1"], W1)


def test_external_data_with_bytes_needs_base_dir(mlp, tmp_path):
    _externalize(mlp, "w1", tmp_path / "w1.bin")
    with pytest.raises(ModelFormatError, match="tensor 'w1'.*base_dir"):
        import_model(mlp.SerializeToString())
    np.testing.assert_array_equal(import_model(mlp.SerializeToString(), base_dir=tmp_path).constants["w1"], W1)


def _outside_setup(mlp, tmp_path, how: str) -> tuple[Path, Path]:
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.bin"
    tensor = next(t for t in mlp.graph.initializer if t.name == "w1")
    secret.write_bytes(b"\x00" * 16 + tensor.raw_data)
    location = {"parent": "../secret.bin", "absolute": str(secret), "symlink": "link.bin"}[how]
    if how == "symlink":
        (folder / "link.bin").symlink_to(secret)
    external_data_helper.set_external_data(tensor, location, offset=16, length=len(tensor.raw_data))
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    model_path = folder / "mlp.onnx"
    model_path.write_bytes(mlp.SerializeToString())
    return model_path, secret


@pytest.mark.parametrize("how", ["parent", "absolute", "symlink"])
def test_external_data_outside_the_models_folder_is_refused_unread(mlp, tmp_path, opened, how):
    model_path, secret = _outside_setup(mlp, tmp_path, how)
    opened.clear()
    with pytest.raises(ModelFormatError, match="tensor 'w1'"):
        import_model(model_path)
    assert os.path.realpath(secret) not in opened


@pytest.mark.parametrize("problem", ["missing", "directory", "past_the_end", "bad_offset"])
def test_external_data_that_cannot_be_read(mlp, tmp_path, problem):
    _externalize(mlp, "w1", tmp_path / "w1.bin")
    tensor = next(t for t in mlp.graph.initializer if t.name == "w1")
    entries = {e.key: e for e in tensor.external_data}
    if problem == "missing":
        entries["location"].value = "absent.bin"
    elif problem == "directory":
        (tmp_path / "sub").mkdir()
        entries["location"].value = "sub"
    elif problem == "past_the_end":
        entries["offset"].value = "64"
    else:
        entries["offset"].value = "sixteen"
    with pytest.raises(ModelFormatError, match="tensor 'w1'"):
        import_model(mlp, base_dir=tmp_path)


# ----- fuzzing --------------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_model_bytes_never_crash(mlp, data):
    """Flipped, deleted or inserted bytes: the import succeeds with a valid graph or raises a coopnn error."""
    raw = bytearray(mlp.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        action = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        if action == "flip":
            raw[at] ^= data.draw(st.integers(1, 255))
        elif action == "delete":
            del raw[at]
        else:
            raw.insert(at, data.draw(st.integers(0, 255)))
    try:
        verify(import_model(bytes(raw)))
    except CoopnnError:
        pass


def test_an_opset_newer_than_coopnn_knows_is_refused_as_onnxruntime_refuses_it(onnx_model):
    import onnxruntime as ort

    from coopnn.graph.onnx.validation import newest_opset

    newest = newest_opset()
    model = onnx_model(mlp_nodes(), {"x": ["batch", 3]}, ["y"], {"w1": W1, "b1": B1, "w2": W2}, opset=newest + 1)
    with pytest.raises(ModelFormatError, match=f"declares ONNX opset {newest + 1}, newer than the newest coopnn "
                                               f"knows \\({newest}"):
        import_model(model)
    with pytest.raises(Exception, match="opset"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    import_model(onnx_model(mlp_nodes(), {"x": ["batch", 3]}, ["y"], {"w1": W1, "b1": B1, "w2": W2}, opset=newest))


def test_a_graph_without_outputs_is_refused(onnx_model):
    model = onnx_model(mlp_nodes(), {"x": ["batch", 3]}, ["y"], {"w1": W1, "b1": B1, "w2": W2})
    del model.graph.output[:]
    with pytest.raises(ModelFormatError, match="declares no outputs"):
        import_model(model)
