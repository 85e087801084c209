"""Calibration data: the representative inputs a user passes as `calibration=`, checked here once, and what a
weight format that quantizes inputs (`WeightFormat.input_quantization`) measures on them: the largest finite |value|
reaching each Linear when the data runs through the graph in float32, which sets that Linear's input scale
(`coopnn.layouts.formats.integer`).

The scales are measured when a model is loaded or compiled and stay with its format: new parameters (training,
`set_parameters`) are quantized with the same input scales; load the model again with `calibration=` to measure
anew.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph import ops
from coopnn.graph.ir import Graph, Op
from coopnn.layouts.formats import format_names, weight_format
from coopnn.layouts.formats.format import WeightFormat

CHUNK = 1 << 16  # samples run at once: bounds the memory a large calibration batch takes


def calibration_feeds(graph: Graph, calibration: Any) -> dict[str, np.ndarray]:
    """The user's calibration batch as float32 arrays keyed by input name (InputError naming what is wrong: names,
    shapes, values that are not numbers or not finite)."""
    names = [v.name for v in graph.inputs]
    if not isinstance(calibration, Mapping):
        if len(names) != 1:
            raise InputError(f"calibration for a model with inputs {names}: pass a dict keyed by input name")
        calibration = {names[0]: calibration}
    if sorted(calibration) != sorted(names):
        raise InputError(f"calibration names {sorted(calibration)}; the model's inputs are {names}")
    feeds = {}
    for v in graph.inputs:
        try:
            array = np.asarray(calibration[v.name], dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise InputError(f"calibration for input {v.name!r} is not an array of numbers: {e}") from None
        if array.ndim != 1 + len(v.features) or array.shape[1:] != v.features or array.shape[0] < 1:
            raise InputError(f"calibration for input {v.name!r} has shape {list(array.shape)}; expected "
                             f"[samples, {', '.join(map(str, v.features))}]")
        if not np.isfinite(array).all():
            raise InputError(f"calibration for input {v.name!r} has values that are not finite (NaN or infinity); "
                             f"pass representative inputs, every one a finite number")
        feeds[v.name] = array
    return feeds


def linear_input_ranges(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The largest finite |value| reaching the input of each LINEAR node (by name) when `feeds` run in float32
    (0 where none is finite)."""
    largest = {node.name: 0.0 for node in graph.nodes if node.op is Op.LINEAR}
    samples = next(iter(feeds.values())).shape[0]
    for start in range(0, samples, CHUNK):
        env: dict[str, np.ndarray] = dict(graph.constants)
        env.update({name: x[start:start + CHUNK] for name, x in feeds.items()})
        for node in graph.nodes:
            inputs = [env[name] for name in node.inputs]
            if node.op is Op.LINEAR:
                magnitude = np.abs(inputs[0])
                finite = magnitude[np.isfinite(magnitude)]
                if finite.size:
                    largest[node.name] = max(largest[node.name], float(finite.max()))
            with np.errstate(all="ignore"):  # what float32 gives, infinities and NaN included
                env[node.outputs[0]] = ops.evaluate(node.op, inputs, node.attrs)
    return largest


def calibrated(fmt: WeightFormat, graph: Graph, calibration: Any) -> WeightFormat:
    """`fmt` ready for `graph`: with the input scales measured on `calibration` where the format quantizes inputs
    (a format that already carries scales keeps them when no calibration is given), `fmt` itself otherwise; an
    InputError when a format that quantizes inputs has no calibration, or one that does not is given some."""
    if fmt.input_quantization is None:
        if calibration is not None:
            raise InputError(f"weights={fmt.name!r} takes no calibration=: it is for weights='auto' and for formats "
                             f"that quantize inputs ({', '.join(quantizing_format_names())})")
        return fmt
    if calibration is None:
        if fmt.input_scales is not None:
            return fmt
        shapes = "; ".join(f"{v.name!r}: [samples, {', '.join(map(str, v.features))}]" for v in graph.inputs)
        raise InputError(f"weights={fmt.name!r} quantizes each Linear's input with a scale measured on calibration "
                         f"data, so it needs calibration=: representative inputs, a few thousand samples like those "
                         f"the model will run on, as an array or a dict of arrays by input name ({shapes})")
    ranges = linear_input_ranges(graph, calibration_feeds(graph, calibration))
    return fmt.calibrated({name: fmt.input_quantization.scale(value) for name, value in ranges.items()})


def quantizing_format_names() -> list[str]:
    return [name for name in format_names() if weight_format(name).input_quantization is not None]
