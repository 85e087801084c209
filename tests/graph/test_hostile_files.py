"""Hostile model and parameter files, fuzzed (hypothesis): every zoo model and a safetensors parameter file, with
bits flipped, bytes overwritten or inserted, or the file truncated, either loads and runs or fails with a
`CoopnnError` subclass, never another exception, and quickly. Zoo models with an initializer moved to external data
that points outside the model's folder (by a path, through a symlink, to a device or a FIFO), at ranges of any offset
and length, or with a claimed 2^40-element (or other huge) shape fail with a `ModelFormatError` within 5 s and 1 GiB
of memory, and open no file outside the model's folder."""

from __future__ import annotations

import builtins
import functools
import io
import os
import resource
import time
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

import coopnn
from coopnn.errors import CoopnnError, ModelFormatError
from tests.conftest import ROOT

MODELS = sorted(ROOT.glob("models/*.onnx"))
CASE_SECONDS = 5  # per case: far above what one takes, so a hang or a runaway allocation fails the test
CASE_MEMORY_BYTES = 1 << 30
OFFSET = 16  # where a tensor's bytes start in its external file
HUGE_FILE_BYTES = (1 << 42) + OFFSET  # a sparse file: as large as a 2^40-element float32 tensor claims


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


def _load_and_run(**load) -> CoopnnError | None:
    """The typed error loading and running ended in (None when it ran), within CASE_SECONDS and CASE_MEMORY_BYTES."""
    started, peak = time.monotonic(), _peak_rss()
    try:
        with coopnn.load(backend="numpy", **load) as model:
            model.run({v.name: np.zeros((2,) + tuple(v.shape[1:]), np.float32) for v in model.inputs})
        error = None
    except CoopnnError as e:
        error = e  # a typed error naming what is wrong is the expected end of most cases
    assert time.monotonic() - started < CASE_SECONDS
    assert _peak_rss() - peak < CASE_MEMORY_BYTES
    return error


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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


# ----- external data and claimed sizes --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """root/model: where each case's model and its external data file go, beside symlinks that lead out of it, a
    symlink loop, a FIFO (opening it would hang), a subfolder and a sparse HUGE_FILE_BYTES file; root/outside: the
    secret the hostile locations point at, holding the same bytes as the real data file."""
    root = tmp_path_factory.mktemp("hostile_external")
    model, outside = root / "model", root / "outside"
    (model / "sub").mkdir(parents=True)
    outside.mkdir()
    (model / "to_secret.bin").symlink_to(outside / "secret.bin")
    (model / "to_outside").symlink_to(outside, target_is_directory=True)
    (model / "loop_a").symlink_to(model / "loop_b")
    (model / "loop_b").symlink_to(model / "loop_a")
    (model / "to_dev_zero").symlink_to("/dev/zero")
    os.mkfifo(model / "fifo")
    with open(model / "huge.bin", "wb") as f:
        f.truncate(HUGE_FILE_BYTES)
    return root


def _hostile_locations(root: Path) -> list[str]:
    outside = root / "outside"
    return ["../outside/secret.bin", str(outside / "secret.bin"), "to_secret.bin", "to_outside/secret.bin",
            "sub/../../outside/secret.bin", "..\\outside\\secret.bin", "C:\\outside\\secret.bin",
            f"file://{outside / 'secret.bin'}", "loop_a", "to_dev_zero", "/dev/zero", "/proc/self/environ", "fifo",
            "sub", "", ".", "missing.bin", "weights.bin\x00", "w" * 5000]


@functools.lru_cache(maxsize=None)
def _zoo_bytes(path: Path) -> bytes:
    return path.read_bytes()


def _as_int(text: str) -> int | None:
    """`text` read as the loader reads an offset or a length (Python's int(), which takes '+1' and ' 7 ' but not
    '²'), or None where it refuses it."""
    try:
        return int(text)
    except ValueError:
        return None


@st.composite
def external_cases(draw, root: Path) -> tuple[onnx.ModelProto, bool]:
    """A zoo model with one initializer in external data made hostile, and whether it must fail (a random location or
    range may happen to be a valid one)."""
    proto = onnx.ModelProto.FromString(_zoo_bytes(draw(st.sampled_from(MODELS))))
    tensor = draw(st.sampled_from(list(proto.graph.initializer)))
    data = tensor.raw_data
    for folder in (root / "model", root / "outside"):
        (folder / ("weights.bin" if folder.name == "model" else "secret.bin")).write_bytes(b"\0" * OFFSET + data)
    kind = draw(st.sampled_from(["location", "range", "claimed size"]))
    location, offset, length, must_fail = "weights.bin", str(OFFSET), str(len(data)), True
    if kind == "location":
        location = draw(st.sampled_from(_hostile_locations(root)) | st.text(max_size=24))
        must_fail = location in _hostile_locations(root) or not (root / "model" / location).is_file()
    elif kind == "range":
        number = st.integers(-(1 << 70), 1 << 70) | st.sampled_from([0, OFFSET, len(data), 1 << 63, 1 << 64, -1])
        offset = draw(number.map(str) | st.text(max_size=8))
        length = draw(st.none() | number.map(str) | st.text(max_size=8))
        start, claimed_length = _as_int(offset), None if length is None else _as_int(length)
        end = (None if start is None else OFFSET + len(data) if length is None
               else start + claimed_length if claimed_length == len(data) else None)
        must_fail = start is None or start < 0 or end is None or end - start != len(data) or end > OFFSET + len(data)
    else:
        claimed = draw(st.just(40) | st.integers(31, 62))  # log2 of the elements claimed
        first = draw(st.integers(0, claimed))
        tensor.dims[:] = [1 << first, 1 << (claimed - first)] if first else [1 << claimed]
        if draw(st.booleans()):  # the data stays inline; else it is said to be in the huge sparse file
            return proto, True
        location = "huge.bin"
        length = draw(st.none() | st.just(str((1 << claimed) * 4)))
    tensor.ClearField("raw_data")
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            tensor.external_data.add(key=key, value=value)
    tensor.data_location = TensorProto.EXTERNAL
    return proto, must_fail


class _OpenSpy:
    """Every file opened while active, resolved."""

    def __init__(self):
        self.paths: list[str] = []
        self._patches = [mock.patch.object(builtins, "open", self._wrap(builtins.open)),
                         mock.patch.object(io, "open", self._wrap(io.open)),
                         mock.patch.object(os, "open", self._wrap(os.open))]

    def _wrap(self, real):
        def spy(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                self.paths.append(os.path.realpath(file))
            return real(file, *args, **kwargs)
        return spy

    def __enter__(self):
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in reversed(self._patches):
            patch.stop()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_external_data_and_claimed_sizes_fail_typed_without_reading_outside(folders, data):
    proto, must_fail = data.draw(external_cases(folders))
    path = folders / "model" / "case.onnx"
    path.write_bytes(proto.SerializeToString())
    with _OpenSpy() as spy:
        error = _load_and_run(model=path)
    assert isinstance(error, ModelFormatError) or not must_fail
    model_folder = os.path.realpath(folders / "model")
    strays = [p for p in spy.paths if p.startswith(os.path.realpath(folders)) and not p.startswith(model_folder)]
    assert not strays and not any(p.startswith(("/dev/", "/proc/")) for p in spy.paths)
    assert os.path.realpath(folders / "model" / "fifo") not in spy.paths
