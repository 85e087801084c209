"""The default pipeline over every zoo model: each pass verifies, outputs are unchanged, the MLPs become LINEARs."""

from __future__ import annotations

import pytest

from coopnn.graph.ir import Op
from coopnn.graph.onnx.importer import import_model
from tests.conftest import BENCHMARK_MLPS, ROOT, ZOO
from tests.graph.passes.conftest import checked_pipeline, op_list


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_verifies_after_every_pass_and_keeps_its_outputs(path):
    graph = import_model(path)

    optimized = checked_pipeline(graph)

    assert len(optimized.nodes) <= len(graph.nodes)
    assert Op.MATMUL not in op_list(optimized) and Op.GEMM not in op_list(optimized)
    assert Op.IDENTITY not in op_list(optimized)


@pytest.mark.parametrize("name", BENCHMARK_MLPS + ("legacy_gemm_mlp", "siren_sdf"))
def test_plain_mlps_become_one_linear_per_layer_with_fused_activations(name):
    graph = import_model(ROOT / "models" / f"{name}.onnx")

    optimized = checked_pipeline(graph)

    assert set(op_list(optimized)) == {Op.LINEAR}
    assert all(node.activation is not None for node in optimized.nodes[:-1])
