"""The ENCODING graph node: its shape rule and the verifier's checks, and its parameters as a named constant."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.builder import GraphBuilder
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Node, Op
from coopnn.graph.ops import ShapeError, output_shape
from coopnn.graph.parameters import parameters
from coopnn.graph.verify import VerificationError, verify
from coopnn.nets.builders import mlp_graph

GRID = from_config({"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 4}, 2)


def test_the_shape_rule():
    assert output_shape(Op.ENCODING, [(None, 2), (GRID.n_parameters,)], {"encoding": GRID}) == (None, 4)
    with pytest.raises(ShapeError, match=r"encodes \[batch, 2\] inputs"):
        output_shape(Op.ENCODING, [(None, 3), (GRID.n_parameters,)], {"encoding": GRID})
    with pytest.raises(ShapeError, match="takes 64 parameters"):
        output_shape(Op.ENCODING, [(None, 2), (7,)], {"encoding": GRID})


def test_the_node_in_a_built_graph_and_its_parameter_name():
    graph = verify(mlp_graph(2, [4], 1, encoding=GRID.to_config()))
    node = graph.nodes[0]
    assert node.op is Op.ENCODING and node.attrs["encoding"] == GRID
    assert parameters(graph)["encoding.params"].shape == (GRID.n_parameters,)


def test_the_verifier_wants_an_encoding_and_float32_constant_parameters():
    graph = mlp_graph(2, [4], 1, encoding=GRID.to_config())
    bad = graph.nodes[0].with_attrs(encoding="HashGrid")
    with pytest.raises(VerificationError, match="holds a coopnn.graph.encodings Encoding, not 'HashGrid'"):
        verify(graph.with_nodes([bad, *graph.nodes[1:]]))
    builder = GraphBuilder("g")
    x = builder.input("x", 2)
    params = builder.input("p", GRID.n_parameters)
    node = Node(Op.ENCODING, "encoding", (x, params), ("y",), {"encoding": GRID})
    with pytest.raises(VerificationError):
        verify(graph.replace(nodes=(node,)))


def test_an_encoding_without_parameters_takes_no_parameter_input():
    graph = verify(mlp_graph(3, [4], 1, encoding={"otype": "SphericalHarmonics", "degree": 2}))
    assert graph.nodes[0].inputs == ("x",)
    assert "encoding.params" not in parameters(graph)
    assert np.isfinite(graph.nodes[0].attrs["encoding"].forward(np.zeros((1, 3)), np.zeros(0))).all()
