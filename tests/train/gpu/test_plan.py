"""The training plan: which layers the GPU training kernels train, and the graphs they refuse, named with why."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.errors import CompileError
from coopnn.graph.ir import Op
from coopnn.train.gpu.plan import plan_training
from tests.conftest import ROOT


def _graph(name: str):
    with coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy") as model:
        return model.graph


@pytest.mark.parametrize("name", ["gelu_silu_mlp", "gelu_silu_opset20"])
def test_every_layer_of_the_gelu_silu_network_is_planned_with_its_activation(name):
    plan = plan_training(_graph(name))

    assert plan.prefix == ()
    assert [layer.node for layer in plan.layers] == ["node_linear", "node_linear_1", "node_linear_2", "node_linear_3"]
    assert [(layer.activation.op, dict(layer.activation.attrs)) if layer.activation else None
            for layer in plan.layers] == [(Op.GELU, {"approximate": "none"}), (Op.GELU, {"approximate": "tanh"}),
                                          (Op.SILU, {}), None]


def test_a_layer_before_an_elementwise_stage_is_refused_naming_it_and_the_stage():
    # the legacy exporter's Softplus(beta=2) divides the layer's output by 2 before the next layer reads it
    with pytest.raises(CompileError, match=r"node '/l1/Gemm' \(linear\): its parameters \(/l1/Gemm.weight, "
                                           r"/l1/Gemm.bias\) would not train: .* after node '/softplus/Div' \(div\)"):
        plan_training(_graph("legacy_encoding_activations"))


def test_a_session_refuses_before_it_opens_a_device():
    from coopnn.backends.portable.training import PortableTrainingSession
    from coopnn.train.losses import get_loss
    from coopnn.train.optim import Adam

    with pytest.raises(CompileError, match=r"node 'node_linear' \(linear\): its parameters \(node_linear.weight\) "
                                           r"would not train"):
        PortableTrainingSession(_graph("residual_matmul_mlp"), get_loss("l2"), Adam(), None)
