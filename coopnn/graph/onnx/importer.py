"""import_model: an ONNX model (path, bytes or ModelProto) → a coopnn graph, through the converter registry.

Steps: load safely (`loading`), check (`validation`: opset and outputs, initializers, ONNX checker, shape
inference), declare the graph inputs as batched values, convert node by node with the registered converters, then
collect the outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from coopnn.errors import ModelFormatError
from coopnn.graph.ir import Graph, Value
from coopnn.graph.onnx import converters  # noqa: F401  (fills the registry with the listed converter families)
from coopnn.graph.onnx import registry
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.fuse_encodings import fuse_encodings
from coopnn.graph.onnx.loading import load_proto
from coopnn.graph.onnx.node import OnnxNode, canonical_domain
from coopnn.graph.onnx.tensors import element_type_name
from coopnn.graph.onnx.validation import check_and_infer, check_declarations, read_initializers

# ONNX element types an input may have → the IR type of its values (floats are computed in float32)
_INPUT_DTYPES = {
    TensorProto.FLOAT: "f32",
    TensorProto.FLOAT16: "f32",
    TensorProto.DOUBLE: "f32",
    TensorProto.BOOL: "bool",
}


def import_model(model: str | os.PathLike | bytes | onnx.ModelProto, *,
                 base_dir: str | os.PathLike | None = None) -> Graph:
    """The coopnn graph of an ONNX model; axis 0 of every input is the batch axis.

    Raises ModelFormatError for a model that cannot be read or is malformed, and UnsupportedOperatorError (naming
    the node, its operator and opset) for anything coopnn cannot run.
    """
    proto = load_proto(model, base_dir)
    check_declarations(proto)
    initializers = read_initializers(proto)
    proto = fuse_encodings(check_and_infer(proto))
    graph = proto.graph
    opsets = {canonical_domain(o.domain): o.version for o in proto.opset_import}
    names = {v.name for v in graph.input} | set(initializers) | {o for n in graph.node for o in n.output}
    ctx = ConversionContext(names, registry.supported_operators())
    for name, array in initializers.items():
        ctx.set_static(name, array)
    unusable = _declare_inputs(ctx, graph, initializers)
    producers = _convert_nodes(ctx, graph, opsets, unusable)
    outputs = tuple(_output(ctx, v, producers.get(v.name)) for v in graph.output)
    inputs = tuple(ctx.values[v.name] for v in graph.input if v.name not in initializers and v.name not in unusable)
    # a file's name says more than the exporters' generic graph names ("main_graph", "torch_jit")
    name = Path(model).stem if isinstance(model, (str, os.PathLike)) else graph.name or "model"
    return Graph(name=name, inputs=inputs, outputs=outputs, nodes=tuple(ctx.nodes),
                 values=dict(ctx.values), constants=dict(ctx.constants), opset=opsets.get("", 0))


def _convert_nodes(ctx: ConversionContext, graph: onnx.GraphProto, opsets: dict[str, int],
                   unusable: dict[str, str]) -> dict[str, OnnxNode]:
    """Convert every node with its registered converter; return the node that produced each ONNX value."""
    producers: dict[str, OnnxNode] = {}
    for index, proto_node in enumerate(graph.node):
        node = OnnxNode.from_proto(proto_node, index, opsets)
        producers.update((name, node) for name in node.outputs)
        ctx.node = node
        for name in node.inputs:
            if name in unusable:
                ctx.fail(unusable[name])
        convert = registry.lookup(node.domain, node.op_type, node.opset)
        if convert is None:
            first = registry.first_version(node.domain, node.op_type)
            ctx.fail(f"supported from opset {first}" if first is not None else "")
        convert(node, ctx)
    return producers


def _declare_inputs(ctx: ConversionContext, graph: onnx.GraphProto,
                    initializers: dict[str, np.ndarray]) -> dict[str, str]:
    """Add the graph inputs as batched values; return those no IR value can hold, with the reason.

    A missing shape or an unknown feature size is a malformed model for coopnn. A scalar or a tensor of another
    element type is an input coopnn cannot compute with: the first node that reads it is unsupported.
    """
    unusable = {}
    for info in graph.input:
        if info.name in initializers:
            continue  # an initializer listed as an input (IR version < 4) is a constant with a default
        tensor_type = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            unusable[info.name] = f"input {info.name!r} is not a tensor"
            continue
        if not tensor_type.HasField("shape"):
            raise ModelFormatError(f"input {info.name!r} declares no shape; coopnn needs its feature sizes")
        dims = tensor_type.shape.dim
        features = []
        for axis, dim in enumerate(dims[1:], start=1):
            if not dim.HasField("dim_value"):
                raise ModelFormatError(f"input {info.name!r} has an unknown size on axis {axis} "
                                       f"({dim.dim_param or 'unnamed'}); only axis 0, the batch, may vary")
            features.append(dim.dim_value)
        dtype = _INPUT_DTYPES.get(tensor_type.elem_type)
        if len(dims) == 0:
            unusable[info.name] = f"input {info.name!r} is a scalar; coopnn inputs have a batch axis first"
        elif dtype is None:
            unusable[info.name] = (f"input {info.name!r} has element type {element_type_name(tensor_type.elem_type)}; "
                                   "coopnn computes in float32 and takes float16/float32/float64 or bool inputs")
        else:
            ctx.add_input(Value(info.name, dtype, (None, *features)))
    return unusable


def _output(ctx: ConversionContext, info: onnx.ValueInfoProto, producer: OnnxNode | None) -> Value:
    value = ctx.values.get(info.name)
    if value is not None and value.batched:
        return value
    why = f"output {info.name!r} does not depend on any input; coopnn outputs are computed per sample"
    if producer is None:
        raise ModelFormatError(why)
    ctx.node = producer
    ctx.fail(why)
