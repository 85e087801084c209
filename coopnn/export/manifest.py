"""`NAME.json`: what an engine needs to know of an export without reading its shader: the network's shapes, each
matrix and bias (offset, size, padded shape, stride, component type and interpretation, the layout the
cooperative-vector variant converts it to and the specialization constant its converted offset is given by), the
input stage's nodes and constants, the tables it reads (a grid's feature vectors: offset, size, elements, the
specialization constant of their offset), and the weights file's size and digests."""

from __future__ import annotations

import numpy as np

from coopnn.export.source import Export
from coopnn.export.weights import EXPORT_FORMATS, Region, digests

MANIFEST_VERSION = 1


def _jsonable(value):
    if hasattr(value, "to_config"):  # an encoding: its tiny-cuda-nn config
        return value.to_config()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def _region(region: Region, export: Export, layer: int, part: str) -> dict:
    component = EXPORT_FORMATS[export.format.name][0]
    entry = {"offset": region.offset, "size": region.size, "component_type": component, "interpretation": component,
             "offset_constant": export.constant(layer, part), "spec_constant": export.spec_index(layer, part)}
    if part == "MATRIX":
        entry.update(rows=region.rows, columns=region.columns, stride=region.stride, layout="row_major",
                     convert_to="inferencing_optimal")
    else:
        entry.update(elements=region.rows)
    return entry


def _stage(export: Export, graph_constants) -> dict:
    nodes = [{"name": node.name, "op": node.op.value, "inputs": list(node.inputs),
              "attrs": {k: _jsonable(v) for k, v in node.attrs.items()}} for node in export.plan.stage_nodes]
    tables = {node for node, _ in export.plan.tables}
    used = {name for node in export.plan.stage_nodes if node.name not in tables
            for name in node.inputs if name in graph_constants}
    return {"nodes": nodes, "constants": {name: np.asarray(graph_constants[name]).tolist() for name in sorted(used)},
            "features": len(export.plan.encoded)}


def manifest(export: Export, data: bytes, language: str, graph_constants) -> dict:
    plan, up = export.plan, export.upper
    layers = []
    for i, (layer, where) in enumerate(zip(plan.layers, export.regions)):
        act = layer.activation
        layers.append({"name": layer.name, "inputs": layer.inputs, "outputs": layer.outputs,
                       "activation": None if act is None else {
                           "op": act.op.value, "attrs": {k: _jsonable(v) for k, v in act.attrs.items()}},
                       "matrix": _region(where.matrix, export, i, "MATRIX"),
                       "bias": _region(where.bias, export, i, "BIAS")})
    return {
        "coopnn_shader_export": MANIFEST_VERSION, "name": export.name, "model": plan.name, "language": language,
        "function": f"{export.name}_eval", "inputs": plan.inputs, "outputs": plan.outputs,
        "weights": {"file": f"{export.name}.weights.bin", "format": export.format.name, "size": len(data),
                    **digests(data)},
        "binding": {"set_define": f"{up}_WEIGHTS_SET", "binding_define": f"{up}_WEIGHTS_BINDING", "default": [0, 0],
                    "spec_id_define": f"{up}_SPEC_ID"},
        "variants": {"coopvec": {"layout": "inferencing_optimal", "offsets": "specialization constants"},
                     "portable": {"define": f"{up}_PORTABLE", "layout": "row_major", "offsets": "constants"}},
        "input_stage": _stage(export, graph_constants),
        "layers": layers,
        "tables": [{"node": node, "offset": region.offset, "size": region.size, "elements": region.rows,
                    "component_type": EXPORT_FORMATS[export.format.name][0],
                    "offset_constant": export.table_constant(k), "spec_constant": export.table_spec_index(k)}
                   for k, ((node, _), region) in enumerate(zip(plan.tables, export.tables))],
    }
