"""What an exported shader computes, read off an optimised graph: the input stage (the nodes before the first
Linear, lowered to a scalar program by `coopnn.export.lowerings`) and the chain of Linear layers after it, each with
its fused activation. Anything else is refused with a CompileError naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coopnn.errors import CompileError
from coopnn.export import activations
from coopnn.export.lowerings import lowerings
from coopnn.export.scalar import ScalarProgram
from coopnn.graph.ir import Activation, Graph, Node, Op


@dataclass(frozen=True)
class Layer:
    """One Linear: y = activation(weight @ x + bias), weight [outputs, inputs] as float32."""

    name: str
    weight: np.ndarray
    bias: np.ndarray
    activation: Activation | None

    @property
    def inputs(self) -> int:
        return self.weight.shape[1]

    @property
    def outputs(self) -> int:
        return self.weight.shape[0]


@dataclass(frozen=True)
class ExportPlan:
    """The network of an export: `inputs` features through the stage's `statements` into `encoded` (one expression
    per input of the first layer), then `layers`."""

    name: str
    inputs: int
    statements: tuple[tuple[str, str, str], ...]  # (type, name, expression)
    encoded: tuple[str, ...]
    stage_nodes: tuple[Node, ...]
    layers: tuple[Layer, ...]
    tables: tuple[tuple[str, np.ndarray], ...] = ()  # (the node reading it, float32 values)

    @property
    def outputs(self) -> int:
        return self.layers[-1].outputs


INPUT = "inputs"


def plan_export(graph: Graph) -> ExportPlan:
    """The plan of `graph` (optimised, so that activations are fused into their Linear)."""
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise CompileError(f"the shader export takes a model of one input and one output; {graph.name!r} has "
                           f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs")
    source = graph.inputs[0]
    if len(source.shape) != 2:
        raise CompileError(f"input {source.name!r} has shape {source.shape}; the shader export takes [batch, features]")
    first = next((i for i, n in enumerate(graph.nodes) if n.op == Op.LINEAR), None)
    if first is None:
        raise CompileError(f"{graph.name!r} has no Linear layer: the shader export writes a network of Linear layers")
    stage, chain = graph.nodes[:first], graph.nodes[first:]
    program, encoded = _lower_stage(graph, stage, chain[0])
    layers = _layers(graph, chain, encoded_width=len(encoded))
    return ExportPlan(graph.name, source.shape[1], tuple(program.statements), tuple(encoded), tuple(stage),
                      tuple(layers), tuple(program.tables))


def _lower_stage(graph: Graph, stage, first_linear: Node) -> tuple[ScalarProgram, list[str]]:
    program = ScalarProgram()
    source = graph.inputs[0]
    values = {source.name: np.array([[f"{INPUT}[{i}]" for i in range(source.shape[1])]], dtype=object)}
    table = lowerings()
    for node in stage:
        lower = table.get(node.op)
        if lower is None:
            raise CompileError(f"node {node.name!r} ({node.op.value}) has no lowering in the shader export; the input "
                               f"stage may hold {', '.join(sorted(o.value for o in table))}")
        operands = []
        for name in node.inputs:
            if graph.is_constant(name):
                operands.append(np.asarray(graph.constants[name]))
            elif name in values:
                operands.append(values[name])
            else:
                raise CompileError(f"node {node.name!r} reads {name!r}, which the shader export's input stage does "
                                   f"not compute")
        values.update(zip(node.outputs, lower(node, operands, program)))
    x = first_linear.inputs[0]
    if x not in values or values[x].ndim != 2:
        raise CompileError(f"Linear {first_linear.name!r} reads {x!r}, which is not a [batch, features] value of the "
                           f"input stage")
    return program, list(values[x][0])


def _layers(graph: Graph, chain, encoded_width: int) -> list[Layer]:
    layers: list[Layer] = []
    previous = chain[0].inputs[0]
    for node in chain:
        if node.op != Op.LINEAR:
            raise CompileError(f"node {node.name!r} ({node.op.value}) follows the first Linear; the shader export "
                               f"writes an input stage and then a chain of Linear layers with fused activations")
        if node.inputs[0] != previous or not all(graph.is_constant(n) for n in node.inputs[1:]):
            raise CompileError(f"Linear {node.name!r} does not read the previous layer with constant weights; the "
                               f"shader export writes a chain of Linear layers")
        weight = np.asarray(graph.constants[node.inputs[1]], np.float32)
        bias = (np.asarray(graph.constants[node.inputs[2]], np.float32) if len(node.inputs) > 2
                else np.zeros(weight.shape[0], np.float32))
        if node.activation is not None:
            activations.body(node.activation.op, node.activation.attrs, f"Linear {node.name!r}'s activation")
        layers.append(Layer(node.name, weight, bias.reshape(-1), node.activation))
        previous = node.outputs[0]
    if previous != graph.outputs[0].name:
        raise CompileError(f"the last Linear does not give the model's output {graph.outputs[0].name!r}")
    if layers[0].inputs != encoded_width:
        raise CompileError(f"Linear {layers[0].name!r} takes {layers[0].inputs} features, the input stage gives "
                           f"{encoded_width}")
    return layers
