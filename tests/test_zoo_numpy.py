"""Every zoo model on the numpy backend against onnxruntime (fp32 tolerance) at several batch sizes."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from tests.conftest import BENCHMARK_MLPS, ZOO, ort_run, random_feeds


def test_zoo_has_the_benchmark_models_and_at_least_ten():
    names = {p.stem for p in ZOO}
    assert set(BENCHMARK_MLPS) <= names
    assert len(names) >= 10


@pytest.mark.parametrize("batch", [1, 7, 1000, 65536])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_matches_onnxruntime(path, batch):
    with coopnn.load(path, backend="numpy") as model:
        feeds = random_feeds(model, batch, seed=batch)
        got = model.run(feeds)
        if not isinstance(got, dict):
            got = {model.outputs[0].name: got}
    want = ort_run(path, feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=f"{path.stem}:{name}")
