"""The pass registry and the default pipeline: every graph pass by name, and the order `optimize` runs them in."""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Iterable, Mapping

from coopnn.errors import CompileError
from coopnn.graph.ir import Graph
from coopnn.graph.passes.dead_code import remove_dead_code
from coopnn.graph.passes.fold_constants import fold_constants
from coopnn.graph.passes.fuse_activation import fuse_activation
from coopnn.graph.passes.fuse_linear import fuse_linear
from coopnn.graph.passes.infer_shapes import infer_shapes
from coopnn.graph.passes.recognize_activations import recognize_activations

Pass = Callable[[Graph], Graph]

PASSES: Mapping[str, Pass] = MappingProxyType(
    {
        "dead_code": remove_dead_code,
        "fold_constants": fold_constants,
        "fuse_linear": fuse_linear,
        "recognize_activations": recognize_activations,
        "fuse_activation": fuse_activation,
        "infer_shapes": infer_shapes,
    }
)

# Pass-throughs go first so Identities between a MatMul, its Add and its activation do not block fusion; constants
# are folded before fuse_linear so transposed or reshaped weights count as constant weights; the LINEAR bias Add is
# folded before the activation is fused, since a LINEAR carrying an activation takes no more bias; activations written
# out in arithmetic are recognized before it, so they fuse like the others.
DEFAULT_PIPELINE: tuple[str, ...] = (
    "dead_code",
    "fold_constants",
    "fuse_linear",
    "recognize_activations",
    "fuse_activation",
    "dead_code",
    "infer_shapes",
)


def get_pass(name: str) -> Pass:
    """The pass registered under `name`; CompileError listing the registered passes otherwise."""
    try:
        return PASSES[name]
    except KeyError:
        raise CompileError(f"unknown graph pass {name!r}; registered passes: {', '.join(PASSES)}") from None


def run_pass(name: str, graph: Graph) -> Graph:
    return get_pass(name)(graph)


def optimize(graph: Graph, pipeline: Iterable[str] = DEFAULT_PIPELINE) -> Graph:
    """`graph` run through the named passes in order (every name is checked before any pass runs)."""
    passes = [get_pass(name) for name in pipeline]
    for graph_pass in passes:
        graph = graph_pass(graph)
    return graph
