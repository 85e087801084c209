"""The converter families, listed explicitly: importing this package registers every converter coopnn has.

A family module that is not listed here registers nothing; tests/graph/onnx checks that every module in this folder
appears in FAMILIES.
"""

from coopnn.graph.onnx.converters import (
    activations,
    constants,
    elementwise,
    encodings,
    indexing,
    linear,
    normalization,
    reduce,
    shape,
)

FAMILIES = (activations, constants, elementwise, encodings, indexing, linear, normalization, reduce, shape)
