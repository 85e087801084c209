"""Reading an ONNX model safely: a path, bytes or ModelProto in; a ModelProto with its external data filled in out.

External data is read by this module, never by onnx's loader, and only from regular files inside the model's folder:
locations that are absolute, climb out with "..", or resolve (through symlinks) outside the folder are refused
before anything is opened, and so is a range whose length is not what the tensor's shape declares, a tensor
declaring more than `tensors.MAX_TENSOR_BYTES`, or a model whose external tensors together declare more than
MAX_EXTERNAL_BYTES: a hostile model cannot make coopnn read more than its tensors hold, nor read without bound.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterator

import onnx
from onnx import GraphProto, TensorProto

from coopnn.errors import ModelFormatError
from coopnn.graph.onnx.tensors import declared_bytes

# All external data one model may hold.
MAX_EXTERNAL_BYTES = 1 << 32


def load_proto(model: str | os.PathLike | bytes | onnx.ModelProto,
               base_dir: str | os.PathLike | None) -> onnx.ModelProto:
    """Parse `model` and load its external data from `base_dir` (default: the folder of a model given by path)."""
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)  # external data is filled in below: never touch the caller's proto
        folder = base_dir
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), "the given bytes")
        folder = base_dir
    elif isinstance(model, (str, os.PathLike)):
        path = Path(model)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ModelFormatError(f"cannot read model file {str(path)!r}: {e.strerror or e}") from e
        proto = _parse(data, repr(str(path)))
        folder = base_dir if base_dir is not None else path.parent
    else:
        raise ModelFormatError(f"a model is a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
    _load_external_data(proto, None if folder is None else Path(folder))
    return proto


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError, or RuntimeError from its C++ parser
        raise ModelFormatError(f"{source} is not an ONNX model: {e}") from e
    if not proto.HasField("graph"):
        raise ModelFormatError(f"{source} is not an ONNX model: it has no graph")
    return proto


def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    """Every tensor stored in `graph` and its subgraphs: initializers and tensor-valued node attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values
                yield attr.sparse_tensor.indices
            if attr.HasField("g"):
                yield from _graph_tensors(attr.g)
            for sub in attr.graphs:
                yield from _graph_tensors(sub)


def _load_external_data(proto: onnx.ModelProto, folder: Path | None) -> None:
    total = 0
    for tensor in _graph_tensors(proto.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        what = f"tensor {tensor.name!r} (external data {location!r})"
        if folder is None:
            raise ModelFormatError(f"{what} needs the model's folder; import the model from its path or pass base_dir")
        path = _inside(folder, location, what)
        declared = declared_bytes(tensor, what)
        total += declared
        if total > MAX_EXTERNAL_BYTES:
            raise ModelFormatError(f"{what} takes the model's external data past {MAX_EXTERNAL_BYTES} bytes, more "
                                   f"than coopnn reads for one model")
        tensor.raw_data = _read_range(path, info, declared, what)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _inside(folder: Path, location: str, what: str) -> Path:
    """The file `location` names, refused unless it is a regular file inside `folder` once symlinks are resolved."""
    if not location:
        raise ModelFormatError(f"{what} gives no file location")
    for flavour in (PurePosixPath(location), PureWindowsPath(location)):
        if flavour.is_absolute() or flavour.drive or flavour.root or ".." in flavour.parts:
            raise ModelFormatError(f"{what} must name a file inside the model's folder, without '..' or a root")
    try:
        root = folder.resolve()
        target = (root / location).resolve()
        if root != target and root not in target.parents:
            raise ModelFormatError(f"{what} resolves to {str(target)!r}, outside the model's folder {str(root)!r}")
        if not target.is_file():
            raise ModelFormatError(f"{what} is not a regular file in the model's folder")
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a NUL byte, a name too long
        raise ModelFormatError(f"{what} cannot be resolved in the model's folder: {e}") from e
    return target


def _read_range(path: Path, info: dict[str, str], declared: int, what: str) -> bytes:
    """The tensor's bytes: from its offset, `length` of them or to the end of the file, which must be the `declared`
    bytes."""
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else None
    except ValueError as e:
        raise ModelFormatError(f"{what} has a malformed offset or length: {e}") from e
    if offset < 0 or length not in (None, declared):
        raise ModelFormatError(f"{what} asks for {length} bytes at offset {offset}; its shape declares {declared}")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            end = size if length is None else offset + length
            if end > size or end - offset != declared:
                raise ModelFormatError(f"{what} asks for bytes {offset}..{end} of a {size}-byte file; its shape "
                                       f"declares {declared} bytes")
            f.seek(offset)
            data = f.read(declared)
    except OSError as e:
        raise ModelFormatError(f"{what} cannot be read: {e.strerror or e}") from e
    if len(data) != declared:
        raise ModelFormatError(f"{what} ended after {len(data)} of {declared} bytes")
    return data
