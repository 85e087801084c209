"""Grid (tiny-cuda-nn `Grid`, `HashGrid`, `DenseGrid`, `TiledGrid`): trainable multiresolution grids of feature
vectors (Müller et al. 2022, "Instant Neural Graphics Primitives"), interpolated at each input point.

Each level l looks up the grid vertices around p = scale_l x + 1/2 (the half-cell offset staggers the levels):
Nearest takes the vertex floor(p); Linear and Smoothstep blend the 2^d vertices of the cell by the d-linear weights
of the fraction p - floor(p) (Smoothstep first maps it by 3t^2 - 2t^3). Output l F + f is feature f of level l.
Inputs are not clamped: outside [0, 1] the vertices index the tables as tcnn indexes them (modulo the table size,
so dense grids wrap around and hash grids hash), which `grid_levels` reproduces in tcnn's uint32 arithmetic.

Parameters: one flat float32 vector, level after level (`level.offset` entries in), each entry's F features
together: feature f of entry i of level l is params[(offset_l + i) F + f], exactly tcnn's layout. They start uniform
in +-1e-4, as tcnn starts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.encodings import grid_levels
from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader

GRID_TYPES = ("Hash", "Dense", "Tiled")
INTERPOLATIONS = ("Nearest", "Linear", "Smoothstep")
FEATURES_PER_LEVEL = (1, 2, 4, 8)
MAX_LEVELS = 32
MAX_INPUT_DIMS = 4
MAX_LOG2_HASHMAP_SIZE = 30
MAX_PARAMETERS = 1 << 30  # 4 GiB of float32
INIT_RANGE = 1e-4
# what sizes each type's tables: a hash grid's are capped at 2^log2_hashmap_size, a tiled one's at base_resolution^d
SIZE_KEYS = {"Hash": "key 'log2_hashmap_size'", "Dense": "keys 'base_resolution' and 'per_level_scale'",
             "Tiled": "key 'base_resolution'"}
_DEFAULT_TYPE = {"grid": "Hash", "hashgrid": "Hash", "densegrid": "Dense", "tiledgrid": "Tiled"}


def smoothstep(t: np.ndarray) -> np.ndarray:
    return t * t * (np.float32(3) - np.float32(2) * t)


def smoothstep_derivative(t: np.ndarray) -> np.ndarray:
    return np.float32(6) * t * (np.float32(1) - t)


@dataclass(frozen=True)
class Grid(Encoding):
    otype = "Grid"
    aliases = ("HashGrid", "DenseGrid", "TiledGrid")
    pad_value = 0.0

    n_levels: int = 16
    n_features_per_level: int = 2
    log2_hashmap_size: int = 19
    base_resolution: int = 16
    per_level_scale: float = 2.0
    interpolation: str = "Linear"
    grid_type: str = "Hash"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "Grid":
        keys = ConfigReader(config, where)
        if not 1 <= n_input_dims <= MAX_INPUT_DIMS:
            keys.fail("n_dims_to_encode" if keys.has("n_dims_to_encode") else "n_input_dims",
                      f"gives a grid of {n_input_dims} input dimensions; grids take 1 to {MAX_INPUT_DIMS}")
        grid_type = keys.choice("type", _DEFAULT_TYPE[config.get("otype", "Grid").lower()], GRID_TYPES)
        features = keys.integer("n_features_per_level", 2, 1, 8)
        if features not in FEATURES_PER_LEVEL:
            keys.fail("n_features_per_level", f"is {features}; supported: 1, 2, 4 or 8")
        n_levels = cls._read_levels(keys, features)
        base = keys.integer("base_resolution", 16, 1, 1 << 20)
        default_scale = 2.0 if grid_type != "Dense" else float(
            np.exp(np.log(np.float32(256 / base)) / np.float32(max(n_levels - 1, 1))))
        made = cls(n_input_dims, n_levels, features, keys.integer("log2_hashmap_size", 19, 1, MAX_LOG2_HASHMAP_SIZE),
                   base, keys.number("per_level_scale", default_scale, positive=True),
                   keys.choice("interpolation", "Linear", INTERPOLATIONS), grid_type)
        cls._read_unsupported(keys)
        keys.finish()
        made._check_size(where)
        return made

    @staticmethod
    def _read_levels(keys: ConfigReader, features: int) -> int:
        """n_levels, or n_features / n_grid_features (all features, which fix the levels) as tcnn takes them."""
        for key in ("n_features", "n_grid_features"):
            if keys.has(key):
                if keys.has("n_levels"):
                    keys.fail(key, "and 'n_levels' both fix the number of levels; give one")
                total = keys.integer(key, features, features, MAX_LEVELS * features)
                if total % features:
                    keys.fail(key, f"is {total}, not a multiple of n_features_per_level ({features})")
                return total // features
        return keys.integer("n_levels", 16, 1, MAX_LEVELS)

    @staticmethod
    def _read_unsupported(keys: ConfigReader) -> None:
        if keys.choice("hash", "CoherentPrime", ("CoherentPrime", "Prime", "ReversedPrime", "Rng", "BaseConvert")) \
                != "CoherentPrime":
            keys.fail("hash", "is not CoherentPrime, the one hash coopnn (and a default tiny-cuda-nn build) has")
        if keys.flag("stochastic_interpolation", False):
            keys.fail("stochastic_interpolation", "is true; coopnn interpolates deterministically")
        if keys.flag("fixed_point_pos", False):
            keys.fail("fixed_point_pos", "is true; coopnn reads positions in floating point only")

    def _check_size(self, where: str) -> None:
        last = self.levels[-1]
        if not math.isfinite(float(last.scale)) or last.resolution > 1 << 31:
            raise InputError(f"{where}: key 'per_level_scale' ({self.per_level_scale}) makes level "
                             f"{self.n_levels - 1} {float(last.scale):.3g} cells wide; coopnn takes up to 2^31")
        if self.n_parameters > MAX_PARAMETERS:
            keys = SIZE_KEYS[self.grid_type]
            raise InputError(f"{where}: {keys} of a {self.grid_type} grid of {self.n_levels} levels makes "
                             f"{self.n_parameters:,} parameters; coopnn takes up to {MAX_PARAMETERS:,}")

    @cached_property
    def levels(self) -> tuple[grid_levels.Level, ...]:
        return grid_levels.levels(self.n_input_dims, self.n_levels, self.grid_type, self.log2_hashmap_size,
                                  self.base_resolution, self.per_level_scale)

    @property
    def n_output_dims(self) -> int:
        return self.n_levels * self.n_features_per_level

    @property
    def n_parameters(self) -> int:
        last = self.levels[-1]
        return (last.offset + last.size) * self.n_features_per_level

    @property
    def output_alignment(self) -> int:
        return self.n_features_per_level

    def initial_parameters(self, rng):
        return float32(rng.uniform(-INIT_RANGE, INIT_RANGE, self.n_parameters))

    def corners(self, level: grid_levels.Level, x: np.ndarray, derivatives: bool = False):
        """For every sample: the table entries of the vertices it reads [batch, corners] and their weights [batch,
        corners] (float32), and with `derivatives` the weights' derivatives in x [batch, corners, d] (float64).
        Nearest reads one vertex."""
        d = self.n_input_dims
        position = float32(np.float64(level.scale) * x.astype(np.float64) + 0.5)  # tcnn's fmaf(scale, x, 0.5)
        floor = np.floor(position)
        cell = (np.clip(floor, -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int64) & grid_levels.U32).astype(np.uint32)
        t = float32(position - floor)
        if self.interpolation == "Nearest":
            found = (grid_levels.vertex_index(level, d, cell)[:, None], np.ones((len(x), 1), np.float32))
            return found + ((np.zeros((len(x), 1, d)),) if derivatives else ())
        slope = np.ones_like(t)
        if self.interpolation == "Smoothstep":
            t, slope = smoothstep(t), smoothstep_derivative(t)
        bits = (np.arange(1 << d)[:, None] >> np.arange(d)) & 1  # [corners, d]
        vertex = cell[:, None, :] + bits.astype(np.uint32)  # uint32 wraps as tcnn's does
        along = np.where(bits[None], t[:, None, :], np.float32(1) - t[:, None, :])  # [batch, corners, d]
        weights = along[:, :, 0]
        for dim in range(1, d):
            weights = weights * along[:, :, dim]
        found = (grid_levels.vertex_index(level, d, vertex), float32(weights))
        if not derivatives:
            return found
        derivative = np.empty(along.shape, np.float64)
        for dim in range(d):
            others = np.prod(np.delete(along, dim, axis=2), axis=2)
            sign = np.where(bits[:, dim] == 1, 1.0, -1.0)
            derivative[:, :, dim] = sign * others * np.float64(level.scale) * slope[:, None, dim]
        return found + (derivative,)

    def _table(self, params: np.ndarray, level: grid_levels.Level) -> np.ndarray:
        f = self.n_features_per_level
        return np.asarray(params, np.float32)[level.offset * f:(level.offset + level.size) * f].reshape(-1, f)

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        out = np.empty((len(x), self.n_output_dims), np.float32)
        f = self.n_features_per_level
        for i, level in enumerate(self.levels):
            index, weights = self.corners(level, x)
            out[:, i * f:(i + 1) * f] = np.einsum("bc,bcf->bf", weights, self._table(params, level)[index])
        return out

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        f = self.n_features_per_level
        d_params = np.zeros(self.n_parameters, np.float64)
        dx = np.zeros(x.shape, np.float64)
        for i, level in enumerate(self.levels):
            index, weights, *derivative = self.corners(level, x, derivatives=input_gradient)
            g = np.asarray(dy[:, i * f:(i + 1) * f], np.float64)  # [batch, F]
            entries = index[:, :, None] * f + np.arange(f)  # [batch, corners, F], within the level's table
            contributions = weights[:, :, None].astype(np.float64) * g[:, None, :]
            d_params[level.offset * f:(level.offset + level.size) * f] += np.bincount(
                entries.ravel(), contributions.ravel(), minlength=level.size * f)
            if not input_gradient:
                continue
            values = self._table(params, level)[index].astype(np.float64)  # [batch, corners, F]
            dx += np.einsum("bcf,bf,bcd->bd", values, g, derivative[0])
        return float32(d_params), float32(dx)

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "type": self.grid_type, "n_levels": self.n_levels,
                "n_features_per_level": self.n_features_per_level, "log2_hashmap_size": self.log2_hashmap_size,
                "base_resolution": self.base_resolution, "per_level_scale": self.per_level_scale,
                "interpolation": self.interpolation, "hash": "CoherentPrime"}


ENCODINGS = (Grid,)
