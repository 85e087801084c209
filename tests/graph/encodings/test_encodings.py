"""Identity, Frequency, TriangleWave, OneBlob, SphericalHarmonics and Composite against hand-worked cases (inputs 0,
1 and just under 1), their gradients against finite differences, the registry's names, and refused configs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.encodings.registry import from_config, otypes
from coopnn.nets.encodings import frequency
from coopnn.backends.numpy.inference import run_graph
from tests.graph.encodings.checks import check_gradients

EMPTY = np.zeros(0, np.float32)
JUST_UNDER_1 = float(np.nextafter(np.float32(1), np.float32(0)))
EDGES = np.array([[0.0], [1.0], [JUST_UNDER_1], [0.25]], np.float32)


def test_the_registry_takes_tcnns_names_in_any_case():
    assert {"Identity", "Frequency", "TriangleWave", "OneBlob", "SphericalHarmonics", "Grid", "HashGrid", "DenseGrid",
            "TiledGrid", "Composite"} <= set(otypes())
    assert from_config({"otype": "oneblob"}, 1).otype == "OneBlob"
    assert from_config({}, 2).otype == "OneBlob"  # tcnn's default otype


def test_identity():
    identity = from_config({"otype": "Identity", "scale": 2.0, "offset": -1.0}, 1)
    np.testing.assert_allclose(identity.forward(EDGES, EMPTY)[:, 0], 2 * EDGES[:, 0] - 1)
    check_gradients(identity, EDGES, np.random.default_rng(0))


def test_frequency_in_tcnns_layout():
    encoding = from_config({"otype": "Frequency", "n_frequencies": 2}, 2)
    assert encoding.n_output_dims == 8
    x = np.array([[0.25, 0.0]], np.float32)
    a, b = math.pi / 4, math.pi / 2  # 2^0 pi x and 2^1 pi x for x = 1/4
    want = [math.sin(a), math.cos(a), math.sin(b), math.cos(b), 0, 1, 0, 1]
    np.testing.assert_allclose(encoding.forward(x, EMPTY)[0], want, atol=1e-6)
    np.testing.assert_allclose(encoding.forward(np.ones((1, 2), np.float32), EMPTY)[0, :4], [0, -1, 0, 1], atol=1e-6)
    check_gradients(encoding, np.random.default_rng(1).random((3, 2)), np.random.default_rng(0))


def test_frequency_in_coopnns_layout_is_what_coopnn_mlp_has_always_built():
    encoding = from_config({"otype": "Frequency", "layout": "nerf", "n_frequencies": 3}, 2)
    builder = GraphBuilder("f")
    out, width = frequency(builder, builder.input("x", 2), octaves=3)
    x = np.random.default_rng(2).random((5, 2)).astype(np.float32)
    want = run_graph(builder.graph([out]), {"x": x})[out]
    assert encoding.n_output_dims == width
    np.testing.assert_allclose(encoding.forward(x, EMPTY), want, rtol=1e-6, atol=1e-6)
    check_gradients(encoding, x, np.random.default_rng(0))
    assert from_config({"otype": "Frequency", "layout": "nerf"}, 1).n_frequencies == 6


def test_triangle_wave():
    encoding = from_config({"otype": "TriangleWave", "n_frequencies": 3}, 1)
    # v = 2^(k-1) x + k/4; 4 |v - floor(v) - 1/2| - 1
    def wave(x, k):
        v = 2.0 ** (k - 1) * x + k / 4
        return 4 * abs(v - math.floor(v) - 0.5) - 1
    want = [[wave(float(x), k) for k in range(3)] for x in EDGES[:, 0]]
    np.testing.assert_allclose(encoding.forward(EDGES, EMPTY), want, atol=1e-6)
    assert encoding.forward(np.zeros((1, 1), np.float32), EMPTY)[0].tolist() == [1.0, 0.0, -1.0]
    check_gradients(encoding, np.array([[0.1], [0.4], [0.7]], np.float32), np.random.default_rng(0))


def test_oneblob_spreads_unit_mass_over_the_bins_and_wraps():
    encoding = from_config({"otype": "OneBlob", "n_bins": 4}, 1)
    y = encoding.forward(EDGES, EMPTY)
    np.testing.assert_allclose(y.sum(axis=1), 1, atol=1e-6)
    # x = 1/4 sits on the boundary of bins 0 and 1, the kernel (radius 1/4) split evenly between them
    np.testing.assert_allclose(y[3], [0.5, 0.5, 0, 0], atol=1e-6)
    # x = 0 sits at the boundary with the last bin: half its mass wraps there
    np.testing.assert_allclose(y[0], [0.5, 0, 0, 0.5], atol=1e-6)
    np.testing.assert_allclose(y[1], y[0], atol=1e-6)  # period 1
    check_gradients(encoding, np.array([[0.1], [0.45], [0.8]], np.float32), np.random.default_rng(0))


def test_spherical_harmonics_of_the_first_bands():
    encoding = from_config({"otype": "SphericalHarmonics", "degree": 3}, 3)
    assert encoding.n_output_dims == 9
    x = np.array([[1.0, 0.5, 0.5]], np.float32)  # the direction (1, 0, 0)
    c0, c1 = 1 / (2 * math.sqrt(math.pi)), math.sqrt(3) / (2 * math.sqrt(math.pi))
    c2 = math.sqrt(15) / (4 * math.sqrt(math.pi))  # the x^2 - y^2 band-2 term
    want = [c0, 0, 0, -c1, 0, 0, -math.sqrt(5) / (4 * math.sqrt(math.pi)), 0, c2]
    np.testing.assert_allclose(encoding.forward(x, EMPTY)[0], want, atol=1e-6)
    degree8 = from_config({"otype": "SphericalHarmonics", "degree": 8}, 3)
    assert degree8.n_output_dims == 64
    check_gradients(degree8, np.random.default_rng(3).random((2, 3)), np.random.default_rng(0), step=1e-4)


def test_composite_slices_pads_and_concatenates():
    config = {"otype": "Composite", "nested": [
        {"otype": "Identity", "n_dims_to_encode": 1},
        {"otype": "HashGrid", "n_dims_to_encode": 2, "n_levels": 2, "log2_hashmap_size": 6, "base_resolution": 4},
        {"otype": "OneBlob", "n_bins": 2}]}
    encoding = from_config(config, 4)
    assert [p.begin for p in encoding.parts] == [0, 1, 3]
    assert [p.pad for p in encoding.parts] == [1, 0, 0]  # identity's 1 column padded to the grid's 2 features
    assert encoding.n_output_dims == 2 + 4 + 2
    rng = np.random.default_rng(4)
    params = rng.standard_normal(encoding.n_parameters).astype(np.float32)
    x = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    y = encoding.forward(x, params)
    np.testing.assert_array_equal(y[:, 0], x[:, 0])
    np.testing.assert_array_equal(y[:, 1], 1)  # Identity pads with ones, as tcnn does
    grid = encoding.parts[1].encoding
    np.testing.assert_allclose(y[:, 2:6], grid.forward(x[:, 1:3], params))
    check_gradients(encoding, x, rng, params)


def test_a_spherical_harmonics_part_is_padded_in_front_as_tcnn_pads_it():
    encoding = from_config({"otype": "Composite", "nested": [
        {"otype": "SphericalHarmonics", "n_dims_to_encode": 3, "degree": 1},
        {"otype": "HashGrid", "n_levels": 1, "n_features_per_level": 4, "n_dims_to_encode": 2,
         "base_resolution": 4}]}, 5)
    assert encoding.parts[0].pad == 3
    rng = np.random.default_rng(7)
    x = rng.random((2, 5), dtype=np.float32)
    y = encoding.forward(x, encoding.initial_parameters(rng))
    np.testing.assert_array_equal(y[:, :3], 1)
    np.testing.assert_allclose(y[:, 3], 1 / (2 * math.sqrt(math.pi)), rtol=1e-6)
    check_gradients(encoding, x, rng, rng.standard_normal(encoding.n_parameters).astype(np.float32))


def test_the_nrc_preset():
    encoding = from_config({"otype": "NRC"}, 9)
    assert [p.encoding.otype for p in encoding.parts] == ["TriangleWave", "OneBlob", "Identity"]
    assert encoding.n_output_dims == 3 * 12 + 5 * 4 + 1


@pytest.mark.parametrize("config, dims, message", [
    ({"otype": "Fourier"}, 2, "key 'otype' is 'Fourier', which is not an encoding coopnn has"),
    ({"otype": "Frequency", "n_frequencies": 0}, 2, "'n_frequencies' is 0; supported: 1 to 64"),
    ({"otype": "Frequency", "n_frequencies": 2.5}, 2, "'n_frequencies' must be a whole number"),
    ({"otype": "Frequency", "layout": "fourier"}, 2, "'layout' is 'fourier'; supported: tcnn, nerf"),
    ({"otype": "OneBlob", "n_bins": 12}, 2, "'n_bins' is 12; OneBlob takes a power of two"),
    ({"otype": "SphericalHarmonics", "degree": 9}, 3, "'degree' is 9; supported: 1 to 8"),
    ({"otype": "SphericalHarmonics"}, 2, "encodes 3-D directions"),
    ({"otype": "Identity", "scale": "big"}, 2, "'scale' must be a finite number"),
    ({"otype": "Composite"}, 2, "'nested' must be a list"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 3}]}, 2, "encodes 3 input dim"),
    ({"otype": "Composite", "nested": [{"otype": "Identity"}, {"otype": "OneBlob"}]}, 2, "at most one nested"),
    ({"otype": "Composite", "nested": [{"otype": "HashGrid", "n_features_per_level": 3}]}, 2,
     r"encoding.nested\[0\]: key 'n_features_per_level' is 3"),
    ({"otype": "Composite", "reduction": "Sum", "nested": [{"otype": "Identity"}]}, 2, "'reduction' is 'Sum'"),
    ("HashGrid", 2, "an encoding config is a JSON object"),
    ({"otype": "Composite", "nested": [7]}, 2, r"nested\[0\]: an encoding config is a JSON object"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 0}]}, 2, "0 input dimensions"),
])
def test_bad_configs_name_the_key(config, dims, message):
    with pytest.raises(InputError, match=message):
        from_config(config, dims)


def _nested(depth: int) -> dict:
    config = {"otype": "Identity"}
    for _ in range(depth):
        config = {"otype": "Composite", "nested": [config]}
    return config


@pytest.mark.parametrize("config, dims, message", [
    ({"otype": "Identity", "scale": 10 ** 400}, 2, "'scale' must be a finite number"),
    ({"otype": "Identity", "offset": float("inf")}, 2, "'offset' must be a finite number, not inf"),
    ({"otype": "HashGrid", "per_level_scale": 10 ** 400}, 2, "'per_level_scale' must be a finite number"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 2, "dims_to_encode_begin": "0"}]},
     2, r"nested\[0\]: key 'dims_to_encode_begin' must be a whole number >= 0, not '0'"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1, "dims_to_encode_begin": True}]},
     2, "'dims_to_encode_begin' must be a whole number >= 0, not True"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1, "dims_to_encode_begin": -1}]},
     2, "'dims_to_encode_begin' must be a whole number >= 0, not -1"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "dims_to_encode_begin": 1}]}, 2,
     "none where one gives 'dims_to_encode_begin'"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1, "dims_to_encode_begin": 1},
                                       {"otype": "OneBlob"}]}, 2, "none where one gives 'dims_to_encode_begin'"),
    (_nested(3000), 2, "Composites nest 8 deep at most"),
])
def test_hostile_values_name_the_key(config, dims, message):
    with pytest.raises(InputError, match=message):
        from_config(config, dims)


def test_composites_nest_eight_deep_and_overlapping_columns_are_read_twice():
    assert from_config(_nested(8), 2).n_output_dims == 2
    overlapping = from_config({"otype": "Composite", "nested": [
        {"otype": "Identity", "n_dims_to_encode": 2, "dims_to_encode_begin": 0},
        {"otype": "Identity", "n_dims_to_encode": 2, "dims_to_encode_begin": 1}]}, 3)
    x = np.array([[1, 2, 3]], np.float32)
    np.testing.assert_array_equal(overlapping.forward(x, EMPTY), [[1, 2, 2, 3]])
