"""Encoding configs the ONNX, PyTorch and backend tests share: every otype, interpolation and input dimension count,
and the inputs they run on (edge values, and for grids inputs outside [0, 1])."""

from __future__ import annotations

import numpy as np

ENCODINGS = [
    ({"otype": "Identity", "scale": 2.0, "offset": 0.5}, 2),
    ({"otype": "Frequency", "n_frequencies": 4}, 2),
    ({"otype": "Frequency", "layout": "nerf", "n_frequencies": 3}, 3),
    ({"otype": "TriangleWave", "n_frequencies": 5}, 2),
    ({"otype": "OneBlob", "n_bins": 8}, 2),
    ({"otype": "SphericalHarmonics", "degree": 8}, 3),
    ({"otype": "HashGrid", "n_levels": 6, "log2_hashmap_size": 8, "base_resolution": 4, "per_level_scale": 1.5}, 2),
    ({"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 4, "interpolation": "Nearest",
      "log2_hashmap_size": 6}, 3),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 1, "interpolation": "Smoothstep"}, 1),
    ({"otype": "TiledGrid", "n_levels": 3, "n_features_per_level": 8, "base_resolution": 3}, 4),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1},
                                       {"otype": "HashGrid", "n_dims_to_encode": 2, "n_levels": 2},
                                       {"otype": "SphericalHarmonics", "degree": 2}]}, 6),
    ({"otype": "Composite", "nested": [{"otype": "SphericalHarmonics", "n_dims_to_encode": 3, "degree": 1},
                                       {"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 4}]}, 5),
]
IDS = [f"{config['otype']}-{config.get('interpolation', config.get('layout', ''))}-{n}d" for config, n in ENCODINGS]


def inputs(config, n_in):
    x = np.random.default_rng(3).random((400, n_in), dtype=np.float32)
    if "Grid" in config["otype"]:
        x[:40] = x[:40] * 4 - 2  # outside [0, 1]: the tables wrap around as tcnn's do
    x[40] = 0
    x[41] = 1
    x[42] = np.nextafter(np.float32(1), np.float32(0))
    return x
