"""The Grid encoding against hand-worked cases: tcnn's level geometry, dense and hashed lookups at the edge inputs
0, 1 and just under 1, every interpolation, inputs outside [0, 1], gradients against finite differences, and the
configs it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.graph.encodings.grid_levels import COHERENT_PRIMES
from coopnn.graph.encodings.registry import from_config
from tests.graph.encodings.checks import check_gradients

TCNN_IMAGE = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
              "base_resolution": 16, "per_level_scale": 1.5}
JUST_UNDER_1 = np.nextafter(np.float32(1), np.float32(0))


def dense_1d(interpolation="Linear", base=4):
    """One dense level of resolution `base` over 1-D inputs, one feature, entries 0, 10, 20, ..."""
    grid = from_config({"otype": "DenseGrid", "n_levels": 1, "n_features_per_level": 1, "base_resolution": base,
                        "interpolation": interpolation}, 1)
    return grid, np.arange(grid.n_parameters, dtype=np.float32) * 10


def test_the_levels_of_tcnns_image_configuration():
    grid = from_config(TCNN_IMAGE, 2)
    level = grid.levels
    # scale 16 * 1.5^l - 1, resolution ceil(scale) + 1, table min(r^2 rounded up to 8, 2^15)
    assert [(lv.resolution, lv.size) for lv in level[:3]] == [(16, 256), (24, 576), (36, 1296)]
    assert level[3].size == 2920  # 54^2 = 2916 rounded up to a multiple of 8
    assert [lv.hashed for lv in level] == [False] * 6 + [True] * 10  # 183^2 > 2^15 from level 6
    assert all(lv.size == 1 << 15 for lv in level[6:])
    assert [lv.offset for lv in level[:3]] == [0, 256, 832]
    assert grid.n_parameters == 2 * (level[-1].offset + level[-1].size)
    assert grid.n_output_dims == 32 and grid.output_alignment == 2


def test_linear_lookups_at_the_edges_of_a_dense_level():
    grid, params = dense_1d()  # scale 3, resolution 4, table of 8 (4 rounded up)
    assert grid.n_parameters == 8
    x = np.array([[0.0], [1.0], [JUST_UNDER_1], [0.5]], np.float32)
    y = grid.forward(x, params)[:, 0]
    # p = 3 x + 1/2: 0 -> cell 0 at t 1/2; 1 -> cell 3 at t 1/2 (vertex 4 is the rounding-up entry); 0.5 -> 2 at 0
    t = np.float32(3) * JUST_UNDER_1 + np.float32(0.5) - 3
    np.testing.assert_allclose(y, [5, 35, 30 + 10 * t, 20], rtol=1e-6)


def test_nearest_and_smoothstep():
    nearest, params = dense_1d("Nearest")
    x = np.array([[0.0], [1.0], [0.49], [0.51]], np.float32)
    np.testing.assert_array_equal(nearest.forward(x, params)[:, 0], [0, 30, 10, 20])  # floor(3 x + 1/2)
    smooth, _ = dense_1d("Smoothstep")
    t = 0.25  # x = 0.25: p = 1.25
    np.testing.assert_allclose(smooth.forward(np.array([[0.25]], np.float32), params)[0, 0],
                               10 + 10 * (3 * t * t - 2 * t ** 3), rtol=1e-6)


def test_inputs_outside_the_unit_interval_wrap_around_the_table():
    grid, params = dense_1d()
    # x = -0.25: p = -0.25, cell -1 is uint32 2^32 - 1, entry (2^32 - 1) mod 8 = 7; its right neighbour wraps to 0
    np.testing.assert_allclose(grid.forward(np.array([[-0.25]], np.float32), params)[0, 0], 0.25 * 70 + 0.75 * 0)
    # x = 2: p = 6.5, entries 6 and 7
    np.testing.assert_allclose(grid.forward(np.array([[2.0]], np.float32), params)[0, 0], 65)


def test_a_dense_2d_level_indexes_x_plus_y_times_resolution():
    grid = from_config({"otype": "DenseGrid", "n_levels": 1, "n_features_per_level": 2, "base_resolution": 2}, 2)
    assert grid.levels[0].resolution == 2 and grid.levels[0].size == 8
    params = np.arange(16, dtype=np.float32)  # entry i holds features (2 i, 2 i + 1)
    # x = (0, 0): p = (1/2, 1/2), the four vertices 0, 1, 2, 3 weighted a quarter each
    np.testing.assert_allclose(grid.forward(np.zeros((1, 2), np.float32), params)[0], [3, 4])
    # x = (1, 0): p = (3/2, 1/2): vertices (1, 0), (2, 0), (1, 1), (2, 1) -> entries 1, 2, 3, 4
    np.testing.assert_allclose(grid.forward(np.array([[1.0, 0.0]], np.float32), params)[0], [5, 6])


def test_a_hashed_level_reads_the_coherent_prime_hash():
    grid = from_config({"otype": "HashGrid", "n_levels": 1, "n_features_per_level": 1, "log2_hashmap_size": 3,
                        "base_resolution": 16}, 2)
    assert grid.levels[0].hashed and grid.levels[0].size == 8
    params = np.arange(8, dtype=np.float32) * 100

    def entry(cx, cy):
        return ((cx * COHERENT_PRIMES[0]) ^ (cy * COHERENT_PRIMES[1] % 2 ** 32)) % 8

    x = np.array([[0.0, 0.0], [1.0, JUST_UNDER_1]], np.float32)
    y = grid.forward(x, params)[:, 0]
    # x = 0: p = (1/2, 1/2), cell (0, 0); x = 1: p = (15.5, ~15.5), cell (15, 15)
    corners = [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert y[0] == pytest.approx(sum(25 * entry(*c) for c in corners))
    ty = np.float32(15) * JUST_UNDER_1 + np.float32(0.5) - 15
    weights = [0.5 * (1 - ty), 0.5 * (1 - ty), 0.5 * ty, 0.5 * ty]
    assert y[1] == pytest.approx(sum(w * 100 * entry(15 + a, 15 + b) for w, (a, b) in zip(weights, corners)), rel=1e-5)


def test_tiled_levels_repeat_the_base_tile():
    grid = from_config({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 4}, 1)
    assert [lv.size for lv in grid.levels] == [4, 4]  # level 1 has 8 vertices, tiled over the base's 4
    assert [lv.resolution for lv in grid.levels] == [4, 8]


def test_a_dense_index_stops_at_the_first_stride_past_the_table():
    # tcnn's dense index adds a dimension only while its stride r^k fits the table (its guard against uint32
    # overflow): level 1 (scale 5, 6 vertices a side) tiles a table of 4, so y's stride 6 is past it and y is left out
    grid = from_config({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 2,
                        "per_level_scale": 3.0, "interpolation": "Nearest"}, 2)
    assert [(lv.resolution, lv.size) for lv in grid.levels] == [(2, 4), (6, 4)]
    params = np.array([0, 0, 0, 0, 0, 100, 200, 300], np.float32)
    # p = 5 x + 1/2: cells (1, 0), (1, 1), (3, 5); entry x mod 4 (not (x + 6 y) mod 4)
    x = np.array([[0.2, 0.0], [0.2, 0.2], [0.6, 0.9]], np.float32)
    np.testing.assert_array_equal(grid.forward(x, params)[:, 1], [100, 100, 300])


def test_initial_parameters_are_uniform_in_plus_minus_1e4():
    grid = from_config(TCNN_IMAGE, 2)
    params = grid.initial_parameters(np.random.default_rng(0))
    assert params.dtype == np.float32 and params.shape == (grid.n_parameters,)
    assert np.abs(params).max() <= 1e-4 and np.abs(params).max() > 0.99e-4


@pytest.mark.parametrize("interpolation", ["Nearest", "Linear", "Smoothstep"])
@pytest.mark.parametrize("dims, grid_type", [(1, "Dense"), (2, "Hash"), (3, "Hash"), (4, "Tiled")])
def test_gradients_match_finite_differences(interpolation, dims, grid_type):
    rng = np.random.default_rng(dims)
    grid = from_config({"otype": "Grid", "type": grid_type, "n_levels": 2, "n_features_per_level": 2,
                        "log2_hashmap_size": 5, "base_resolution": 3, "per_level_scale": 2.0,
                        "interpolation": interpolation}, dims)
    params = rng.standard_normal(grid.n_parameters).astype(np.float32)
    x = rng.uniform(0.05, 0.95, (3, dims)).astype(np.float32)
    check_gradients(grid, x, rng, params, inputs=interpolation != "Nearest")
    if interpolation == "Nearest":
        assert not np.any(grid.backward(x, params, np.ones((3, grid.n_output_dims), np.float32))[1])


@pytest.mark.parametrize("config, dims, key", [
    ({"otype": "HashGridd"}, 2, "'otype' is 'HashGridd'"),
    ({"otype": "HashGrid"}, 5, "grids take 1 to 4"),
    ({"otype": "HashGrid", "n_features_per_level": 3}, 2, "'n_features_per_level' is 3; supported: 1, 2, 4 or 8"),
    ({"otype": "HashGrid", "log2_hashmap_size": 40}, 2, "'log2_hashmap_size' is 40; supported: 1 to 30"),
    ({"otype": "HashGrid", "per_level_scale": -1.5}, 2, "'per_level_scale' must be > 0"),
    ({"otype": "HashGrid", "base_resolution": -4}, 2, "'base_resolution' is -4"),
    ({"otype": "HashGrid", "n_levels": 33}, 2, "'n_levels' is 33; supported: 1 to 32"),
    ({"otype": "HashGrid", "n_levels": 4, "n_features": 8}, 2, "'n_features' and 'n_levels' both fix"),
    ({"otype": "HashGrid", "hash": "Prime"}, 2, "'hash' is not CoherentPrime"),
    ({"otype": "HashGrid", "interpolation": "Cubic"}, 2, "'interpolation' is 'Cubic'; supported: Nearest"),
    ({"otype": "HashGrid", "type": "Sparse"}, 2, "'type' is 'Sparse'; supported: Hash, Dense, Tiled"),
    ({"otype": "HashGrid", "stochastic_interpolation": True}, 2, "'stochastic_interpolation' is true"),
    ({"otype": "HashGrid", "n_level": 4}, 2, "'n_level' is not a key this encoding takes"),
    ({"otype": "HashGrid", "per_level_scale": 1e6}, 2, "'per_level_scale'"),
    ({"otype": "HashGrid", "n_levels": 32, "log2_hashmap_size": 30, "n_features_per_level": 8,
      "per_level_scale": 1.5}, 3,
     "'log2_hashmap_size' .* parameters; coopnn takes up to"),
    ({"otype": "DenseGrid", "n_levels": 1, "base_resolution": 1 << 20}, 3,
     "keys 'base_resolution' and 'per_level_scale' of a Dense grid of 1 levels makes"),
    ({"otype": "TiledGrid", "n_levels": 1, "base_resolution": 1 << 20}, 3, "key 'base_resolution' of a Tiled grid"),
])
def test_bad_configs_name_the_key(config, dims, key):
    with pytest.raises(InputError, match=key):
        from_config(config, dims)


def test_spellings_pick_the_grid_type():
    assert from_config({"otype": "densegrid"}, 2).grid_type == "Dense"
    assert from_config({"otype": "TiledGrid"}, 2).grid_type == "Tiled"
    assert from_config({"otype": "Grid"}, 2).grid_type == "Hash"
    dense = from_config({"otype": "DenseGrid", "n_levels": 5, "base_resolution": 16}, 2)
    assert dense.per_level_scale == pytest.approx(2.0)  # (256 / 16)^(1 / 4): tcnn's dense default
