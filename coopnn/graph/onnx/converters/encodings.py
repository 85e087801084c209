"""`ai.coopnn::Encoding`, the node `coopnn.graph.onnx.fuse_encodings` makes of an encoding subgraph coopnn exported:
an `Op.ENCODING` node holding the encoding its config describes, its parameter vector a constant."""

from __future__ import annotations

import json

import numpy as np

from coopnn.errors import CoopnnError
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.fuse_encodings import DOMAIN, DOMAIN_VERSION
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import converter


@converter("Encoding", since=DOMAIN_VERSION, domain=DOMAIN)
def encoding(node: OnnxNode, ctx: ConversionContext) -> None:
    try:
        made = from_config(json.loads(node.attr("config", "")), int(node.attr("n_input_dims", 0)),
                           f"encoding node {node.name!r}")
    except (CoopnnError, TypeError, ValueError, RecursionError) as e:  # ValueError: json's decode errors
        ctx.fail(f"its encoding config cannot be built: {e}")
    inputs = [node.input(0)]
    if made.n_parameters:
        params = node.input(1)
        value = ctx.static_value(params, "parameter vector")
        if value.dtype != np.float32:
            ctx.set_static(params, value.astype(np.float32))
        inputs.append(params)
    ctx.emit(Op.ENCODING, inputs, {"encoding": made}, output=node.outputs[0])
