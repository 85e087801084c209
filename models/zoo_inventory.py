"""Describes the exported zoo files for models/README.md: signature, operator inventory and node forms of each model."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

SMALL_CONSTANT = 8  # constants with at most this many elements are written out in full
SHAPE_OPS = {"Shape", "Size"}


def constant_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Initializers and Constant-node outputs by value name."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            value = onnx.helper.get_attribute_value(node.attribute[0])
            values[node.output[0]] = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)
    return values


def shape_computed(model: onnx.ModelProto) -> set[str]:
    """Values that depend on a Shape/Size node: the places where the exporter computed shapes at run time."""
    derived: set[str] = set()
    for node in model.graph.node:
        if node.op_type in SHAPE_OPS or any(name in derived for name in node.input):
            derived.update(node.output)
    return derived


def describe_constant(array: np.ndarray) -> str:
    if array.size <= SMALL_CONSTANT:
        flat = array.reshape(-1).tolist()
        text = str(flat[0]) if array.ndim == 0 else str(flat)
        return f"{text}:{array.dtype}"
    return f"const{list(array.shape)}"


def describe_attribute(attribute: onnx.AttributeProto) -> str:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        value = describe_constant(numpy_helper.to_array(value))
    elif isinstance(value, bytes):
        value = value.decode()
    elif isinstance(value, float):
        value = float(np.float32(value))
    return f"{attribute.name}={value}"


def node_form(node: onnx.NodeProto, constants: dict[str, np.ndarray], computed: set[str]) -> str:
    """The node with its data inputs as `x`, constants written out, run-time shape inputs marked, and attributes."""
    operands = []
    for name in node.input:
        if name == "":
            operands.append("<absent>")
        elif name in computed:
            operands.append("<shape-computed>")
        elif name in constants:
            operands.append(describe_constant(constants[name]))
        else:
            operands.append("x")
    attributes = [describe_attribute(a) for a in node.attribute]
    domain = f"{node.domain}::" if node.domain else ""
    return f"{domain}{node.op_type}({', '.join(operands + attributes)})"


def operator_inventory(model: onnx.ModelProto) -> list[tuple[str, str, int, int]]:
    """(domain, op_type, opset, count) for every operator in the graph, in first-use order."""
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    counts = Counter((node.domain or "ai.onnx", node.op_type) for node in model.graph.node)
    return [(domain, op_type, opsets[domain], count) for (domain, op_type), count in counts.items()]


def signature(values) -> str:
    parts = []
    for value in values:
        dims = [d.dim_param or str(d.dim_value) for d in value.type.tensor_type.shape.dim]
        parts.append(f"`{value.name}` [{', '.join(dims)}]")
    return ", ".join(parts)


def model_section(entry, model: onnx.ModelProto, size: int) -> list[str]:
    constants = constant_values(model)
    computed = shape_computed(model)
    forms = Counter(node_form(node, constants, computed) for node in model.graph.node if node.op_type != "Constant")
    shape_nodes = [n for n in model.graph.node if n.op_type in SHAPE_OPS or any(o in computed for o in n.output)]
    inventory = ", ".join(f"{op}×{count}" for _, op, _, count in operator_inventory(model))
    domains = ", ".join(f"{o.domain or 'ai.onnx'} v{o.version}" for o in model.opset_import)
    lines = [
        f"### {entry.name}",
        "",
        f"- exporter: {entry.exporter}, opset {entry.opset} (opset_import: {domains}; ir_version {model.ir_version}); "
        f"{size} bytes",
        f"- inputs: {signature(model.graph.input)}",
        f"- outputs: {signature(model.graph.output)}",
        f"- exercises: {entry.exercises}",
        f"- operators ({len(model.graph.node)} nodes): {inventory}",
    ]
    if shape_nodes:
        chain = " → ".join(f"{n.op_type}" for n in shape_nodes)
        lines.append(f"- shapes computed at run time: {chain}")
    else:
        lines.append("- shapes computed at run time: none (every shape operand is a constant)")
    lines += ["- node forms (`x` = a tensor computed at run time, constants written out):", "", "```"]
    lines += [f"{count:>3} × {form}" for form, count in forms.items()]
    lines += ["```", ""]
    return lines


def render_readme(entries, models_dir: Path) -> str:
    """The whole README text, read from the .onnx files on disk so that it describes what is committed."""
    lines = [
        "# Model zoo",
        "",
        "Small neural-shading networks exported from PyTorch by `python3 models/build_zoo.py` (the networks are in",
        "`zoo_networks.py`, their building blocks in `zoo_layers.py`). Every model is seeded from its name and rebuilds",
        "byte-identical; `python3 models/build_zoo.py --check` confirms the committed files match a fresh build and",
        "`--only NAME` rebuilds one. Each file passes `onnx.checker.check_model(full_check=True)` and agrees with",
        "its PyTorch module in onnxruntime at batch 7 (rtol 1e-4, atol 1e-5). This README is generated by the script.",
        "",
        "Every input and output is float32 `[batch, features]`: axis 0 is the symbolic `batch`, the feature axis is",
        "fixed. `dynamo` means `torch.onnx.export(..., dynamo=True, dynamic_shapes=...)` (torch.export based, with its",
        "default onnxscript optimisation); `legacy` means the TorchScript exporter (`dynamo=False, dynamic_axes=...`).",
        "The exporters' doc strings and metadata (stack traces) are stripped; nothing else is changed.",
        "",
        "| model | exporter | inputs | outputs | exercises |",
        "|---|---|---|---|---|",
    ]
    loaded = []
    for entry in entries:
        path = models_dir / f"{entry.name}.onnx"
        model = onnx.load(path)
        loaded.append((entry, model, path.stat().st_size))
        lines.append(f"| `{entry.name}` | {entry.exporter} {entry.opset} | {signature(model.graph.input)} | "
                     f"{signature(model.graph.output)} | {entry.exercises} |")
    lines += ["", "## Operator inventory", ""]
    for entry, model, size in loaded:
        lines += model_section(entry, model, size)
    return "\n".join(lines).rstrip() + "\n"
