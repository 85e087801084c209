"""Helpers for the pass tests: a small graph builder, random feeds, and a checked way to apply one pass."""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.graph.passes import DEFAULT_PIPELINE, run_pass
from coopnn.graph.verify import verify
from coopnn.backends.numpy.inference import run_graph

RTOL = 1e-5
ATOL = 1e-5  # values are of order one; reassociated sums differ by a few ulp of their terms


class GraphBuilder:
    """Builds an IR graph node by node; every output value gets its shape and dtype from the operator table."""

    def __init__(self, name: str = "g", seed: int = 0):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.values: dict[str, Value] = {}
        self.constants: dict[str, np.ndarray] = {}

    def input(self, name: str, *features: int) -> str:
        value = Value(name, "f32", (None, *features))
        self.inputs.append(value)
        self.values[name] = value
        return name

    def constant(self, name: str, array) -> str:
        array = np.asarray(array)
        array = array if array.dtype == np.bool_ else array.astype(np.float32)
        self.constants[name] = array
        self.values[name] = Value(name, "bool" if array.dtype == np.bool_ else "f32", tuple(array.shape))
        return name

    def weight(self, name: str, *shape: int) -> str:
        """A random constant scaled like a layer weight, so activations stay of order one."""
        fan_in = shape[0] if shape else 1
        return self.constant(name, self.rng.standard_normal(shape) / np.sqrt(fan_in))

    def node(self, op: Op, *inputs: str, out: str | None = None, **attrs) -> str:
        """Appends `op` reading `inputs`; returns its output name (node `n_<output>`, output `out` or `<op><i>`)."""
        out = out or f"{op.value}{len(self.nodes)}"
        node = Node(op, f"n_{out}", inputs, (out,), attrs)
        shape = ops.output_shape(op, [self.values[name].shape for name in inputs], node.attrs)
        self.values[out] = Value(out, ops.output_dtype(op, node.attrs), shape)
        self.nodes.append(node)
        return out

    def build(self, *outputs: str) -> Graph:
        return Graph(
            self.name,
            tuple(self.inputs),
            tuple(self.values[name] for name in outputs),
            tuple(self.nodes),
            self.values,
            self.constants,
            opset=18,
        )


def random_feeds(graph: Graph, batch: int = 13, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal((batch, *v.features)).astype(np.float32) for v in graph.inputs}


def assert_same_outputs(before: Graph, after: Graph, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Both graphs have the same output names and, on the same random inputs, the same output values."""
    assert [v.name for v in after.outputs] == [v.name for v in before.outputs]
    feeds = random_feeds(before)
    want, got = run_graph(before, feeds), run_graph(after, feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name, equal_nan=True)


def apply_checked(graph_pass: Callable[[Graph], Graph], graph: Graph) -> Graph:
    """`graph_pass(graph)`, after checking that both graphs verify and compute the same outputs."""
    verify(graph)
    result = verify(graph_pass(graph))
    assert_same_outputs(graph, result)
    return result


def checked_pipeline(graph: Graph, rtol: float = RTOL, atol: float = ATOL) -> Graph:
    """The default pipeline, verifying after every pass and comparing outputs with the input graph at the end."""
    result = verify(graph)
    for name in DEFAULT_PIPELINE:
        try:
            result = verify(run_pass(name, result))
        except AssertionError as e:
            raise AssertionError(f"after pass {name!r}: {e}") from e
    assert_same_outputs(graph, result, rtol, atol)
    return result


def op_list(graph: Graph) -> list[Op]:
    return [node.op for node in graph.nodes]


def producer(graph: Graph, value: str) -> Node:
    return graph.producers()[value]
