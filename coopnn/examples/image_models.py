"""The models `coopnn fit-image` trains: `--encoding frequency` (coopnn's NeRF-style frequency encoding and an MLP,
Adam), `hashgrid` (tiny-cuda-nn's image configuration, its `data/config_hash.json`: a 16-level hash grid and a
64-wide MLP of 2 hidden layers, RelativeL2, Adam) or a tiny-cuda-nn JSON config file; and the megapixel image the
tcnn configurations learn by default.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import coopnn
from coopnn.errors import CoopnnError

TCNN_IMAGE_CONFIG: dict[str, Any] = {
    "loss": {"otype": "RelativeL2"},
    "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15,
                  "l2_reg": 1e-6},
    "encoding": {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                 "base_resolution": 16, "per_level_scale": 1.5},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 2},
}
MEGAPIXEL_IMAGE = ("slangpy", "data/test_images/monalisa.jpg")  # 1024 x 1024, installed with slangpy


def megapixel_image_path() -> Path:
    """The 1024 x 1024 photograph slangpy ships (found without importing slangpy); CoopnnError without it."""
    package, inside = MEGAPIXEL_IMAGE
    spec = importlib.util.find_spec(package)
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / inside
        if path.is_file():
            return path
    raise CoopnnError(f"the default megapixel image ({inside}) ships with {package} (pip install {package}); "
                      "or name an image of your own")


@dataclass
class ImageModel:
    model: coopnn.Model
    trainer: coopnn.Trainer
    title: str  # for the PSNR plot
    tcnn: bool  # whether a tiny-cuda-nn config made it (megapixel defaults)


def tcnn_config(encoding: str) -> dict[str, Any]:
    """tcnn's image config for "hashgrid"; a JSON file's config otherwise (a whole config, missing sections taken
    from the image config, or an encoding config alone)."""
    if encoding == "hashgrid":
        return TCNN_IMAGE_CONFIG
    try:
        config = json.loads(Path(encoding).read_text())
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested past the decoder's depth
        raise CoopnnError(f"--encoding {encoding!r} is neither frequency, hashgrid nor a readable JSON file: "
                          f"{e}") from e
    if not isinstance(config, dict):
        raise CoopnnError(f"{encoding!r} holds {type(config).__name__}, not a tiny-cuda-nn config object")
    if "otype" in config:
        return {**TCNN_IMAGE_CONFIG, "encoding": config}
    return {**TCNN_IMAGE_CONFIG, **config}


def image_model(encoding: str, *, hidden: Sequence[int], octaves: int, lr: float | None, seed: int, backend: str,
                weights: str) -> ImageModel:
    """The model and trainer of `--encoding` (`lr` replaces the config's learning rate where given)."""
    if encoding == "frequency":
        model = coopnn.mlp(2, hidden, 3, encoding="frequency", octaves=octaves, seed=seed, backend=backend,
                           weights=weights)
        trainer = coopnn.Trainer(model, "l2", coopnn.optim.Adam(lr=1e-2 if lr is None else lr, betas=(0.9, 0.99)),
                                 seed=seed)
        return ImageModel(model, trainer, f"{octaves} octaves, MLP {list(hidden)}", False)
    config = tcnn_config(encoding)
    optimizer = config.get("optimizer", {})
    if lr is not None and isinstance(optimizer, dict):  # another value is refused by from_tcnn_config, naming it
        config = {**config, "optimizer": {**optimizer, "learning_rate": lr}}
    model, trainer = coopnn.from_tcnn_config(config, 2, 3, seed=seed, backend=backend, weights=weights)
    enc = next(n.attrs["encoding"] for n in model.graph.nodes if n.op.value == "encoding")
    name = encoding if encoding == "hashgrid" else os.path.basename(encoding)
    return ImageModel(model, trainer, f"{name}, {enc.n_parameters:,} encoding parameters", True)
