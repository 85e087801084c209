"""Graph IR -> ONNX: a ModelProto (opset 20) that onnxruntime and `coopnn.load` run with the same results.

Constants become initializers under their IR names and nodes keep their IR names, so a model exported and imported
again names its parameters as before (`coopnn.graph.parameters`) and takes the same weight files. A LINEAR becomes
Gemm (transB=1) on rank-2 inputs, MatMul and Add otherwise, followed by its activation (the ONNX operator its row of
`coopnn.graph.activations` names); operators ONNX lacks are written as the ONNX operators that compute them (SiLU,
Softplus with beta or threshold, Clip with its bounds as inputs). An ENCODING is written in standard operators
(`coopnn.graph.onnx.encodings`: a grid's hash in int64 arithmetic, its table the parameter initializer, the lookup a
Gather) and described in the model's metadata, from which `fuse_encodings` makes the node again on import.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from coopnn.errors import CompileError
from coopnn.graph import ops
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.onnx.encodings import write_encoding
from coopnn.graph.onnx.fuse_encodings import describe_encodings
from coopnn.graph.passes.rewrite import NameScope

OPSET = 20  # the first with Gelu
IR_VERSION = 9  # what opset 20 needs; older runtimes read it
_INT64_MIN = np.iinfo(np.int64).min  # a Slice end meaning "past the first element" for negative steps
_ELEMENT_TYPES = {"f32": TensorProto.FLOAT, "bool": TensorProto.BOOL}

# IR operators written as one ONNX operator with the same attributes: the activations' own (`ACTIVATIONS`), and these
_DIRECT: Mapping[Op, str] = {
    **{op: a.onnx.op_type for op, a in ACTIVATIONS.items() if a.onnx is not None},
    Op.IDENTITY: "Identity", Op.NOT: "Not", Op.ADD: "Add", Op.SUB: "Sub", Op.MUL: "Mul", Op.DIV: "Div", Op.POW: "Pow",
    Op.MAX: "Max", Op.MIN: "Min", Op.PRELU: "PRelu", Op.LESS: "Less", Op.LESS_EQUAL: "LessOrEqual",
    Op.GREATER: "Greater", Op.GREATER_EQUAL: "GreaterOrEqual", Op.EQUAL: "Equal", Op.AND: "And", Op.OR: "Or",
    Op.XOR: "Xor", Op.WHERE: "Where", Op.CONCAT: "Concat", Op.TRANSPOSE: "Transpose", Op.SOFTMAX: "Softmax",
    Op.LOG_SOFTMAX: "LogSoftmax", Op.LAYER_NORM: "LayerNormalization", Op.MATMUL: "MatMul",
}
_REDUCE: Mapping[Op, str] = {Op.REDUCE_SUM: "ReduceSum", Op.REDUCE_MEAN: "ReduceMean",
                             Op.REDUCE_MAX: "ReduceMax", Op.REDUCE_MIN: "ReduceMin"}


class _Writer:
    """The ONNX nodes and initializers being written, and the names already taken."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes: list[onnx.NodeProto] = []
        self.initializers = [numpy_helper.from_array(np.asarray(a), name) for name, a in graph.constants.items()]
        self.fresh = NameScope(graph).fresh

    def add(self, op_type: str, inputs: list[str], output: str, name: str, **attrs: Any) -> str:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attrs))
        return output

    def constant(self, array: np.ndarray, base: str) -> str:
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def unary(self, op: Op, attrs: Mapping[str, Any], x: str, output: str, name: str) -> str:
        """Write the elementwise unary `op` (an IR node or a LINEAR's activation)."""
        special = _UNARY_SPECIAL.get(op)
        if special is not None:
            return special(self, dict(attrs), x, output, name)
        return self.add(_DIRECT[op], [x], output, name, **attrs)


def _silu(w: _Writer, attrs, x, output, name):
    sigmoid = w.add("Sigmoid", [x], w.fresh(f"{output}/sigmoid"), w.fresh(f"{name}/sigmoid"))
    return w.add("Mul", [x, sigmoid], output, name)


def _softplus(w: _Writer, attrs, x, output, name):
    beta, threshold = attrs.get("beta", 1.0), attrs.get("threshold")
    if beta == 1.0 and threshold is None:
        return w.add("Softplus", [x], output, name)
    beta_name = w.constant(np.float32(beta), f"{name}/beta")
    scaled = w.add("Mul", [x, beta_name], w.fresh(f"{output}/scaled"), w.fresh(f"{name}/scale"))
    soft = w.add("Softplus", [scaled], w.fresh(f"{output}/softplus"), w.fresh(f"{name}/softplus"))
    smooth_out = output if threshold is None else w.fresh(f"{output}/smooth")
    smooth = w.add("Div", [soft, beta_name], smooth_out, name if threshold is None else w.fresh(f"{name}/unscale"))
    if threshold is None:
        return smooth
    limit = w.constant(np.float32(threshold), f"{name}/threshold")
    linear = w.add("Greater", [scaled, limit], w.fresh(f"{output}/linear"), w.fresh(f"{name}/above"))
    return w.add("Where", [linear, x, smooth], output, name)


def _clip(w: _Writer, attrs, x, output, name):
    bounds = ["" if attrs.get(k) is None else w.constant(np.float32(attrs[k]), f"{name}/{k}") for k in ("min", "max")]
    while bounds and bounds[-1] == "":
        bounds.pop()
    return w.add("Clip", [x, *bounds], output, name)


def _cast(w: _Writer, attrs, x, output, name):
    return w.add("Cast", [x], output, name, to=_ELEMENT_TYPES[attrs["to"]])


def _tensor_language(w: _Writer, attrs, x, output, name):
    raise CompileError(f"node {name!r}: a tensor-language function (coopnn.tl.activation) has no ONNX form; ONNX "
                       f"has no operator that runs tensor-language text, and coopnn does not write it as ONNX "
                       f"operators")


_UNARY_SPECIAL: Mapping[Op, Callable[..., str]] = {Op.SILU: _silu, Op.SOFTPLUS: _softplus, Op.CLIP: _clip,
                                                   Op.CAST: _cast, Op.TL_FUNCTION: _tensor_language}


def _linear(w: _Writer, node: Node) -> None:
    x, weight, *bias = node.inputs
    act, output = node.activation, node.outputs[0]
    pre = output if act is None else w.fresh(f"{output}/linear")
    if len(w.graph.values[x].shape) == 2:
        w.add("Gemm", [x, weight, *bias], pre, node.name, transB=1)
    else:
        transposed = w.constant(np.ascontiguousarray(w.graph.constants[weight].T), f"{weight}/transposed")
        product = pre if not bias else w.fresh(f"{output}/matmul")
        w.add("MatMul", [x, transposed], product, node.name)
        if bias:
            w.add("Add", [product, bias[0]], pre, w.fresh(f"{node.name}/bias"))
    if act is not None:
        w.unary(act.op, act.attrs, pre, output, w.fresh(f"{node.name}/{act.op.value}"))


def _gemm(w: _Writer, node: Node) -> None:
    a = {"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 0, **node.attrs}
    w.add("Gemm", list(node.inputs), node.outputs[0], node.name, alpha=float(a["alpha"]), beta=float(a["beta"]),
          transA=int(a["trans_a"]), transB=int(a["trans_b"]))


def _slice(w: _Writer, node: Node) -> None:
    a = node.attrs
    stop = a["stop"] if a["stop"] >= 0 else _INT64_MIN
    operands = [w.constant(np.array([v], np.int64), f"{node.name}/{k}")
                for k, v in (("starts", a["start"]), ("ends", stop), ("axes", a["axis"]), ("steps", a["step"]))]
    w.add("Slice", [node.inputs[0], *operands], node.outputs[0], node.name)


def _reshape(w: _Writer, node: Node) -> None:
    # 0 copies the input's size there: the batch axis keeps whatever size the batch has
    shape = np.array([0 if d is None else d for d in node.attrs["shape"]], np.int64)
    w.add("Reshape", [node.inputs[0], w.constant(shape, f"{node.name}/shape")], node.outputs[0], node.name)


def _reduce(w: _Writer, node: Node) -> None:
    axes = w.constant(np.array(node.attrs["axes"], np.int64), f"{node.name}/axes")
    w.add(_REDUCE[node.op], [node.inputs[0], axes], node.outputs[0], node.name,
          keepdims=int(node.attrs.get("keepdims", True)))


def _encoding(w: _Writer, node: Node) -> None:
    x, *params = node.inputs
    write_encoding(w, node.attrs["encoding"], x, params[0] if params else None, node.outputs[0], node.name)


_NODE_WRITERS: dict[Op, Callable[[_Writer, Node], None]] = {
    Op.ENCODING: _encoding,
    Op.LINEAR: _linear,
    Op.GEMM: _gemm,
    Op.SLICE: _slice,
    Op.RESHAPE: _reshape,
    **{op: _reduce for op in _REDUCE},
}


def _write_node(w: _Writer, node: Node) -> None:
    writer = _NODE_WRITERS.get(node.op)
    if writer is not None:
        writer(w, node)
    elif ops.opdef(node.op).kind == "unary":
        w.unary(node.op, node.attrs, node.inputs[0], node.outputs[0], node.name)
    else:
        w.add(_DIRECT[node.op], list(node.inputs), node.outputs[0], node.name, **node.attrs)


assert set(Op) == set(_NODE_WRITERS) | set(_DIRECT) | set(_UNARY_SPECIAL), "IR operators export cannot write: " + str(
    set(Op) - set(_NODE_WRITERS) - set(_DIRECT) - set(_UNARY_SPECIAL))


def _value_info(graph: Graph, name: str) -> onnx.ValueInfoProto:
    value = graph.values[name]
    dims = ["batch" if d is None else d for d in value.shape]
    return helper.make_tensor_value_info(name, _ELEMENT_TYPES[value.dtype], dims)


def export_onnx(graph: Graph) -> onnx.ModelProto:
    """The ONNX model computing what `graph` computes; CompileError for an output no node produces."""
    w = _Writer(graph)
    produced = {node.outputs[0] for node in graph.nodes}
    for value in graph.outputs:
        if value.name not in produced:
            raise CompileError(f"output {value.name!r} of model {graph.name!r} is not computed by any node; "
                               "ONNX outputs must be node results")
    for node in graph.nodes:
        _write_node(w, node)
    proto_graph = helper.make_graph(w.nodes, graph.name, [_value_info(graph, v.name) for v in graph.inputs],
                                    [_value_info(graph, v.name) for v in graph.outputs], w.initializers)
    model = helper.make_model(proto_graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="coopnn")
    model.ir_version = IR_VERSION
    describe_encodings(model, graph)
    return model
