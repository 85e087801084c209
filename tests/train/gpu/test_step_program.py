"""The training-step program and its SPIR-V without a GPU: which graphs the kernels train, what the program stores
on the tape, and spirv-val on the portable and coopvec step kernels for every loss and several activations."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError
from coopnn.graph.ir import Activation, Op
from coopnn.backends.coopvec.layouts import pack_plan, padded
from coopnn.backends import target
from coopnn.backends.coopvec.products import weight_plan
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.shaders.training.layout import DELTA_LAYOUTS, ParameterLayout, TapeLayout
from coopnn.graph.builder import GraphBuilder
from coopnn.nets.builders import mlp_graph
from coopnn.train.gpu.plan import plan_training
from coopnn.backends.portable.training import flat_manifest
from coopnn.train.gpu.step_program import step_program
from coopnn.train.losses import LOSSES
from tests.tl.functions.examples import made_loss
from tests.conftest import ROOT
from tests.backends.portable.test_target import spirv_val


def _program(graph, loss="l2", pad=False, deltas="features"):
    plan = plan_training(graph)
    size = padded if pad else (lambda n: n)
    layout = ParameterLayout.of([(p.weight, p.bias, size(p.rows), size(p.cols)) for p in plan.layers])
    return plan, layout, step_program(plan, made_loss(loss), TapeLayout(layout.layers, deltas))


def test_plan_of_an_mlp_with_encoding():
    plan = plan_training(mlp_graph(3, [16, 8], 2, encoding="frequency", octaves=2))
    assert [(p.rows, p.cols) for p in plan.layers] == [(16, 15), (8, 16), (2, 8)]
    assert [p.weight for p in plan.layers] == ["layers.0.weight", "layers.1.weight", "layers.2.weight"]
    assert plan.prefix and plan.out_features == 2


def test_zoo_mlps_are_planned():
    for name in ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16", "legacy_gemm_mlp"):
        graph = coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy").graph
        assert plan_training(graph).layers


def test_graphs_outside_the_chain_are_refused_with_the_node():
    b = GraphBuilder("skip")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "first", [x, b.constant("w0", np.ones((4, 4))), b.constant("b0", np.zeros(4))])
    y = b.node(Op.LINEAR, "second", [h, b.constant("w1", np.ones((4, 4))), b.constant("b1", np.zeros(4))])
    z = b.node(Op.ADD, "skip_add", [y, h])
    with pytest.raises(CompileError, match="node 'skip_add'.*backend='numpy'"):
        plan_training(b.graph([z]))
    b = GraphBuilder("no_bias")
    x = b.input("x", 4)
    y = b.node(Op.LINEAR, "only", [x, b.constant("w", np.ones((2, 4)))], activation=Activation(Op.RELU))
    with pytest.raises(CompileError, match="node 'only'.*no bias"):
        plan_training(b.graph([y]))


@pytest.mark.parametrize("deltas", DELTA_LAYOUTS)
def test_program_stores_every_layer_input_and_delta(deltas):
    """Inputs sample-major, deltas in the tape's layout for them."""
    _, layout, program = _program(mlp_graph(3, [16, 8], 2, activation="tanh"), deltas=deltas)
    tape = TapeLayout(layout.layers, deltas)
    stores = [(i.attrs["start"], i.attrs["layout"]) for i in program.body if i.op == "store" and "layout" in i.attrs]
    assert sorted(stores) == sorted([(tape.input_start(l), "samples") for l in range(3)]
                                    + [(tape.delta_start(l), deltas) for l in range(3)])
    assert sum(1 for i in program.body if i.op == "gemv" and i.attrs["transpose"]) == 2


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("activation", ["relu", "tanh", "gelu", "softplus"])
def test_step_kernels_are_valid_spirv(loss, activation, tmp_path):
    graph = mlp_graph(3, [16, 12], 4, activation=activation, output_activation="sigmoid", encoding="frequency",
                      octaves=2)
    _, layout, program = _program(graph, loss)
    portable = target("portable").compile(program, FP32, 64, packed=flat_manifest(program, layout))
    spirv_val(portable.spirv, tmp_path)
    for deltas in DELTA_LAYOUTS:
        _, _, padded_program = _program(graph, loss, pad=True, deltas=deltas)
        packed = pack_plan(weight_plan(padded_program, FP16), "training_optimal", lambda m: bytes(2 * m.nbytes))
        coopvec = target("coopvec").compile(padded_program, FP16, 64, packed=packed)
        spirv_val(coopvec.spirv, tmp_path)
    assert [b.role for b in coopvec.bindings] == ["weights", "input", "input", "tape", "loss", "state"]
    assert [p.name for p in coopvec.push_constants] == ["count", "batch", "capacity", "rows", "seed", "whole"]
