"""The graph verifier: checks the IR invariants that every pass must keep (run after each pass in tests)."""

from __future__ import annotations

import numpy as np

from coopnn.graph import ops
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.ir import Graph, Node, Op


class VerificationError(AssertionError):
    """The graph breaks an IR invariant: a bug in the importer or in a pass, never a user error."""


def verify(graph: Graph) -> Graph:
    """Raise VerificationError when `graph` breaks an invariant of `coopnn.graph.ir`; return it unchanged otherwise."""

    def fail(msg: str) -> None:
        raise VerificationError(f"graph {graph.name!r}: {msg}")

    defined: set[str] = set()
    for v in graph.inputs:
        if not v.batched:
            fail(f"input {v.name!r} has no batch axis: {v.shape}")
        defined.add(v.name)
    for name, array in graph.constants.items():
        value = graph.values.get(name)
        if value is None or value.batched or tuple(value.shape) != tuple(array.shape):
            fail(f"constant {name!r} does not match its value {value}")
        defined.add(name)
    for name, value in graph.values.items():
        if value.name != name:
            fail(f"value recorded under {name!r} is named {value.name!r}")
        if any(d is None for d in value.shape[1:]) or any(d is not None and d < 0 for d in value.shape):
            fail(f"value {name!r} has an invalid shape {value.shape}")
        if value.dtype not in ("f32", "bool"):
            fail(f"value {name!r} has dtype {value.dtype}")
    names = set()
    for node in graph.nodes:
        if node.name in names:
            fail(f"two nodes are named {node.name!r}")
        names.add(node.name)
        for name in node.inputs:
            if name not in defined:
                fail(f"node {node.name!r} reads {name!r} before it is defined")
        shapes = [graph.values[n].shape for n in node.inputs]
        try:
            expected = ops.output_shape(node.op, shapes, node.attrs)
        except ops.ShapeError as e:
            fail(f"node {node.name!r} ({node.op.value}): {e}")
        if len(node.outputs) != 1:
            fail(f"node {node.name!r} has {len(node.outputs)} outputs; IR nodes have one")
        out = node.outputs[0]
        if out in defined:
            fail(f"value {out!r} is produced twice")
        value = graph.values.get(out)
        if value is None:
            fail(f"node {node.name!r} output {out!r} has no value record")
        if tuple(value.shape) != tuple(expected) or value.dtype != ops.output_dtype(node.op, node.attrs):
            fail(f"node {node.name!r} output {out!r} is recorded as {value}, expected {expected}")
        if node.op is Op.LINEAR:
            act = node.activation
            if act is not None and not ops.opdef(act.op).fusable_activation:
                fail(f"node {node.name!r} fuses {act.op.value}, which is not an activation")
            missing = [] if act is None else [a for a in ACTIVATIONS[act.op].required if act.attrs.get(a) is None]
            if missing:
                fail(f"node {node.name!r} fuses {act.op.value} without its {', '.join(missing)}")
        if node.op is Op.ENCODING:
            _check_encoding(graph, node, fail)
        defined.add(out)
    for v in graph.outputs:
        if v.name not in defined:
            fail(f"output {v.name!r} is never produced")
    return graph


def _check_encoding(graph: Graph, node: Node, fail) -> None:
    """An ENCODING node holds an Encoding, and its parameters (when it has any) are a float32 constant."""
    encoding = node.attrs.get("encoding")
    if not isinstance(encoding, Encoding) or set(node.attrs) != {"encoding"}:
        fail(f"node {node.name!r} (encoding) must hold exactly one attribute 'encoding', an Encoding")
    if len(node.inputs) > 1:
        params = graph.constants.get(node.inputs[1])
        if params is None or params.dtype != np.float32:
            fail(f"node {node.name!r} (encoding) reads its parameters from {node.inputs[1]!r}, not a float32 constant")
