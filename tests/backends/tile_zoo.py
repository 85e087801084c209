"""The GPU checks both cooperative-matrix tile backends (coopmat2, coopmat) share: a zoo model against their float16
arithmetic (`tests.backends.tile_reference`, for each weight format) at ragged batch sizes (whole tiles, part tiles,
several chunks), across chunk boundaries, and with new parameters taken in place."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError
from coopnn.layouts.formats import weight_format
from tests.backends.tile_reference import run_tile_emulation
from tests.conftest import ROOT, random_feeds

RTOL, ATOL = 1e-3, 2.5e-3
BATCHES = (1, 17, 1000, (1 << 16) + 3)


def model_path(stem: str):
    return ROOT / "models" / f"{stem}.onnx"


def assert_matches_emulation(model, feeds, weights: str = "fp16") -> None:
    got = model.run(feeds)
    got = got if isinstance(got, dict) else {model.outputs[0].name: got}
    want = run_tile_emulation(model.graph, feeds, weight_format(weights))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{model.graph.name}:{name} at {next(iter(feeds.values())).shape[0]}")


def check_zoo_model(stem: str, backend: str, weights: str = "fp16") -> None:
    with coopnn.load(model_path(stem), backend=backend, weights=weights) as model:
        assert model.backend == backend
        for batch in BATCHES:
            assert_matches_emulation(model, random_feeds(model, batch, seed=batch), weights)
        assert model.last_gpu_ms is not None and model.last_gpu_ms > 0


def check_chunks_of_part_tiles(stem: str, backend: str) -> None:
    """Chunks of 100 samples: each ends inside a tile of 64, whose last work-group must keep to the chunk's samples."""
    with coopnn.load(model_path(stem), backend=backend, weights="fp16") as model:
        model._executable.chunk = 100
        assert_matches_emulation(model, random_feeds(model, 1000, seed=3))
        assert model._executable.last_timing.chunks == 10


def check_refused(stem: str, backend: str) -> None:
    with pytest.raises(CompileError, match=f"backend '{backend}' cannot run model .*: the {backend} target cannot "
                                           f"run kernel '{stem}'"):
        coopnn.load(model_path(stem), backend=backend, weights="fp16")


def check_new_parameters_in_place(stem: str, backend: str) -> None:
    with coopnn.load(model_path(stem), backend=backend, weights="fp16") as model:
        executable = model._executable
        model.set_parameters({name: 0.5 * value - 0.01 for name, value in model.parameters().items()})
        assert_matches_emulation(model, random_feeds(model, 100, seed=5))
        assert model._executable is executable, "new parameters were not taken in place"
