"""Every elementwise operator the export writes computes what numpy computes: one export whose input stage applies
each of them (and the shape operators that feed them) runs through the compute harness, in both languages, and its
outputs match the numpy backend at the float32 tolerance. The registry finds every lowering module."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.export import export_shader
from coopnn.export import activations
from coopnn.export.lowerings import lowerings
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from tests.export.harness import (FP32_TOLERANCE, LANGUAGES, compute_shader, require_compilers, run_compute,
                                  without_debug)

POSITIVE_ONLY = {Op.LOG, Op.SQRT, Op.RECIPROCAL}
# Attribute values besides the defaults, so that the literals they become are exercised too.
WITH_ATTRIBUTES = [(Op.LEAKY_RELU, {"alpha": 0.2}), (Op.ELU, {"alpha": 0.5}), (Op.CLIP, {"min": -1.0, "max": 2.5}),
                   (Op.SOFTPLUS, {"beta": 2.0, "threshold": 5.0}), (Op.GELU, {"approximate": "tanh"}),
                   (Op.HARD_SIGMOID, {"alpha": 0.3, "beta": 0.4})]
BINARY = [Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MAX, Op.MIN, Op.POW]


def every_operator_graph():
    """x [batch, 2] -> each unary operator of one column (the second, positive, for log, sqrt and reciprocal),
    each binary one of both, concatenated, then an identity Linear."""
    b = GraphBuilder("operators")
    x = b.input("x", 2)
    columns = [b.node(Op.SLICE, f"column{i}", [x], axis=1, start=i, stop=i + 1, step=1) for i in range(2)]
    unary = [(op, {}) for op in activations.BODIES if op not in (Op.GELU, Op.IDENTITY)] + WITH_ATTRIBUTES
    outputs = [b.node(op, f"{op.value}{i}", [columns[op in POSITIVE_ONLY]], **attrs)
               for i, (op, attrs) in enumerate(unary)]
    outputs += [b.node(op, f"{op.value}_both", [columns[1], columns[0]] if op is Op.POW else columns)
                for op in BINARY]
    joined = b.node(Op.CONCAT, "joined", outputs, axis=1)
    width = len(outputs)
    b.node(Op.LINEAR, "identity", [joined, b.constant("eye", np.eye(width)), b.constant("zero", np.zeros(width))],
           output="y")
    return b.graph(["y"])


def test_the_registry_holds_every_module():
    table = lowerings()
    assert {Op.RESHAPE, Op.CONCAT, Op.SLICE, Op.TRANSPOSE, Op.SIN, Op.COS, Op.MUL, Op.ADD} <= set(table)
    assert set(activations.BODIES) <= set(table)


@pytest.mark.vulkan
@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_operator_matches_numpy(vk_context, tmp_path, lang):
    require_compilers()
    graph = every_operator_graph()
    exported = export_shader(graph, tmp_path / "export", lang=lang, name="ops", weights="fp32")
    rng = np.random.default_rng(3)
    inputs = np.stack([rng.uniform(-4, 4, 256), rng.uniform(0.1, 4, 256)], axis=1).astype(np.float32)
    words = compute_shader(exported, "portable")
    if lang == "slang":
        words = without_debug(words, tmp_path)
    outputs = run_compute(vk_context, exported, words, inputs, "portable")
    expected = coopnn.model.prepare(graph, backend="numpy", weights="fp32").run(inputs)
    np.testing.assert_allclose(outputs, expected, **FP32_TOLERANCE)
