"""Training checkpoints: parameters, optimizer state and trainer state in one safetensors file.

Tensors are stored as `parameter/{name}` and `optimizer/{slot}/{name}` (float32); the optimizer's type,
hyperparameters and step count and the trainer's own state (its step count and the batch sampler's random state)
are JSON in the file's metadata. Reading goes through `parameter_file.read_tensors`, which checks every tensor.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from coopnn.disk_cache import refuse_folder
from coopnn.errors import ModelFormatError
from coopnn.graph.parameter_file import FORMAT_KEY, read_tensors, write_tensors

CHECKPOINT_FORMAT = "checkpoint 1"
_PARAMETER = "parameter/"
_OPTIMIZER = "optimizer/"


@dataclass
class Checkpoint:
    parameters: dict[str, np.ndarray]
    optimizer: dict[str, Any]  # an Optimizer.state_dict()
    trainer: dict[str, Any]


def write_checkpoint(path: str | os.PathLike, checkpoint: Checkpoint) -> None:
    """Write `checkpoint` to the file `path` (through a temporary file beside it and a rename); InputError naming
    `path` when it is a folder, before anything is written."""
    refuse_folder(path, "checkpoint")
    tensors = {_PARAMETER + name: array for name, array in checkpoint.parameters.items()}
    for slot, arrays in checkpoint.optimizer["slots"].items():
        tensors.update((f"{_OPTIMIZER}{slot}/{name}", array) for name, array in arrays.items())
    optimizer = {k: v for k, v in checkpoint.optimizer.items() if k != "slots"}
    optimizer["slot_names"] = list(checkpoint.optimizer["slots"])
    metadata = {FORMAT_KEY: CHECKPOINT_FORMAT, "optimizer": json.dumps(optimizer),
                "trainer": json.dumps(checkpoint.trainer)}
    write_tensors(path, tensors, metadata)


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    tensors, metadata = read_tensors(path, "checkpoint")
    try:
        optimizer = json.loads(metadata["optimizer"])
        trainer = json.loads(metadata["trainer"])
        slots = {slot: {} for slot in optimizer.pop("slot_names")}
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
        raise ModelFormatError(f"checkpoint file {os.fspath(path)!r} has malformed metadata: {e!r}") from e
    parameters = {}
    for key, array in tensors.items():
        if key.startswith(_PARAMETER):
            parameters[key[len(_PARAMETER):]] = array
            continue
        slot, _, name = key[len(_OPTIMIZER):].partition("/")
        if not key.startswith(_OPTIMIZER) or slot not in slots:
            raise ModelFormatError(f"checkpoint file {os.fspath(path)!r} holds an unexpected tensor {key!r}")
        slots[slot][name] = array
    return Checkpoint(parameters, {**optimizer, "slots": slots}, trainer)
