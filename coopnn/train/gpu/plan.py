"""Which graphs the GPU training kernels train, and their shape: a fixed prefix, then a chain of Linear layers.

The kernels train multilayer perceptrons: whatever the graph computes from its inputs without parameters (an input
encoding, for instance) runs first as it does in inference, and then a chain of LINEAR nodes, each with a weight, a
bias and an optional fused activation, each feeding only the next, the last one being the graph's single output. A
grid encoding feeding the first layer is trained with it (`PlannedTable`: its tables are parameters like the
layers'). That is every network `coopnn.mlp` builds and every exported MLP (activations the exporter wrote out in
arithmetic are fused by then: `coopnn.graph.passes.recognize_activations`); anything else, a node of the input stage
holding parameters included (they would not train), gets a CompileError naming the node, and the numpy training
backend (which trains any differentiable graph) is the way to train it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coopnn.errors import CompileError
from coopnn.graph.ir import Activation, Graph, Node, Op
from coopnn.shaders.kernel.derivatives import DERIVATIVES
from coopnn.graph.parameters import parameter_constants


@dataclass(frozen=True)
class PlannedLayer:
    node: str
    weight: str  # stable parameter names
    bias: str
    weight_constant: str  # the graph constants holding them
    bias_constant: str
    rows: int
    cols: int
    activation: Activation | None


@dataclass(frozen=True)
class PlannedTable:
    node: Node  # the ENCODING node reading the table, whose output the first layer reads
    name: str  # the stable parameter name
    constant: str  # the graph constant holding it
    size: int


@dataclass(frozen=True)
class TrainingPlan:
    graph: Graph
    prefix: tuple[Node, ...]  # nodes computing the first layer's input from the graph inputs
    layers: tuple[PlannedLayer, ...]
    input: str  # the value the first layer reads
    tables: tuple[PlannedTable, ...] = ()  # trained encoding parameters among the prefix's nodes

    @property
    def output(self) -> str:
        return self.graph.outputs[0].name

    @property
    def out_features(self) -> int:
        return self.layers[-1].rows


def _refuse(node: Node | None, why: str) -> CompileError:
    where = f"node {node.name!r} ({node.op.value}): " if node is not None else ""
    return CompileError(f"{where}{why}; the GPU training kernels train a chain of Linear layers with biases and "
                        f"fused activations after a parameter-free input stage (train other graphs with "
                        f"backend='numpy')")


def plan_training(graph: Graph) -> TrainingPlan:
    """The training plan of `graph`, or CompileError saying what the kernels cannot train."""
    if len(graph.outputs) != 1:
        raise _refuse(None, f"the model has {len(graph.outputs)} outputs, the kernels train one")
    producers = {out: node for node in graph.nodes for out in node.outputs}
    readers: dict[str, list[Node]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)
    names = {constant: stable for stable, constant in parameter_constants(graph).items()}
    chain: list[Node] = []
    value = graph.outputs[0].name
    while value in producers and producers[value].op is Op.LINEAR:
        node = producers[value]
        if chain and readers.get(value, []) != [chain[-1]]:
            raise _refuse(node, "its output is read by more than the next layer")
        chain.append(node)
        value = node.inputs[0]
    if not chain:
        raise _refuse(producers.get(value), "the output is not computed by a Linear layer")
    chain.reverse()
    layers = tuple(_layer(graph, node, names) for node in chain)
    for before, after in zip(layers, layers[1:]):
        if before.rows != after.cols:
            raise _refuse(chain[layers.index(after)], f"takes {after.cols} features from a layer giving {before.rows}")
    prefix = tuple(n for n in graph.nodes if n not in chain)
    trainable = {l.weight_constant for l in layers} | {l.bias_constant for l in layers}
    if len(trainable) != 2 * len(layers):
        raise _refuse(chain[0], "layers share weight or bias constants")
    for node in prefix:
        used = trainable.intersection(node.inputs)
        if used:
            raise _refuse(node, f"it reads the trainable constant {sorted(used)[0]!r} outside the layer chain")
        _check_fixed(node, names, producers.get(value))
    first_input = graph.values[chain[0].inputs[0]]
    if first_input.shape[1:] != (layers[0].cols,):
        raise _refuse(chain[0], f"its input has per-sample shape {list(first_input.shape[1:])}, not one row")
    tables = tuple(_table(graph, node, names, chain[0]) for node in prefix
                   if node.op is Op.ENCODING and len(node.inputs) > 1)
    return TrainingPlan(graph, prefix, layers, chain[0].inputs[0], tables)


def _check_fixed(node: Node, names: dict[str, str], stop: Node | None) -> None:
    """Refuses a node of the input stage that holds parameters other than a grid's tables (`_table` takes those): the
    kernels would run it with its parameters fixed, silently leaving them untrained."""
    held = [names[c] for c in node.inputs if c in names]
    if not held or node.op is Op.ENCODING:
        return
    after = f"the Linear layers after node {stop.name!r} ({stop.op.value})" if stop is not None else "the layer chain"
    raise _refuse(node, f"its parameters ({', '.join(held)}) would not train: the kernels train {after} and run "
                        f"what comes before as a fixed input stage")


def _table(graph: Graph, node: Node, names: dict[str, str], first: Node) -> PlannedTable:
    """The trained table of the encoding `node`, which must be a grid feeding the first layer."""
    encoding = node.attrs["encoding"]
    if encoding.otype != "Grid":
        raise _refuse(node, f"the kernels train the tables of a grid encoding, not the parameters of "
                            f"{encoding.describe()}")
    if node.outputs[0] != first.inputs[0]:
        raise _refuse(node, "a trained grid's output must be the first layer's input")
    constant = node.inputs[1]
    if constant not in graph.constants or constant not in names:
        raise _refuse(node, f"its table {constant!r} is not a trainable constant")
    return PlannedTable(node, names[constant], constant, int(encoding.n_parameters))


def _layer(graph: Graph, node: Node, names: dict[str, str]) -> PlannedLayer:
    if len(node.inputs) < 3:
        raise _refuse(node, "the layer has no bias")
    weight, bias = node.inputs[1], node.inputs[2]
    for constant in (weight, bias):
        if constant not in graph.constants or constant not in names:
            raise _refuse(node, f"{constant!r} is not a trainable constant")
    matrix = np.asarray(graph.constants[weight])
    if matrix.ndim != 2 or np.asarray(graph.constants[bias]).size != matrix.shape[0]:
        raise _refuse(node, f"weight of shape {list(matrix.shape)} and bias of {np.asarray(graph.constants[bias]).size}")
    if node.activation is not None and node.activation.op not in DERIVATIVES:
        raise _refuse(node, f"its activation {node.activation.op.value} has no derivative")
    return PlannedLayer(node.name, names[weight], names[bias], weight, bias, matrix.shape[0], matrix.shape[1],
                        node.activation)
