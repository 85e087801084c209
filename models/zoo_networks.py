"""The zoo's networks as PyTorch modules, each listed once in `ZOO` with its export recipe and what it exercises."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from zoo_layers import FrequencyEncoding, SineLayer, mlp


@dataclass(frozen=True)
class ZooEntry:
    """One model: how to build it, its named rank-2 inputs/outputs (feature widths), exporter and opset."""

    name: str
    build: Callable[[], nn.Module]
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    exporter: str  # "dynamo" (torch.export based) or "legacy" (TorchScript based)
    opset: int
    exercises: str

    @property
    def input_names(self) -> list[str]:
        return [name for name, _ in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [name for name, _ in self.outputs]


class NeuralMaterial(nn.Module):
    """Frequency-encoded uv and the two directions of a BRDF lookup → rgb reflectance in (0, 1)."""

    def __init__(self):
        super().__init__()
        self.uv_encoding = FrequencyEncoding(2, 8, flatten="flatten")
        self.direction_encoding = FrequencyEncoding(6, 4, flatten="flatten")
        width = self.uv_encoding.out_features + self.direction_encoding.out_features
        self.decoder = mlp([width, 64, 64, 3], nn.ReLU, head=nn.Sigmoid())

    def forward(self, uv, wi, wo):
        directions = torch.cat([wi, wo], dim=-1)
        return self.decoder(torch.cat([self.uv_encoding(uv), self.direction_encoding(directions)], dim=-1))


class Siren(nn.Module):
    """A SIREN signed-distance field: three sine layers (w0 = 30) and a linear output."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(SineLayer(3, 64, first=True), SineLayer(64, 64, first=False),
                                  SineLayer(64, 64, first=False))
        self.out = nn.Linear(64, 1)
        bound = math.sqrt(6.0 / 64) / 30.0
        with torch.no_grad():
            self.out.weight.uniform_(-bound, bound)

    def forward(self, p):
        return self.out(self.body(p))


class NerfSkipTwoHeads(nn.Module):
    """Small NeRF: encoded position through a trunk with a skip concat, a density head, a view-dependent colour head."""

    def __init__(self):
        super().__init__()
        self.position_encoding = FrequencyEncoding(3, 6, flatten="reshape")
        self.direction_encoding = FrequencyEncoding(3, 4, flatten="reshape")
        encoded = self.position_encoding.out_features
        self.trunk_in = mlp([encoded, 64, 64], nn.ReLU, head=nn.ReLU())
        self.trunk_skip = mlp([64 + encoded, 64, 64], nn.ReLU, head=nn.ReLU())
        self.density = nn.Sequential(nn.Linear(64, 1), nn.Softplus())
        self.feature = nn.Linear(64, 64)
        self.colour = mlp([64 + self.direction_encoding.out_features, 32, 3], nn.ReLU, head=nn.Sigmoid())

    def forward(self, xyz, view_dir):
        encoded = self.position_encoding(xyz)
        h = self.trunk_skip(torch.cat([self.trunk_in(encoded), encoded], dim=-1))
        rgb = self.colour(torch.cat([self.feature(h), self.direction_encoding(view_dir)], dim=-1))
        return self.density(h), rgb


class ActivationsZoo(nn.Module):
    """One linear layer before each of the less common activations, chained."""

    def __init__(self):
        super().__init__()
        activations = [nn.LeakyReLU(0.1), nn.ELU(alpha=0.7), nn.PReLU(24, init=0.2), nn.Hardsigmoid(), nn.Hardswish(),
                       nn.ReLU6(), nn.Tanh()]
        self.stages = nn.ModuleList(nn.Sequential(nn.Linear(8 if i == 0 else 24, 24), act)
                                    for i, act in enumerate(activations))
        self.before_softplus = nn.Linear(24, 24)
        self.softplus = nn.Softplus(beta=2.0, threshold=5.0)
        self.out = nn.Linear(24, 4)

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return self.out(self.softplus(self.before_softplus(torch.exp(x))))


class RadianceCacheLayerNorm(nn.Module):
    """A radiance-cache style mixture: LayerNorm trunk, softmax weights over 4 lobes, lobe colours summed by weight."""

    lobes = 4

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 64), nn.LayerNorm(64),
                                   nn.ReLU())
        self.logits = nn.Linear(64, self.lobes)
        self.lobe_colours = nn.Linear(64, self.lobes * 3)

    def forward(self, position, direction):
        h = self.trunk(torch.cat([position, direction], dim=-1))
        weights = torch.softmax(self.logits(h), dim=-1)
        colours = self.lobe_colours(h).reshape(-1, self.lobes, 3)
        return (weights.unsqueeze(-1) * colours).sum(dim=1), weights


class PiecewiseWhere(nn.Module):
    """Branch-free piecewise functions: comparisons with constants and tensors feeding where; abs, sqrt, pow, div."""

    def __init__(self):
        super().__init__()
        self.h = nn.Linear(4, 16)
        self.g = nn.Linear(4, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        h, g = self.h(x), self.g(x)
        positive = torch.sqrt(torch.abs(h) + 1e-3)
        negative = -torch.pow(h, 2) / (1.0 + torch.abs(h))
        y = torch.where(h > 0, positive, negative)
        y = torch.where(h >= g, y - g, y * 0.5)
        y = torch.where(g < -0.25, 0.0, y)
        y = torch.where(g <= 0.75, y, torch.pow(torch.abs(g) + 1.0, 1.5))
        return self.out(y / (torch.abs(g) + 2.0))


class SplitHeads(nn.Module):
    """A trunk whose last layer is split and sliced on the feature axis into four outputs."""

    def __init__(self):
        super().__init__()
        self.trunk = mlp([10, 32, 16], nn.ReLU)

    def forward(self, x):
        albedo, normal, extra = torch.split(self.trunk(x), [3, 5, 8], dim=1)
        return torch.sigmoid(albedo), torch.tanh(normal), torch.relu(extra[:, 2:6]), extra[:, ::2]


class SdfSoftplus(nn.Module):
    """IDR/VolSDF-style SDF network: softplus(beta=100), mid-network input skip scaled by 1/sqrt(2), sdf + feature."""

    def __init__(self):
        super().__init__()
        self.before_skip = nn.Sequential(nn.Linear(3, 64), nn.Softplus(beta=100), nn.Linear(64, 61),
                                         nn.Softplus(beta=100))
        self.after_skip = nn.Sequential(nn.Linear(64, 64), nn.Softplus(beta=100), nn.Linear(64, 9))

    def forward(self, x):
        h = torch.cat([self.before_skip(x), x], dim=-1) / math.sqrt(2.0)
        out = self.after_skip(h)
        return out[:, :1], out[:, 1:]


class LegacyEncodingActivations(nn.Module):
    """Frequency-encoded uv through the legacy exporter, with gelu, silu, thresholded softplus and hardswish."""

    def __init__(self):
        super().__init__()
        self.encoding = FrequencyEncoding(2, 6, flatten="reshape")
        self.l1 = nn.Linear(self.encoding.out_features, 32)
        self.l2 = nn.Linear(32, 32)
        self.l3 = nn.Linear(32, 32)
        self.l4 = nn.Linear(32, 32)
        self.out = nn.Linear(32, 3)
        self.softplus = nn.Softplus(beta=2.0, threshold=10.0)

    def forward(self, uv):
        h = nn.functional.gelu(self.l1(self.encoding(uv)))
        h = nn.functional.silu(self.l2(h))
        h = self.softplus(self.l3(h))
        h = nn.functional.hardswish(self.l4(h))
        return torch.sigmoid(self.out(h))


class LegacyLayerNormSoftmax(nn.Module):
    """LayerNorm, softmax and a few activations through the legacy exporter at an opset without LayerNormalization."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(5, 32), nn.LayerNorm(32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.ELU(),
                                   nn.Linear(32, 32), nn.Hardsigmoid())
        self.logits = nn.Linear(32, 6)
        self.value = nn.Linear(32, 2)

    def forward(self, x):
        h = self.trunk(x)
        return torch.softmax(self.logits(h), dim=-1), torch.clamp(self.value(h), -1.0, 1.0)


class ResidualMatmul(nn.Module):
    """Bias-free layers, a residual add, a sigmoid gate multiplied in, a soft-sign divide, and an explicit x @ W + b."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 32, bias=False)
        self.residual = nn.Linear(32, 32, bias=False)
        self.gate = nn.Linear(32, 32)
        bound = 1.0 / math.sqrt(32)
        self.out_weight = nn.Parameter(torch.empty(32, 4).uniform_(-bound, bound))
        self.out_bias = nn.Parameter(torch.empty(4).uniform_(-bound, bound))

    def forward(self, x):
        h = torch.relu(self.embed(x))
        h = h + torch.relu(self.residual(h))
        h = h * torch.sigmoid(self.gate(h))
        h = h / (1.0 + torch.abs(h))
        return torch.matmul(h, self.out_weight) + self.out_bias


class GeluSilu(nn.Module):
    """Exact gelu, tanh-approximated gelu and silu between linear layers."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(approximate="tanh"),
                                 nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def benchmark_mlp(fan_in: int, width: int, hidden: int, fan_out: int) -> Callable[[], nn.Module]:
    return lambda: mlp([fan_in] + [width] * hidden + [fan_out], nn.ReLU)


def legacy_gemm_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Sigmoid(),
                         nn.Linear(32, 2))


ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("mlp_3_64x2_3", benchmark_mlp(3, 64, 2, 3), (("x", 3),), (("y", 3),), "dynamo", 18,
             "benchmark MLP: 3 -> 64 ReLU -> 64 ReLU -> 3"),
    ZooEntry("mlp_32_64x4_16", benchmark_mlp(32, 64, 4, 16), (("x", 32),), (("y", 16),), "dynamo", 18,
             "benchmark MLP: 32 -> four hidden layers of 64 ReLU -> 16"),
    ZooEntry("mlp_64_128x4_16", benchmark_mlp(64, 128, 4, 16), (("x", 64),), (("y", 16),), "dynamo", 18,
             "benchmark MLP: 64 -> four hidden layers of 128 ReLU -> 16"),
    ZooEntry("neural_material_freq", NeuralMaterial, (("uv", 2), ("wi", 3), ("wo", 3)), (("rgb", 3),), "dynamo", 18,
             "three inputs; frequency encoding via unsqueeze * frequency vector, flatten(1), sin, cos; "
             "concat of inputs and encodings; sigmoid head"),
    ZooEntry("siren_sdf", Siren, (("p", 3),), (("sdf", 1),), "dynamo", 18,
             "SIREN: sin(30 * linear) layers with the paper's init (large arguments to sin)"),
    ZooEntry("nerf_skip_two_heads", NerfSkipTwoHeads, (("xyz", 3), ("view_dir", 3)), (("sigma", 1), ("rgb", 3)),
             "dynamo", 18,
             "positional encodings via reshape(batch, -1); skip concat mid-trunk; softplus density head and "
             "sigmoid colour head; two outputs"),
    ZooEntry("gelu_silu_mlp", GeluSilu, (("x", 8),), (("y", 4),), "dynamo", 18,
             "exact gelu and tanh gelu at opset 18 (decomposed: Erf, Pow, Tanh), silu"),
    ZooEntry("gelu_silu_opset20", GeluSilu, (("x", 8),), (("y", 4),), "dynamo", 20,
             "the same network at opset 20, where the exporter writes the Gelu operator (approximate none/tanh)"),
    ZooEntry("legacy_gemm_mlp", legacy_gemm_mlp, (("x", 6),), (("y", 2),), "legacy", 13,
             "legacy exporter, opset 13: Gemm(transB=1) layers with ReLU, Tanh, Sigmoid"),
    ZooEntry("activations_zoo", ActivationsZoo, (("x", 8),), (("y", 4),), "dynamo", 18,
             "LeakyReLU, ELU(alpha=0.7), PReLU (per channel), Hardsigmoid, Hardswish, ReLU6 (Clip), Tanh, exp, "
             "Softplus(beta=2, threshold=5) in thresholded form"),
    ZooEntry("radiance_cache_layernorm", RadianceCacheLayerNorm, (("position", 3), ("direction", 3)),
             (("rgb", 3), ("weights", 4)), "dynamo", 21,
             "LayerNorm and softmax on the feature axis; reshape to [batch, 4, 3], unsqueeze, broadcast mul, "
             "ReduceSum over axis 1; two outputs"),
    ZooEntry("piecewise_where", PiecewiseWhere, (("x", 4),), (("y", 2),), "dynamo", 18,
             "Greater/GreaterOrEqual/Less/LessOrEqual against constants and tensors, Where with tensor and scalar "
             "branches, Abs, Sqrt, Pow (constant exponents 2 and 1.5), Neg, Sub, Div, Mul"),
    ZooEntry("split_heads_legacy", SplitHeads, (("x", 10),),
             (("albedo", 3), ("normal", 5), ("extra_mid", 4), ("extra_even", 4)), "legacy", 17,
             "legacy exporter, opset 17: Split into three parts, Slice with start/stop and with step 2; four outputs"),
    ZooEntry("sdf_softplus", SdfSoftplus, (("x", 3),), (("sdf", 1), ("feature", 8)), "dynamo", 18,
             "Softplus(beta=100, threshold=20) in thresholded form; input skip concat divided by sqrt(2); "
             "output sliced into sdf and feature"),
    ZooEntry("legacy_encoding_activations", LegacyEncodingActivations, (("uv", 2),), (("rgb", 3),), "legacy", 15,
             "legacy exporter, opset 15: frequency encoding via reshape(batch, -1), exact gelu, silu, "
             "Softplus(beta=2, threshold=10), hardswish, sigmoid"),
    ZooEntry("legacy_layernorm_softmax", LegacyLayerNormSoftmax, (("x", 5),), (("probabilities", 6), ("value", 2)),
             "legacy", 14,
             "legacy exporter, opset 14: LayerNorm written out (ReduceMean, Sub, Pow, Sqrt, Div), softmax, LeakyReLU, "
             "ELU, HardSigmoid, clamp (Clip) with both bounds; two outputs"),
    ZooEntry("residual_matmul_mlp", ResidualMatmul, (("x", 16),), (("y", 4),), "dynamo", 23,
             "bias-free Linear, residual add, sigmoid gate multiplied in, x / (1 + |x|), explicit MatMul + Add"),
)
