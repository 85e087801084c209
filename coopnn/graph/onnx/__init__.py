"""ONNX import: `import_model` turns an ONNX model into a coopnn graph through the converter registry."""

from coopnn.graph.onnx.importer import import_model
from coopnn.graph.onnx.registry import supported_operators

__all__ = ["import_model", "supported_operators"]
