"""Parameter files: a model's parameters in safetensors, keyed by stable parameter name, written and read back
safely (`Model.save_parameters`, `coopnn.load(..., parameters_file=)`).

Reading trusts nothing in the file: the header is parsed by safetensors (no pickle, no code), every tensor must be
float16/32/64 and finite, and a file given for a model must hold exactly that model's parameters with their shapes.
Anything else raises ModelFormatError naming the file and the tensor. The file is the one the caller names, so no
folder restriction applies (unlike the external data an ONNX file points to, which `graph.onnx.loading` confines).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save

from coopnn.disk_cache import write_atomic
from coopnn.errors import ModelFormatError
from coopnn.graph.ir import Graph
from coopnn.graph.parameters import mismatches, parameters, with_parameters

FORMAT_KEY = "coopnn"
WEIGHTS_FORMAT = "weights 1"
_FLOAT_DTYPES = {"F16", "F32", "F64"}  # safetensors names of the element types a parameter may be stored in


def write_tensors(path: str | os.PathLike, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> None:
    """Write float32 copies of `tensors` and the string `metadata` to a safetensors file."""
    arrays = {name: np.ascontiguousarray(array, dtype=np.float32) for name, array in tensors.items()}
    try:
        # through a temporary file and a rename: a crash mid-write leaves the previous file whole
        write_atomic(Path(path), save(arrays, metadata=dict(metadata)), make_folder=False)
    except (OSError, SafetensorError) as e:
        raise ModelFormatError(f"cannot write {os.fspath(path)!r}: {e}") from e


def read_tensors(path: str | os.PathLike, kind: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The float32 tensors and the metadata of the safetensors file `path` whose metadata says it is a `kind` file."""
    where = f"{kind} file {os.fspath(path)!r}"
    try:
        with safe_open(os.fspath(path), framework="numpy") as f:
            metadata = dict(f.metadata() or {})
            if metadata.get(FORMAT_KEY, "").split(" ")[0] != kind:
                raise ModelFormatError(f"{where} is a safetensors file but not a coopnn {kind} file")
            tensors = {name: _float_tensor(f, name, where) for name in f.keys()}
    except (OSError, SafetensorError, TypeError, ValueError) as e:
        raise ModelFormatError(f"cannot read {where}: {e}") from e
    return tensors, metadata


def _float_tensor(f, name: str, where: str) -> np.ndarray:
    dtype = f.get_slice(name).get_dtype()
    if dtype not in _FLOAT_DTYPES:
        raise ModelFormatError(f"{where}: tensor {name!r} has element type {dtype}; parameters are F16, F32 or F64")
    array = np.asarray(f.get_tensor(name), dtype=np.float32)
    if not np.all(np.isfinite(array)):
        raise ModelFormatError(f"{where}: tensor {name!r} holds NaN or infinite values")
    return array


def save_parameters(graph: Graph, path: str | os.PathLike) -> None:
    """Write the parameters of `graph` to a safetensors file keyed by their stable names."""
    write_tensors(path, parameters(graph), {FORMAT_KEY: WEIGHTS_FORMAT, "model": graph.name})


def check_complete(graph: Graph, values: Mapping[str, np.ndarray], where: str) -> None:
    """ModelFormatError unless `values` are exactly the parameters of `graph`, each with its shape."""
    problems = mismatches(graph, values)
    problems += [f"{name!r} is missing" for name in parameters(graph) if name not in values]
    if problems:
        raise ModelFormatError(f"{where} does not fit model {graph.name!r}: {'; '.join(problems)}")


def load_parameters(graph: Graph, path: str | os.PathLike) -> Graph:
    """`graph` with every parameter replaced by the tensor of the same name in the weights file `path`."""
    tensors, _ = read_tensors(path, "weights")
    check_complete(graph, tensors, f"weights file {os.fspath(path)!r}")
    return with_parameters(graph, tensors)
