"""Encoded models on the cooperative-vector backend (a GPU with VK_NV_cooperative_vector): every encoding test model
against the float16 reference (`encoding_cases.fp16_reference`: float32 encoding of the unrounded input from
float16-rounded tables, float16 products), tiny-cuda-nn's image configuration at 2^21 samples, its GPU time
printed, and training behind encodings without parameters (the step kernel encodes the batch; per-sample and tiled
step kernels) against the numpy oracle's gradients and 20-step loss curve."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.backends.portable.test_encoding_training import FIXED
from tests.shaders.targets.encoding_cases import EVERY, EVERY_IDS, assert_matches_fp16_reference, fp16_reference

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]
RTOL, ATOL = 1e-3, 2.5e-3
# tiny-cuda-nn's image configuration (`../shared/gpu/h200-anchors.md`): its encoding and its 64-wide MLP
IMAGE_ENCODING = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                  "base_resolution": 16, "per_level_scale": 1.5}
LARGE_BATCH = 1 << 21
CHECKED_ROWS = 1 << 14


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_encoded_model_matches_the_fp16_reference(config, n_in):
    assert_matches_fp16_reference(config, n_in, "coopvec")


def test_the_image_configuration_at_2_pow_21_samples(capsys):
    with coopnn.mlp(2, [64, 64], 3, encoding=IMAGE_ENCODING, backend="coopvec", weights="fp16",
                    seed=3) as model:
        x = np.random.default_rng(4).random((LARGE_BATCH, 2), dtype=np.float32)
        for _ in range(3):  # the first runs make the pipeline and the host buffers
            got = model.run(x)
        rows = np.random.default_rng(5).choice(LARGE_BATCH, CHECKED_ROWS, replace=False)
        np.testing.assert_allclose(got[rows], fp16_reference(model.graph, x[rows]), rtol=RTOL, atol=ATOL)
        with capsys.disabled():
            print(f"\n  coopvec tcnn image configuration, 2^21 samples: {model.last_gpu_ms:.3f} ms GPU")


@pytest.mark.parametrize("step", ["coopvec", "tiled"])
@pytest.mark.parametrize("config, n_in", FIXED, ids=[c["otype"] + c.get("layout", "") for c, _ in FIXED])
def test_training_behind_an_encoding_matches_the_oracle(config, n_in, step):
    graph = rounded(mlp_graph(n_in, [32, 32], 3, encoding=config, seed=3))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step=step)
    # the encodings' own domain, [0, 1]: outside it a spherical harmonic of degree 4 grows past what float16 keeps
    assert_matches_on_random_data(session, graph, "l2", n_in, 3, 256, low=0.0)
