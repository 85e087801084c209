"""The encoding fusion pass: an ONNX model's encoding subgraphs, written by coopnn's exporter in standard operators,
made into one `ai.coopnn::Encoding` node each before conversion, which the converter turns into `Op.ENCODING`.

The exporter records each encoding in the model's metadata (`coopnn.encoding:<node>`: its config, input,
parameter and output names). The pass rebuilds the encoding from that config, writes its subgraph again, and fuses
only where the file's nodes named `<node>` and `<node>/...` are that subgraph operator for operator (the same
attributes and constants; intermediate names may differ). A file edited since (or metadata that does not describe
its nodes) keeps its nodes, and its integer arithmetic is then refused by the importer as any unsupported operator
is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from coopnn.errors import CoopnnError
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Graph, Op
from coopnn.graph.onnx.encodings import write_encoding
from coopnn.graph.passes.rewrite import NameScope

METADATA_PREFIX = "coopnn.encoding:"
DOMAIN = "ai.coopnn"
DOMAIN_VERSION = 1


def describe_encodings(model: onnx.ModelProto, graph: Graph) -> None:
    """Record every ENCODING node of `graph` in the metadata of its export `model`."""
    for node in graph.nodes:
        if node.op is Op.ENCODING:
            encoding = node.attrs["encoding"]
            record = {"input": node.inputs[0], "params": node.inputs[1] if len(node.inputs) > 1 else "",
                      "output": node.outputs[0], "n_input_dims": encoding.n_input_dims, "config": encoding.to_config()}
            model.metadata_props.add(key=METADATA_PREFIX + node.name, value=json.dumps(record))


class _Recorder:
    """An exporter writer that only records what it is asked to write."""

    def __init__(self, taken: set[str]):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, np.ndarray] = {}
        self._scope = NameScope(taken=taken)

    def add(self, op_type: str, inputs: list[str], output: str, name: str, **attrs: Any) -> str:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attrs))
        return output

    def constant(self, array: np.ndarray, base: str) -> str:
        name = self.fresh(base)
        self.initializers[name] = np.asarray(array)
        return name

    def fresh(self, base: str) -> str:
        return self._scope.fresh(base)


def _canonical(nodes, constants: dict[str, np.ndarray], external: dict[str, str]) -> list[tuple]:
    """The nodes with names replaced by what they stand for: external names by role, constants by content,
    intermediates by the order they are made in."""
    made: dict[str, str] = {}

    def name(value: str) -> str:
        if value in external:
            return external[value]
        if value in constants:
            array = constants[value]
            return f"const {array.dtype} {array.shape} {hashlib.sha256(array.tobytes()).hexdigest()}"
        return made.setdefault(value, f"v{len(made)}")

    out = []
    for node in nodes:
        inputs = tuple(name(v) for v in node.input)
        outputs = tuple(name(v) for v in node.output)
        attrs = tuple(sorted((a.name, a.SerializeToString()) for a in node.attribute))
        out.append((node.op_type, node.domain, inputs, outputs, attrs))
    return out


def _fuse_one(proto: onnx.ModelProto, node_name: str, record: dict) -> bool:
    graph = proto.graph
    try:
        encoding = from_config(record["config"], int(record["n_input_dims"]), f"encoding {node_name!r}")
        x, params, output = record["input"], record["params"] or None, record["output"]
    except (CoopnnError, KeyError, TypeError, ValueError, OverflowError):
        return False
    if not all(isinstance(name, str) for name in (x, params or "", output)):
        return False
    ours = [n for n in graph.node if n.name == node_name or n.name.startswith(node_name + "/")]
    if not ours or ours[-1].name != node_name:
        return False
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    recorder = _Recorder({n.name for n in graph.node} | set(initializers))
    write_encoding(recorder, encoding, x, params, output, node_name)
    external = {x: "$x", output: "$output", **({params: "$params"} if params else {})}
    if _canonical(ours, initializers, external) != _canonical(recorder.nodes, recorder.initializers, external):
        return False
    position = list(graph.node).index(ours[0])
    for node in ours:
        graph.node.remove(node)
    fused = helper.make_node("Encoding", [x] + ([params] if params else []), [output], name=node_name,
                             domain=DOMAIN, config=json.dumps(encoding.to_config()),
                             n_input_dims=encoding.n_input_dims)
    graph.node.insert(position, fused)
    read = {v for n in graph.node for v in n.input}
    for initializer in [i for i in graph.initializer if i.name.startswith(node_name + "/") and i.name not in read]:
        graph.initializer.remove(initializer)
    return True


def fuse_encodings(proto: onnx.ModelProto) -> onnx.ModelProto:
    """`proto` with each encoding subgraph its metadata describes (and its nodes match) fused into one node."""
    fused = False
    for entry in list(proto.metadata_props):
        if entry.key.startswith(METADATA_PREFIX):
            try:
                record = json.loads(entry.value)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(record, dict):
                fused |= _fuse_one(proto, entry.key[len(METADATA_PREFIX):], record)
    if fused and not any(o.domain == DOMAIN for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid(DOMAIN, DOMAIN_VERSION))
    return proto
