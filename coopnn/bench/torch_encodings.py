"""The encodings in plain PyTorch, differentiable by autograd: the PyTorch baseline of an encoded model (what
`TorchGraph` runs for an ENCODING node, on any device and in any float type), agreeing with the numpy forward
passes of `coopnn.graph.encodings`. A grid's vertex indices are computed in int64 with tcnn's uint32 wrap-around
(products split into 16-bit halves so that int64 never overflows)."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from coopnn.graph.encodings import grid_levels
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.encodings.composite import Composite
from coopnn.graph.encodings.frequency import Frequency
from coopnn.graph.encodings.grid import Grid
from coopnn.graph.encodings.identity import Identity
from coopnn.graph.encodings.oneblob import SHIFTS, OneBlob
from coopnn.graph.encodings.spherical_harmonics import SphericalHarmonics, _normalisation
from coopnn.graph.encodings.triangle_wave import TriangleWave

U32 = 0xFFFFFFFF


def _times_u32(a: Tensor, factor: int) -> Tensor:
    """(a * factor) mod 2^32 for int64 a in [0, 2^32)."""
    low, high = factor & 0xFFFF, factor >> 16
    return (((a * high) & 0xFFFF) * (1 << 16) + a * low) & U32


def _entries(encoding: Grid, level: grid_levels.Level, corners: Tensor) -> Tensor:
    d = encoding.n_input_dims
    index = torch.zeros(corners.shape[:-1], dtype=torch.int64, device=corners.device)
    if level.hashed:
        for dim in range(d):
            index = index ^ _times_u32(corners[..., dim], grid_levels.COHERENT_PRIMES[dim])
    elif level.resolution <= grid_levels.MAX_DENSE_BASE[d]:
        for dim, stride in enumerate(grid_levels.dense_strides(level, d)):
            index = (index + _times_u32(corners[..., dim], stride)) & U32
    return index % level.size + level.offset


def grid(encoding: Grid, x: Tensor, params: Tensor) -> Tensor:
    d, f = encoding.n_input_dims, encoding.n_features_per_level
    table = params.reshape(-1, f)
    bits = (torch.arange(1 << d, device=x.device)[:, None] >> torch.arange(d, device=x.device)) & 1
    levels = []
    for level in encoding.levels:
        position = x * float(level.scale) + 0.5
        floor = torch.floor(position)
        t = position - floor
        cell = floor.detach().clamp(-2.0 ** 31, 2.0 ** 31 - 1).to(torch.int64) & U32
        if encoding.interpolation == "Nearest":
            levels.append(table[_entries(encoding, level, cell[:, None, :])][:, 0])
            continue
        if encoding.interpolation == "Smoothstep":
            t = t * t * (3 - 2 * t)
        corners = (cell[:, None, :] + bits) & U32
        along = torch.where(bits.bool(), t[:, None, :], 1 - t[:, None, :])
        weights = torch.prod(along, dim=2)
        levels.append((weights[..., None] * table[_entries(encoding, level, corners)]).sum(dim=1))
    return torch.cat(levels, dim=1)


def frequency(encoding: Frequency, x: Tensor, params: Tensor) -> Tensor:
    frequencies = torch.as_tensor(encoding.frequencies(), device=x.device, dtype=x.dtype)
    phases = x[:, :, None] * frequencies
    if encoding.layout == "tcnn":
        return torch.stack([torch.sin(phases), torch.cos(phases)], dim=-1).reshape(len(x), -1)
    flat = phases.reshape(len(x), -1)
    return torch.cat([x, torch.sin(flat), torch.cos(flat)], dim=1)


def triangle_wave(encoding: TriangleWave, x: Tensor, params: Tensor) -> Tensor:
    octaves = torch.arange(encoding.n_frequencies, device=x.device, dtype=x.dtype)
    v = x[:, :, None] * torch.exp2(octaves - 1) + octaves * 0.25
    return (torch.abs(v - torch.floor(v) - 0.5) * 4 - 1).reshape(len(x), -1)


def oneblob(encoding: OneBlob, x: Tensor, params: Tensor) -> Tensor:
    n = encoding.n_bins
    t = torch.arange(n + 1, device=x.device, dtype=x.dtype) / n - x[:, :, None]
    cdf = 0
    for shift in SHIFTS:
        u = (t + shift) * n
        u2 = u * u
        cdf = cdf + torch.clamp(15 / 16 * u * (1 - 2 / 3 * u2 + u2 * u2 / 5) + 0.5, 0, 1)
    return (cdf[:, :, 1:] - cdf[:, :, :-1]).reshape(len(x), -1)


def spherical_harmonics(encoding: SphericalHarmonics, x: Tensor, params: Tensor) -> Tensor:
    degree = encoding.degree
    cx, cy, cz = (x[:, i] * 2 - 1 for i in range(3))
    cosine, sine = [torch.ones_like(cx)], [torch.zeros_like(cx)]
    for _ in range(1, degree):
        c, s = cosine[-1], sine[-1]
        cosine.append(cx * c - cy * s)
        sine.append(cx * s + cy * c)
    columns: dict[int, Tensor] = {}
    for m in range(degree):
        legendre = {m: (-1) ** m * math.prod(range(1, 2 * m, 2)) * torch.ones_like(cx)}
        for band in range(m + 1, degree):
            step = (2 * band - 1) * cz * legendre[band - 1]
            if band - 2 >= m:
                step = step - (band + m - 1) * legendre[band - 2]
            legendre[band] = step / (band - m)
        for band in range(m, degree):
            k, centre = _normalisation(band, m), band * band + band
            if m == 0:
                columns[centre] = k * legendre[band]
                continue
            columns[centre + m] = math.sqrt(2) * k * legendre[band] * cosine[m]
            columns[centre - m] = math.sqrt(2) * k * legendre[band] * sine[m]
    return torch.stack([columns[i] for i in range(degree * degree)], dim=1)


def identity(encoding: Identity, x: Tensor, params: Tensor) -> Tensor:
    return x * encoding.scale + encoding.offset


def composite(encoding: Composite, x: Tensor, params: Tensor) -> Tensor:
    columns, start = [], 0
    for part in encoding.parts:
        nested = part.encoding
        own = params[start:start + nested.n_parameters]
        start += nested.n_parameters
        encoded = encode(nested, x[:, part.begin:part.begin + nested.n_input_dims], own)
        pad = torch.full((len(x), part.pad), nested.pad_value, device=x.device, dtype=x.dtype)
        columns.extend([pad, encoded] if nested.pads_in_front else [encoded, pad])
    return torch.cat(columns, dim=1)


FORMS: dict[str, Callable[..., Tensor]] = {
    Grid.otype: grid, Frequency.otype: frequency, TriangleWave.otype: triangle_wave, OneBlob.otype: oneblob,
    SphericalHarmonics.otype: spherical_harmonics, Identity.otype: identity, Composite.otype: composite,
}


def encode(encoding: Encoding, x: Tensor, params: Tensor | None = None) -> Tensor:
    """`encoding` of the [batch, n_input_dims] tensor `x` with the parameter vector `params` (None: none)."""
    empty = torch.zeros(0, device=x.device, dtype=x.dtype)
    return FORMS[encoding.otype](encoding, x, empty if params is None else params)
