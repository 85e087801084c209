"""Building blocks shared by the zoo's networks: plain MLP stacks, frequency encodings and SIREN sine layers."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn


def mlp(widths: list[int], activation: Callable[[], nn.Module], head: nn.Module | None = None) -> nn.Sequential:
    """Linear layers through `widths`, `activation` after every hidden layer, `head` (if any) after the last."""
    layers: list[nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if index < len(widths) - 2:
            layers.append(activation())
    if head is not None:
        layers.append(head)
    return nn.Sequential(*layers)


class FrequencyEncoding(nn.Module):
    """NeRF positional encoding: [x, sin(x * f_k), cos(x * f_k)] with f_k = 2^k * pi on the feature axis.

    `flatten` picks how the [batch, features, frequencies] product is brought back to rank 2, because the exporters
    write `flatten(1)` and `reshape(batch, -1)` differently and the zoo should hold both forms.
    """

    def __init__(self, in_features: int, frequencies: int, flatten: str):
        super().__init__()
        self.in_features = in_features
        self.flatten = flatten
        self.register_buffer("frequencies", (2.0 ** torch.arange(frequencies, dtype=torch.float32)) * math.pi)

    @property
    def out_features(self) -> int:
        return self.in_features * (1 + 2 * self.frequencies.numel())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = x.unsqueeze(-1) * self.frequencies
        if self.flatten == "flatten":
            scaled = scaled.flatten(1)
        else:
            scaled = scaled.reshape(x.shape[0], -1)
        return torch.cat([x, torch.sin(scaled), torch.cos(scaled)], dim=-1)


class SineLayer(nn.Module):
    """sin(w0 * (W x + b)) with the SIREN paper's initialisation (Sitzmann et al. 2020, section 3.2)."""

    def __init__(self, in_features: int, out_features: int, first: bool, w0: float = 30.0):
        super().__init__()
        self.w0 = w0
        self.linear = nn.Linear(in_features, out_features)
        bound = 1.0 / in_features if first else math.sqrt(6.0 / in_features) / w0
        with torch.no_grad():
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.w0 * self.linear(x))
