"""Hostile model and parameter files, fuzzed (hypothesis): every zoo model and a safetensors parameter file, with
bits flipped, bytes overwritten or inserted, or the file truncated, either loads and runs or fails with a
`CoopnnError` subclass, never another exception, and quickly."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import coopnn
from coopnn.errors import CoopnnError
from tests.conftest import ROOT

MODELS = sorted(ROOT.glob("models/*.onnx"))
CASE_SECONDS = 5  # per case: far above what one takes, so a hang or a runaway allocation fails the test


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """`data` truncated, or with bits flipped, bytes overwritten or bytes inserted at drawn places."""
    kind = draw(st.sampled_from(["flip", "overwrite", "insert", "truncate"]))
    out = bytearray(data)
    if kind == "truncate":
        return bytes(out[:draw(st.integers(0, len(out) - 1))])
    for _ in range(draw(st.integers(1, 16))):
        where = draw(st.integers(0, len(out) - 1))
        if kind == "flip":
            out[where] ^= 1 << draw(st.integers(0, 7))
        elif kind == "overwrite":
            out[where] = draw(st.integers(0, 255))
        else:
            out[where:where] = draw(st.binary(min_size=1, max_size=8))
    return bytes(out)


def _load_and_run(**load) -> None:
    started = time.monotonic()
    try:
        with coopnn.load(backend="numpy", **load) as model:
            model.run({v.name: np.zeros((2,) + tuple(v.shape[1:]), np.float32) for v in model.inputs})
    except CoopnnError:
        pass  # a typed error naming what is wrong is the expected end of most cases
    assert time.monotonic() - started < CASE_SECONDS


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_zoo_model_runs_or_fails_with_a_typed_error(path, data):
    _load_and_run(model=data.draw(mutated(path.read_bytes())))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_parameter_file_runs_or_fails_with_a_typed_error(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("parameters")
    model = ROOT / "models" / "mlp_32_64x4_16.onnx"
    with coopnn.load(model, backend="numpy") as original:
        original.save_parameters(folder / "good.safetensors")
    damaged = folder / "damaged.safetensors"
    damaged.write_bytes(data.draw(mutated((folder / "good.safetensors").read_bytes())))
    _load_and_run(model=model, parameters_file=damaged)
