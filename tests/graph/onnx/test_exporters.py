"""What torch.onnx.export writes for small MLPs imports and matches onnxruntime, with both exporters and a dynamic
batch: the dynamo exporter at opsets 18 and 20 (Gelu as one operator) and the legacy one at opsets 13 to 17."""

from __future__ import annotations

import io
import logging
import math
import warnings

import numpy as np
import onnx
import pytest

from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model
from coopnn.backends.numpy.inference import run_graph
from tests.conftest import import_torch

torch = import_torch()
nn = torch.nn
F = nn.functional

LEGACY_OPSETS = (13, 14, 15, 16, 17)
DYNAMO_OPSETS = (18, 20)


class FrequencyEncoding(nn.Module):
    """NeRF-style encoding: x, sin(2^k π x), cos(2^k π x), flattened by reshape or by flatten."""

    def __init__(self, bands: int, flatten: bool):
        super().__init__()
        self.register_buffer("freqs", 2.0 ** torch.arange(bands, dtype=torch.float32) * math.pi)
        self.flatten = flatten

    def forward(self, x):
        scaled = x.unsqueeze(-1) * self.freqs
        flat = scaled.flatten(1) if self.flatten else scaled.reshape(x.shape[0], -1)
        return torch.cat([x, torch.sin(flat), torch.cos(flat)], dim=-1)


class Sine(nn.Module):
    def __init__(self, w0: float):
        super().__init__()
        self.w0 = w0

    def forward(self, x):
        return torch.sin(self.w0 * x)


class Exp(nn.Module):
    def forward(self, x):
        return torch.exp(x)


class SkipMLP(nn.Module):
    """A skip connection (concat with the input) and two heads read by slicing and indexing."""

    def __init__(self):
        super().__init__()
        self.encode = FrequencyEncoding(4, flatten=False)
        self.fc1 = nn.Linear(27, 32)
        self.fc2 = nn.Linear(32 + 27, 16)
        self.norm = nn.LayerNorm(12)

    def forward(self, x):
        e = self.encode(x)
        h = F.relu(self.fc1(e))
        h = F.softplus(self.fc2(torch.cat([h, e], dim=-1)), beta=2.0, threshold=5.0)
        density, rest = h[:, 0], h[:, 1:]
        rgb, feature = rest.split([3, 12], dim=-1)
        return F.relu(density).unsqueeze(-1), torch.sigmoid(rgb), torch.softmax(self.norm(feature), dim=-1)


class Masked(nn.Module):
    """Comparisons and Where, arithmetic with constants and between tensors, and a normalised direction."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        gated = torch.where(h > 0.1, h, 0.5 * h - 1.0)
        direction = F.normalize(x, dim=-1)
        mixed = (gated * direction - h / (h.abs() + 2.0)) ** 2
        return torch.sqrt(mixed + 1e-3).neg(), torch.exp(-h.abs())


def _activation_stack():
    return nn.Sequential(
        nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 16), nn.LeakyReLU(0.1), nn.Linear(16, 16), nn.PReLU(16),
        nn.Linear(16, 16), nn.ELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Softplus(),
        nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 16), nn.SiLU(),
        nn.Linear(16, 16), nn.Hardsigmoid(), nn.Linear(16, 16), nn.Hardswish(), nn.Linear(16, 16), nn.ReLU6(),
        nn.Linear(16, 16), nn.Hardtanh(-0.5, 0.5), nn.Linear(16, 4), nn.Sigmoid(),
    )


MODULES = {
    "activations": _activation_stack,
    "siren": lambda: nn.Sequential(nn.Linear(3, 16), Sine(30.0), nn.Linear(16, 16), Sine(1.0), nn.Linear(16, 1)),
    "frequency_reshape": lambda: nn.Sequential(FrequencyEncoding(6, flatten=False), nn.Linear(39, 8), Exp()),
    "frequency_flatten": lambda: nn.Sequential(FrequencyEncoding(6, flatten=True), nn.Linear(39, 8)),
    "skip_and_heads": SkipMLP,
    "masked": Masked,
}
INPUT_FEATURES = {"masked": 6}


def _export(module: nn.Module, example, exporter: str, opset: int) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        if exporter == "dynamo":
            pytest.importorskip("onnxscript", reason="the dynamo exporter writes ONNX through onnxscript")
            batch = torch.export.Dim("batch", min=1)
            program = torch.onnx.export(module, (example,), dynamo=True, opset_version=opset,
                                        dynamic_shapes=({0: batch},), verbose=False)
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(module, (example,), buffer, dynamo=False, opset_version=opset, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
        return onnx.load_from_string(buffer.getvalue())


CASES = [(name, "legacy", opset) for name in MODULES for opset in LEGACY_OPSETS]
CASES += [(name, "dynamo", opset) for name in MODULES for opset in DYNAMO_OPSETS]


@pytest.mark.parametrize("name, exporter, opset", CASES, ids=[f"{n}-{e}{o}" for n, e, o in CASES])
def test_exported_module_matches_onnxruntime(check_import, name, exporter, opset):
    torch.manual_seed(0)
    module = MODULES[name]().eval()
    features = INPUT_FEATURES.get(name, 3)
    model = _export(module, torch.rand(4, features) * 2 - 1, exporter, opset)
    x = np.random.default_rng(5).uniform(-1, 1, (37, features)).astype(np.float32)  # not the export's batch size
    input_name = model.graph.input[0].name
    graph = check_import(model, feeds={input_name: x})
    assert graph.inputs[0].shape == (None, features)
    with torch.no_grad():
        expected = module(torch.from_numpy(x))
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = run_graph(graph, {input_name: x})
    for value, want in zip(graph.outputs, expected):
        np.testing.assert_allclose(got[value.name], want.numpy(), rtol=1e-4, atol=1e-5)


def test_gelu_is_one_operator_from_opset_20(check_import):
    model = _export(nn.Sequential(nn.Linear(3, 4), nn.GELU()).eval(), torch.rand(2, 3), "dynamo", 20)
    assert [n.op for n in import_model(model).nodes] == [Op.GEMM, Op.GELU]


def test_linear_layers_stay_gemm_for_the_fusion_pass():
    model = _export(nn.Sequential(nn.Linear(3, 4), nn.ReLU()).eval(), torch.rand(2, 3), "legacy", 13)
    assert [n.op for n in import_model(model).nodes] == [Op.GEMM, Op.RELU]
