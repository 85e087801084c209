"""The integer arithmetic of a weight format that quantizes inputs (`WeightFormat.input_quantization`: int8), defined
once, here: the numpy backend runs `IntegerEmulation`, the portable shader (`coopnn.backends.portable.integer_linear`)
does the same steps bit for bit, and they are the steps of the cooperative-vector combination `s8/s8/s8/s32/s32`
(input, its interpretation, matrix, bias, result: 8-bit integers multiplied, 32-bit integer bias and result).

A LINEAR y = W x + b is stored as (`quantize_layer`, on the host, once):
- Q[r, c] = encode(W[r, c] / s_w[r]), the format's elements (int8: rounded half to even, in [-127, 127]), with s_w the
  float32 row scales (`RowScales`: the smallest float32 at which the row's largest |weight| becomes at most 127);
- s_x, the Linear's input scale: the largest finite |value| reaching its input when the calibration data runs in
  float32 (`coopnn.layouts.formats.calibration`), over `largest` (`InputQuantization.scale`: the smallest float32 at
  least that, and at least 2^-126 so that its reciprocal is finite; 1 when the largest value is 0);
- m = float32(1 / s_x), the input multiplier; d[r] = float32(s_w[r] * s_x), the dequantization scales;
- b_q[r] = b[r] / d[r] rounded half to even (in float64) to a 32-bit integer, saturated at +-(2^31 - 1 - 127^2 *
  columns) so that step 3's sum cannot overflow;
and computes, for each sample:
1. q[c] = encode(x[c] * m): the product in float32 (round to nearest even), then rounded half to even to an integer
   and clamped to [-127, 127]; NaN gives 0 (and step 4 makes the row NaN), infinities saturate. Why this rounding:
   every step is exact in SPIR-V, so a shader matches it bit for bit: OpFMul is correctly rounded (an OpFDiv by s_x is
   not: Vulkan allows it 2.5 ulp), GLSL.std.450 RoundEven is exact, and a clamp before OpConvertFToS keeps that
   conversion defined; half to even is also how every float conversion in coopnn rounds.
2. acc[r] = sum over c of Q[r, c] q[c] in 32-bit integers: exact in any order, as |acc| <= 127^2 * columns < 2^31
   (a Linear with more columns than `InputQuantization.max_columns` is refused);
3. y[r] = float32(acc[r] + b_q[r]) * d[r]: the sum converted to float32 (to nearest even; exact below 2^24), then
   multiplied in float32 (no bias: acc[r] alone);
4. a sample with NaN among its x[c] gets NaN in every row, as float32 arithmetic gives;
then the Linear's activation in float32. Every other operator runs in float32 (`coopnn.graph.ops`); inputs and
outputs are not rounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from coopnn.errors import CompileError
from coopnn.graph.ir import Graph, Op
from coopnn.layouts.formats.emulation import run_with_linears
from coopnn.layouts.formats.format import WeightFormat

@dataclass(frozen=True)
class QuantizedLayer:
    """A Linear as a format that quantizes inputs stores it (module docstring)."""

    elements: np.ndarray  # Q: rows x columns, the format's storage type
    dequantization: np.ndarray  # d: float32, one per row
    bias: np.ndarray | None  # b_q: int32, one per row; None for a Linear without bias
    input_scale: np.float32  # s_x
    multiplier: np.float32  # m = float32(1 / s_x)


def quantize_layer(fmt: WeightFormat, matrix: np.ndarray, bias: np.ndarray | None, input_scale: float,
                   what: str) -> QuantizedLayer:
    """Linear `what` (its weight `matrix`, rows x columns, and `bias`) stored in `fmt` for input scale
    `input_scale`; CompileError for what the format cannot store."""
    quantization = fmt.input_quantization
    matrix = np.asarray(matrix, np.float32)
    columns = matrix.shape[1]
    if columns > quantization.max_columns:
        raise CompileError(f"{what} has {columns} inputs; weights={fmt.name!r} sums them exactly in 32-bit integers "
                           f"only up to {quantization.max_columns} (use weights='fp16' or 'fp32')")
    elements, row_scales = fmt.stored(matrix, "matrix", what)
    scale = np.float32(input_scale)
    dequantization = (row_scales.astype(np.float64) * np.float64(scale)).astype(np.float32)
    quantized_bias = None
    if bias is not None:
        bias = np.asarray(bias, np.float32).reshape(-1)
        if not np.isfinite(bias).all():
            raise CompileError(f"{what} has a bias that is not finite (NaN or infinity), which weights={fmt.name!r} "
                               f"cannot store as integers; use weights='fp16' or 'fp32'")
        limit = quantization.bias_limit(columns)
        with np.errstate(divide="ignore", invalid="ignore"):  # d underflowing to 0 saturates the bias
            steps = np.rint(bias.astype(np.float64) / dequantization.astype(np.float64))
        quantized_bias = np.clip(np.nan_to_num(steps, nan=0.0), -limit, limit).astype(np.int32)
    return QuantizedLayer(elements, dequantization, quantized_bias, scale, np.float32(1) / scale)


def quantize_input(fmt: WeightFormat, x: np.ndarray, multiplier: np.float32) -> np.ndarray:
    """Step 1: q = encode(x * m), the product in float32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return fmt.encode(np.asarray(x, np.float32) * np.float32(multiplier))


def integer_linear(fmt: WeightFormat, x: np.ndarray, layer: QuantizedLayer, elements: np.ndarray) -> np.ndarray:
    """Steps 1 to 4 for float32 x (..., columns): y (..., rows) in float32; `elements` is Q decoded to float64,
    once per layer (`IntegerEmulation`), not per batch."""
    q = quantize_input(fmt, x, layer.multiplier).astype(np.float64)
    # integers below 2^53 are summed exactly in float64 in any order, so BLAS gives the 32-bit integer sums
    acc = q @ elements.T
    if layer.bias is not None:
        acc += layer.bias
    y = acc.astype(np.float32) * layer.dequantization
    y[np.isnan(x).any(axis=-1)] = np.nan
    return y


class IntegerEmulation:
    """The arithmetic of the module docstring for `graph` with weights in `fmt` (calibrated: it carries each Linear's
    input scale), its layers quantized once, run on any number of batches."""

    def __init__(self, graph: Graph, fmt: WeightFormat):
        self.graph, self.format = graph, fmt
        self.layers: dict[str, tuple[QuantizedLayer, np.ndarray]] = {}  # LINEAR -> its layer, Q decoded
        for node in graph.nodes:
            if node.op is Op.LINEAR:
                bias = graph.constants[node.inputs[2]] if len(node.inputs) > 2 else None
                layer = quantize_layer(fmt, graph.constants[node.inputs[1]], bias, fmt.input_scale(node.name),
                                       f"Linear {node.name!r}")
                self.layers[node.name] = layer, fmt.decode(layer.elements).astype(np.float64)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(self.graph.constants)
        env.update({name: np.asarray(x, np.float32) for name, x in feeds.items()})
        return run_with_linears(self.graph, env,
                                lambda node, inputs: integer_linear(self.format, inputs[0], *self.layers[node.name]),
                                next(iter(feeds.values())).shape[0])
