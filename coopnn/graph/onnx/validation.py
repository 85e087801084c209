"""Checking a parsed model before conversion: what it declares (an opset coopnn knows, at least one output),
initializer sizes, the ONNX checker, then ONNX shape inference.

Every failure is a ModelFormatError; the converters may then assume a well-formed model.
"""

from __future__ import annotations

import numpy as np
import onnx

from coopnn.errors import ModelFormatError
from coopnn.graph.onnx.node import canonical_domain
from coopnn.graph.onnx.tensors import tensor_to_array


def newest_opset() -> int:
    """The newest ONNX opset (default domain) coopnn knows: the installed onnx package's, whose operator definitions
    the checker, shape inference and the converters' version lookup go by."""
    return onnx.defs.onnx_opset_version()


def check_declarations(proto: onnx.ModelProto) -> None:
    """ModelFormatError unless the model imports the default domain at an opset coopnn knows (a newer one may have
    changed what an operator means, and onnxruntime refuses it too) and its graph declares an output."""
    newest = newest_opset()
    for opset in proto.opset_import:
        if canonical_domain(opset.domain) == "" and opset.version > newest:
            raise ModelFormatError(f"the model declares ONNX opset {opset.version}, newer than the newest coopnn "
                                   f"knows ({newest}, that of onnx {onnx.__version__}); export it at opset {newest} "
                                   f"or lower")
    if not proto.graph.output:
        raise ModelFormatError(f"graph {proto.graph.name!r} declares no outputs, so it computes nothing; list the "
                               "values it returns in graph.output")


def read_initializers(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The model's initializers as arrays, by name; a size that does not match the shape names the initializer."""
    arrays = {}
    for tensor in proto.graph.initializer:
        arrays[tensor.name] = tensor_to_array(tensor, f"initializer {tensor.name!r}")
    if proto.graph.sparse_initializer:
        names = ", ".join(repr(s.values.name) for s in proto.graph.sparse_initializer)
        raise ModelFormatError(f"sparse initializers ({names}) are not supported; store them dense")
    return arrays


def check_and_infer(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Run the ONNX checker and strict shape inference; return the model with inferred value types."""
    try:
        onnx.checker.check_model(proto)
    except Exception as e:  # ValidationError, or ValueError for protos the checker cannot serialise
        raise ModelFormatError(f"the model fails the ONNX checker: {e}") from e
    try:
        return onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    except Exception as e:  # InferenceError, or the checker's errors raised again from inside inference
        raise ModelFormatError(f"ONNX shape inference fails on the model: {e}") from e

