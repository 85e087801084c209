"""The trainable parameters of a graph: which constants train, their stable names, and swapping in new values.

A parameter is a float constant read in a parameter slot: a LINEAR's weight and bias, a PRELU's slope, a
LAYER_NORM's scale and bias, an ENCODING's parameter vector (a grid's tables). Every other constant (encoding
frequencies, thresholds, operands of elementwise arithmetic) stays fixed. A parameter is named `{node}.{role}`
after the first node that reads it in such a slot, so the names do not depend on how constants happen to be named: a graph built by `coopnn.mlp`, exported to ONNX and
imported again names its parameters alike, and weight files and checkpoints are keyed by these names.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.ir import Graph, Op

# the role of each input slot of the operators that hold parameters (None: not a parameter slot)
PARAMETER_SLOTS: Mapping[Op, tuple[str | None, ...]] = {
    Op.LINEAR: (None, "weight", "bias"),
    Op.PRELU: (None, "slope"),
    Op.LAYER_NORM: (None, "scale", "bias"),
    Op.ENCODING: (None, "params"),  # a trainable encoding's flat parameter vector (a grid's tables)
}


def parameter_constants(graph: Graph) -> dict[str, str]:
    """Stable parameter name -> the name of the graph constant holding it, in node order."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for node in graph.nodes:
        for role, constant in zip(PARAMETER_SLOTS.get(node.op, ()), node.inputs):
            array = graph.constants.get(constant)
            if role is None or array is None or array.dtype == np.bool_ or constant in taken:
                continue
            taken.add(constant)
            names[f"{node.name}.{role}"] = constant
    return names


def parameters(graph: Graph) -> dict[str, np.ndarray]:
    """The parameter values (read-only float32 arrays) by stable name."""
    return {name: graph.constants[constant] for name, constant in parameter_constants(graph).items()}


def mismatches(graph: Graph, values: Mapping[str, np.ndarray]) -> list[str]:
    """What is wrong with `values` as parameters of `graph`: unknown names and wrong shapes (empty when they fit)."""
    constants = parameter_constants(graph)
    problems = []
    for name, array in values.items():
        if name not in constants:
            problems.append(f"{name!r} is not a parameter")
        elif tuple(np.shape(array)) != graph.constants[constants[name]].shape:
            want = list(graph.constants[constants[name]].shape)
            problems.append(f"{name!r} has shape {list(np.shape(array))}, the model's has {want}")
    return problems


def with_parameters(graph: Graph, values: Mapping[str, np.ndarray]) -> Graph:
    """`graph` with the parameters named in `values` replaced (float32 copies); the others keep their values."""
    problems = mismatches(graph, values)
    if problems:
        known = ", ".join(parameter_constants(graph)) or "none"
        raise InputError(f"parameters of model {graph.name!r}: {'; '.join(problems)}; its parameters: {known}")
    constants = dict(graph.constants)
    by_name = parameter_constants(graph)
    for name, array in values.items():
        constant = np.array(array, dtype=np.float32)
        constant.setflags(write=False)
        constants[by_name[name]] = constant
    return graph.replace(constants=constants)
