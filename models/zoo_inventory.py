"""Describes the exported zoo files for models/README.md: signature, operator inventory and node forms of each model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

SMALL_CONSTANT = 8  # integer constants with at most this many elements are written out in full
SHAPE_OPS = {"Shape", "Size"}


EXPORTER_PATTERNS = [
    "- `nn.Linear` on a rank-2 input is `Gemm(x, W[out, in], b, alpha=1, beta=1, transA=0, transB=1)` from both",
    "  exporters; a bias-free Linear is a two-input Gemm (dynamo). `MatMul` + `Add` only comes from an explicit",
    "  `torch.matmul(x, W[in, out]) + b`.",
    "- Dynamo stores every constant (weights, scalars, shape and axes operands) as an initializer; the legacy",
    "  exporter uses initializers for parameters and `Constant` nodes for scalars and shape/axes/slice operands.",
    "- Dynamo never emits `Shape`: `flatten(1)` and `reshape(x.shape[0], -1)` both become",
    "  `Reshape(t, [-1, N], allowzero=1)`. The legacy exporter writes `reshape(x.shape[0], -1)` as `Shape(x) →",
    "  Gather(·, 0, axis=0) → Unsqueeze(·, [0]) → Concat(·, [-1], axis=0) → Reshape(t, ·, allowzero=0)`.",
    "- Frequency encodings hold rank-3 intermediates: `Unsqueeze(x, [-1])` gives [batch, d, 1], `Mul` by the",
    "  frequency initializer [L] broadcasts to [batch, d, L], `Reshape` brings it back to [batch, d·L].",
    "- `Softplus(beta, threshold)` from dynamo: `s = Mul(x, beta)`, `Div(Softplus(s), beta)`, then",
    "  `Where(Greater(s, threshold), x, ·)` (with beta = 1 the Mul/Div are omitted). The legacy exporter drops the",
    "  threshold: `Div(Softplus(Mul(x, beta)), beta)` only.",
    "- GELU is the `Gelu` operator (attribute approximate=none/tanh) from opset 20 on; below that it is decomposed:",
    "  exact as `0.5·x·(1 + Erf(x / √2))`, tanh as `0.5·x·(1 + Tanh(√(2/π)·(x + 0.044715·Pow(x, 3))))`.",
    "  SiLU is always `Mul(x, Sigmoid(x))`.",
    "- `nn.PReLU(24)` is `PRelu(x, slope[1, 24])` (dynamo); ReLU6 and clamp are `Clip(x, min, max)` with the bounds",
    "  as inputs; Hardsigmoid is `HardSigmoid(alpha=1/6, beta=0.5)`.",
    "- LayerNorm is `LayerNormalization(x, scale, bias, axis=-1, epsilon=1e-5, stash_type=1)` from dynamo; the",
    "  legacy exporter below opset 17 writes it out with `ReduceMean(axes=[-1])` (axes as an attribute),",
    "  Sub, Pow 2, Add ε, Sqrt, Div, Mul, Add.",
    "- Reductions at opset 18+ take axes as an input (`ReduceSum(x, [1], keepdims=0)`); `Unsqueeze`, `Split` and",
    "  `Slice` take their axes/sizes/starts as inputs at every opset here (13+). `x[:, a:]` slices to",
    "  INT64_MAX (9223372036854775807).",
    "- Several outputs keep the names given to the exporter; no `Identity` nodes appear in this zoo (dynamo writes",
    "  one only when two outputs are the same tensor).",
]


def constant_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Initializers and Constant-node outputs by value name."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            value = onnx.helper.get_attribute_value(node.attribute[0])
            is_tensor = isinstance(value, onnx.TensorProto)
            values[node.output[0]] = numpy_helper.to_array(value) if is_tensor else np.asarray(value)
    return values


def shape_computed(model: onnx.ModelProto) -> set[str]:
    """Values computed at run time from a Shape/Size node through integer shape arithmetic (never data tensors)."""
    constants = constant_values(model)
    derived: set[str] = set()
    for node in model.graph.node:
        inputs_are_shape_math = any(name in derived for name in node.input) and all(
            name in derived or name in constants for name in node.input if name)
        if node.op_type in SHAPE_OPS or inputs_are_shape_math:
            derived.update(node.output)
    return derived


def describe_constant(array: np.ndarray) -> str:
    """Scalars and short integer operands (shapes, axes, starts) in full; float tensors (weights) by shape only."""
    if array.size == 1 or (array.dtype.kind in "iub" and array.size <= SMALL_CONSTANT):
        text = ", ".join(str(v) for v in array.reshape(-1))
        return f"{text if array.ndim == 0 else f'[{text}]'}:{array.dtype}"
    return f"{array.dtype}{list(array.shape)}"


def describe_attribute(attribute: onnx.AttributeProto) -> str:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        value = describe_constant(numpy_helper.to_array(value))
    elif isinstance(value, bytes):
        value = value.decode()
    elif isinstance(value, float):
        value = str(np.float32(value))
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
    shape_nodes = [n for n in model.graph.node if any(name in computed for name in n.output)]
    inventory = ", ".join(f"{op}×{count}" for _, op, _, count in operator_inventory(model))
    domains = ", ".join(f"{o.domain or 'ai.onnx'} v{o.version}" for o in model.opset_import)
    lines = [
        f"### {entry.name}",
        "",
        f"- exporter: {entry.exporter}, opset {entry.opset} (opset_import: {domains}; "
        f"ir_version {model.ir_version}); {size} bytes",
        f"- inputs: {signature(model.graph.input)}",
        f"- outputs: {signature(model.graph.output)}",
        f"- exercises: {entry.exercises}",
        f"- operators ({len(model.graph.node)} nodes): {inventory}",
    ]
    if shape_nodes:
        consumers = [n.op_type for n in model.graph.node
                     if n not in shape_nodes and any(name in computed for name in n.input)]
        chain = " → ".join(n.op_type for n in shape_nodes)
        lines.append(f"- shapes computed at run time: {chain}, feeding {', '.join(consumers)}")
    else:
        lines.append("- shapes computed at run time: none (every shape, axes and slice operand is a constant)")
    lines += ["- node forms (`x` = a tensor computed at run time, constants written out):", "", "```"]
    lines += [f"{count:>3} × {form}" for form, count in forms.items()]
    lines += ["```", ""]
    return lines


def render_readme(entries, model_bytes: dict[str, bytes]) -> str:
    """The whole README text, describing the serialized model of each entry (by name)."""
    lines = [
        "# Model zoo",
        "",
        "Small neural-shading networks exported from PyTorch by `python3 models/build_zoo.py` (the networks are in",
        "`zoo_networks.py`, their building blocks in `zoo_layers.py`). Every model is seeded from its name and",
        "rebuilds byte-identical; `python3 models/build_zoo.py --check` confirms the committed files match a fresh",
        "build and `--only NAME` rebuilds one. Each file passes `onnx.checker.check_model(full_check=True)` and agrees",
        "with its PyTorch module in onnxruntime at batch 7 (rtol 1e-4, atol 1e-5). This README is generated by the",
        "script.",
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
        model = onnx.load_from_string(model_bytes[entry.name])
        loaded.append((entry, model, len(model_bytes[entry.name])))
        lines.append(f"| `{entry.name}` | {entry.exporter} {entry.opset} | {signature(model.graph.input)} | "
                     f"{signature(model.graph.output)} | {entry.exercises} |")
    lines += ["", "## What the exporters write (torch 2.13), as the importer sees it", "", *EXPORTER_PATTERNS,
              "", "## Operator inventory", ""]
    for entry, model, size in loaded:
        lines += model_section(entry, model, size)
    return "\n".join(lines).rstrip() + "\n"
