"""Loading a tiny-cuda-nn parameter buffer (`NetworkWithInputEncoding::params()`, float16 or float32, as tcnn's
`save` or the PyTorch bindings' `params` hold it) into a coopnn model made from the same config.

tcnn's buffer is the network's weight matrices, then the encoding's parameters. Its MLP layers are row-major
[out, in] matrices without biases: the first takes the encoding's output padded to a multiple of 16 columns, the
last gives n_output_dims padded to a multiple of 16 rows, the hidden ones are n_neurons square. The padded input
columns hold a constant (1 after Identity, Frequency, TriangleWave, OneBlob and SphericalHarmonics, which writes
them in front of its outputs; 0 after a grid), so their weights act as a first-layer bias: coopnn's layers.0.bias
is their sum weighted by that constant, its other biases are zero, and the padded output rows are dropped. The
encoding's parameters are coopnn's `encoding.params` as they are (the same layout).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.encodings.composite import Composite
from coopnn.graph.ir import Graph, Op
from coopnn.graph.parameters import parameters
from coopnn.interop import tensors
from coopnn.model import Model

ALIGNMENT = 16  # what FullyFusedMLP and CutlassMLP pad their inputs and outputs to


def next_multiple(value: int, step: int) -> int:
    return (value + step - 1) // step * step


def padded_input(encoding: Encoding, width: int) -> list[tuple[int | None, float]]:
    """tcnn's network input columns: (coopnn encoded column, 0) or (None, the pad constant), `width` of them."""
    pad = width - encoding.n_output_dims
    last = encoding.parts[-1].encoding if isinstance(encoding, Composite) and encoding.parts else encoding
    columns: list[tuple[int | None, float]] = [(j, 0.0) for j in range(encoding.n_output_dims)]
    padding = [(None, float(encoding.pad_value))] * pad
    if last.pads_in_front:  # in front of the last encoding's own outputs
        at = encoding.n_output_dims - last.n_output_dims
        return columns[:at] + padding + columns[at:]
    return columns + padding


def _first_layer(matrix: np.ndarray, encoding: Encoding | None, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """coopnn's first weight and bias from tcnn's first matrix: the encoded columns kept, the constant ones summed."""
    if encoding is None:
        columns = [(j, 0.0) for j in range(n_in)] + [(None, 0.0)] * (matrix.shape[1] - n_in)
    else:
        columns = padded_input(encoding, matrix.shape[1])
    bias = sum((value * matrix[:, c] for c, (j, value) in enumerate(columns) if j is None), np.zeros(len(matrix)))
    return matrix[:, [c for c, (j, _) in enumerate(columns) if j is not None]], bias


def _flat(buffer: Any) -> np.ndarray:
    """tcnn's buffer as one float64 row: a numpy array or list, or a PyTorch or CuPy tensor (on the GPU and requiring
    gradients, as the bindings' `params` are) of floating-point values."""
    try:
        if tensors.framework_of(buffer) != "other" or tensors.is_cuda_array(buffer):
            buffer = tensors.to_host("buffer", buffer)
        array = np.asarray(buffer)
    except (TypeError, ValueError, RuntimeError) as e:
        raise InputError(f"a tiny-cuda-nn buffer is an array of float16 or float32 values, not {type(buffer).__name__} "
                         f"({e})") from None
    if array.dtype.kind != "f":
        raise InputError(f"a tiny-cuda-nn buffer holds float16 or float32 values, not {array.dtype}")
    return array.astype(np.float64).ravel()


def tcnn_parameter_values(graph: Graph, buffer: Any) -> dict[str, np.ndarray]:
    """coopnn's parameters (by name) from tcnn's buffer for the model `graph` (made by `coopnn.from_tcnn_config` or
    `coopnn.mlp` with that config's encoding)."""
    flat = _flat(buffer)
    encoding = next((n.attrs["encoding"] for n in graph.nodes if n.op is Op.ENCODING), None)
    layers = [n.name for n in graph.nodes if n.op is Op.LINEAR]
    shapes = [parameters(graph)[f"{name}.weight"].shape for name in layers]
    n_in = shapes[0][1]
    last = len(shapes) - 1
    tcnn_shapes = [(next_multiple(out, ALIGNMENT) if i == last else out, next_multiple(n_in, ALIGNMENT) if i == 0
                    else fan_in) for i, (out, fan_in) in enumerate(shapes)]
    network_size = sum(r * c for r, c in tcnn_shapes)
    encoding_size = encoding.n_parameters if encoding is not None else 0
    if flat.size != network_size + encoding_size:
        raise InputError(f"a tiny-cuda-nn buffer for model {graph.name!r} holds {network_size + encoding_size:,} "
                         f"values ({network_size:,} of the MLP's {len(shapes)} matrices {tcnn_shapes}, then "
                         f"{encoding_size:,} of the encoding); this one holds {flat.size:,}")
    values, start = {}, 0
    for i, (name, (rows, columns)) in enumerate(zip(layers, tcnn_shapes)):
        matrix = flat[start:start + rows * columns].reshape(rows, columns)
        start += rows * columns
        bias = np.zeros(rows)
        if i == 0:
            matrix, bias = _first_layer(matrix, encoding, n_in)
        values[f"{name}.weight"] = matrix[:shapes[i][0]].astype(np.float32)
        values[f"{name}.bias"] = bias[:shapes[i][0]].astype(np.float32)
    if encoding_size:
        values["encoding.params"] = flat[start:].astype(np.float32)
    return values


def load_tcnn_parameters(model: Model, buffer: Any) -> None:
    """Set `model`'s parameters from tiny-cuda-nn's parameter buffer (see the module docstring for the mapping)."""
    model.set_parameters(tcnn_parameter_values(model.graph, buffer))
