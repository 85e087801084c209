"""The ONNX form of Composite: each nested encoding written over its Slice of the input columns (and of the
parameter vector), pad columns made by ConstantOfShape, all concatenated."""

from __future__ import annotations

from onnx import TensorProto, helper

from coopnn.graph.encodings.composite import Composite
from coopnn.graph.onnx.encodings import write_encoding
from coopnn.graph.onnx.encodings.emit import Emitter


def composite(e: Emitter, encoding: Composite, x: str, params: str | None, output: str) -> None:
    columns, start = [], 0
    for i, part in enumerate(encoding.parts):
        nested = part.encoding
        own = None
        if nested.n_parameters:
            own = e.slice(params, start, start + nested.n_parameters, 0)
            start += nested.n_parameters
        inputs = e.slice(x, part.begin, part.begin + nested.n_input_dims, 1)
        out = e.writer.fresh(f"{e.name}/part{i}")
        write_encoding(e.writer, nested, inputs, own, out, out)
        columns.append(out)
        if part.pad:
            rows = e.slice(e.op("Shape", [x]), 0, 1, 0)
            shape = e.op("Concat", [rows, e.i64([part.pad], "pad")], axis=0)
            value = helper.make_tensor("value", TensorProto.FLOAT, [1], [float(nested.pad_value)])
            columns.insert(len(columns) - 1 if nested.pads_in_front else len(columns),
                           e.op("ConstantOfShape", [shape], value=value))
    e.last("Concat", columns, output, axis=1)


WRITERS = {Composite.otype: composite}

