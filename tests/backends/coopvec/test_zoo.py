"""Every zoo model on the cooperative-vector backend against the float16 emulation of what it computes (inputs,
weights, biases and each matrix-vector result rounded to float16; `run_fp16_emulation`), at several batch sizes."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.layouts.formats.emulation import run_fp16_emulation
from tests.conftest import ZOO, random_feeds

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]
RTOL, ATOL = 1e-3, 2.5e-3
LARGE_BATCH = 1 << 21
# At 2^21 samples every output row is computed; the reference covers these many rows, spread over the whole batch,
# plus the first and last chunk-sized stretches where indexing mistakes would show.
CHECKED_ROWS = 1 << 15
EDGE_ROWS = 1024


def _as_dict(model, out):
    return out if isinstance(out, dict) else {model.outputs[0].name: out}


def _compare(model, got, feeds, rows=None):
    if rows is not None:
        feeds = {k: v[rows] for k, v in feeds.items()}
        got = {k: v[rows] for k, v in got.items()}
    want = run_fp16_emulation(model.graph, feeds)
    assert set(got) == set(want)
    for name in want:
        if want[name].dtype == np.bool_:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{model.graph.name}:{name}")
        else:
            np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{model.graph.name}:{name}")


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_matches_the_fp16_reference(path):
    with coopnn.load(path, backend="coopvec", weights="fp16") as model:
        assert model.backend == "coopvec"
        for batch in (1, 31, 65, 1000):
            feeds = random_feeds(model, batch, seed=batch)
            _compare(model, _as_dict(model, model.run(feeds)), feeds)
        assert model.last_gpu_ms is not None and model.last_gpu_ms > 0


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_at_2_pow_21_samples(path):
    with coopnn.load(path, backend="coopvec", weights="fp16") as model:
        feeds = random_feeds(model, LARGE_BATCH, seed=21)
        got = _as_dict(model, model.run(feeds))
    spread = np.random.default_rng(0).choice(LARGE_BATCH, CHECKED_ROWS, replace=False)
    rows = np.unique(np.concatenate([np.arange(EDGE_ROWS), LARGE_BATCH - 1 - np.arange(EDGE_ROWS), spread]))
    _compare(model, got, feeds, rows)
