"""The checkpoint file format: what it stores, and malformed files (the Trainer's round trip is in test_trainer)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from coopnn.errors import InputError, ModelFormatError
from coopnn.train.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from coopnn.train.optim import Adam


def _checkpoint() -> Checkpoint:
    params = {"layers.0.weight": np.ones((2, 3), np.float32), "a/b.bias": np.zeros(2, np.float32)}
    optimizer = Adam(lr=0.1)
    optimizer.update({k: v.copy() for k, v in params.items()}, params)
    return Checkpoint(params, optimizer.state_dict(), {"steps": 1, "rng": {"state": 5}})


def test_round_trip_and_layout(tmp_path):
    path = tmp_path / "c.safetensors"
    original = _checkpoint()
    write_checkpoint(path, original)
    with safe_open(str(path), framework="numpy") as f:
        assert set(f.keys()) == {"parameter/layers.0.weight", "parameter/a/b.bias", "optimizer/m/layers.0.weight",
                                 "optimizer/m/a/b.bias", "optimizer/v/layers.0.weight", "optimizer/v/a/b.bias"}
        assert f.metadata()["coopnn"] == "checkpoint 1"
    back = read_checkpoint(path)
    assert back.trainer == original.trainer
    assert {k: v for k, v in back.optimizer.items() if k != "slots"} == {
        "type": "adam", "hyperparameters": original.optimizer["hyperparameters"], "step": 1}
    for name, array in original.parameters.items():
        np.testing.assert_array_equal(back.parameters[name], array)
        for slot in ("m", "v"):
            np.testing.assert_array_equal(back.optimizer["slots"][slot][name], original.optimizer["slots"][slot][name])


def test_malformed_checkpoints(tmp_path):
    path = tmp_path / "c.safetensors"
    save_file({"parameter/w": np.ones(2, np.float32)}, str(path), metadata={"coopnn": "checkpoint 1"})
    with pytest.raises(ModelFormatError, match="malformed metadata"):
        read_checkpoint(path)
    metadata = {"coopnn": "checkpoint 1", "optimizer": '{"type": "adam", "slot_names": ["m"]}', "trainer": "{}"}
    save_file({"stray": np.ones(2, np.float32)}, str(path), metadata=metadata)
    with pytest.raises(ModelFormatError, match="unexpected tensor 'stray'"):
        read_checkpoint(path)
    save_file({"optimizer/q/w": np.ones(2, np.float32)}, str(path), metadata=metadata)
    with pytest.raises(ModelFormatError, match="unexpected tensor 'optimizer/q/w'"):
        read_checkpoint(path)


def test_a_folder_is_refused_before_anything_is_written(tmp_path):
    """A folder target used to get a temporary file in the folder's parent (`/` for `/tmp`) and an error naming it."""
    (tmp_path / "runs").mkdir()
    with pytest.raises(InputError, match=re.escape(repr(str(tmp_path / "runs"))) + ".*is a folder"):
        write_checkpoint(tmp_path / "runs", _checkpoint())
    assert [p.name for p in tmp_path.iterdir()] == ["runs"] and not list((tmp_path / "runs").iterdir())
