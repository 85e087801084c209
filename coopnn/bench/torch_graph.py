"""A PyTorch interpreter of the coopnn graph IR, so that the PyTorch baseline runs exactly the network coopnn runs.

It walks the optimised graph (the one coopnn's backends compile, weights included) and evaluates each node with the
torch call a user would write for that layer: `F.linear` for LINEAR with its fused activation, `F.layer_norm`,
`F.softmax`, and so on. Every operator of `coopnn.graph.ir.Op` has a rule, and in float32 the results match the numpy
reference. Only the benchmark imports this module, and only when PyTorch is installed.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from coopnn.bench.torch_encodings import encode
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.ir import Activation, Graph, Op
from coopnn.graph.ops import evaluate, forward_defaults

Tensor = torch.Tensor


def _softplus(x, beta, threshold):
    return F.softplus(x, beta=beta, threshold=math.inf if threshold is None else threshold)


def _selu(x, alpha, gamma):
    return gamma * torch.where(x > 0, x, alpha * torch.expm1(x))


def _clip(x, min, max):
    return x if min is None and max is None else torch.clamp(x, min, max)


def _slice(x, axis, start, stop, step):
    index = [slice(None)] * x.dim()
    index[axis] = slice(start, stop if stop >= 0 else None, step)
    return x[tuple(index)]


def _reshape(x, shape):
    return x.reshape((x.shape[0],) + tuple(shape[1:]) if shape and shape[0] is None else tuple(shape))


def _trailing(t: Tensor, shape: torch.Size) -> Tensor:
    """A layer-norm scale or bias broadcast to exactly the normalised shape, as F.layer_norm wants it."""
    if t.dim() > len(shape):
        t = t.reshape(t.shape[t.dim() - len(shape):])
    return t.expand(shape)


def _layer_norm(x, scale, bias=None, axis=-1, epsilon=1e-5):
    shape = x.shape[axis % x.dim():]
    return F.layer_norm(x, shape, _trailing(scale, shape), None if bias is None else _trailing(bias, shape), epsilon)


def _gemm(a, b, c=None, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
    y = alpha * torch.matmul(a.T if trans_a else a, b.T if trans_b else b)
    return y if c is None else y + beta * c


def _reduce(fn):
    return lambda x, axes, keepdims=True: fn(x, dim=tuple(axes), keepdim=bool(keepdims))


def _tensor_language(x, text, function, derivative):
    """The tl interpreter's values (PyTorch has no tensor-language operator): a reference, not a differentiable op."""
    y = evaluate(Op.TL_FUNCTION, [x.detach().cpu().float().numpy()], {"text": text, "function": function})
    return torch.from_numpy(y).to(device=x.device, dtype=x.dtype)


# The activations (`coopnn.graph.activations`), called with every attribute: the defaults are the activation table's.
_ACTIVATIONS: dict[Op, Callable[..., Tensor]] = {
    Op.RELU: torch.relu,
    Op.LEAKY_RELU: lambda x, alpha: F.leaky_relu(x, alpha),
    Op.ELU: lambda x, alpha: F.elu(x, alpha),
    Op.SELU: _selu,
    Op.CELU: lambda x, alpha: F.celu(x, alpha),
    Op.SIGMOID: torch.sigmoid,
    Op.HARD_SIGMOID: lambda x, alpha, beta: torch.clamp(alpha * x + beta, 0, 1),
    Op.HARD_SWISH: F.hardswish,
    Op.TANH: torch.tanh,
    Op.SOFTPLUS: _softplus,
    Op.SOFTSIGN: F.softsign,
    Op.GELU: lambda x, approximate: F.gelu(x, approximate=approximate),
    Op.SILU: F.silu,
    Op.MISH: F.mish,
    Op.CLIP: _clip,
    Op.EXP: torch.exp,
    Op.LOG: torch.log,
    Op.SIN: torch.sin,
    Op.COS: torch.cos,
    Op.NEG: torch.neg,
    Op.ABS: torch.abs,
    Op.SQRT: torch.sqrt,
    Op.RECIPROCAL: torch.reciprocal,
    Op.ERF: torch.erf,
    Op.FLOOR: torch.floor,
    Op.CEIL: torch.ceil,
    Op.SIGN: torch.sign,
    Op.TL_FUNCTION: _tensor_language,
}
assert set(_ACTIVATIONS) == set(ACTIVATIONS), f"activations without a rule: {set(ACTIVATIONS) - set(_ACTIVATIONS)}"

UNARY: dict[Op, Callable[..., Tensor]] = {
    **{op: functools.partial(fn, **forward_defaults(op)) for op, fn in _ACTIVATIONS.items()},
    Op.IDENTITY: lambda x: x,
    Op.NOT: torch.logical_not,
}

OTHERS: dict[Op, Callable[..., Tensor]] = {
    Op.ADD: torch.add,
    Op.SUB: torch.sub,
    Op.MUL: torch.mul,
    Op.DIV: torch.div,
    Op.POW: torch.pow,
    Op.MAX: torch.maximum,
    Op.MIN: torch.minimum,
    Op.PRELU: lambda x, slope: torch.where(x >= 0, x, x * slope),
    Op.LESS: torch.lt,
    Op.LESS_EQUAL: torch.le,
    Op.GREATER: torch.gt,
    Op.GREATER_EQUAL: torch.ge,
    Op.EQUAL: torch.eq,
    Op.AND: torch.logical_and,
    Op.OR: torch.logical_or,
    Op.XOR: torch.logical_xor,
    Op.WHERE: torch.where,
    Op.MATMUL: torch.matmul,
    Op.GEMM: _gemm,
    Op.CONCAT: lambda *xs, axis: torch.cat(xs, dim=axis),
    Op.SLICE: _slice,
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: lambda x, perm: x.permute(*perm),
    Op.SOFTMAX: lambda x, axis: F.softmax(x, dim=axis),
    Op.LOG_SOFTMAX: lambda x, axis: F.log_softmax(x, dim=axis),
    Op.LAYER_NORM: _layer_norm,
    Op.REDUCE_SUM: _reduce(torch.sum),
    Op.REDUCE_MEAN: _reduce(torch.mean),
    Op.REDUCE_MAX: _reduce(torch.amax),
    Op.REDUCE_MIN: _reduce(torch.amin),
}

OTHERS[Op.ENCODING] = lambda x, params=None, encoding=None: encode(encoding, x, params)  # `torch_encodings`

# LINEAR and CAST need the interpreter (the activation table, the float type), so TorchGraph supplies them.
COVERED = set(UNARY) | set(OTHERS) | {Op.LINEAR, Op.CAST}


class TorchGraph:
    """The graph's constants on `device` in `dtype` (booleans stay boolean); call it with input tensors by name."""

    def __init__(self, graph: Graph, dtype: torch.dtype, device: torch.device | str):
        self.graph = graph
        self.dtype = dtype
        self.constants = {name: self._tensor(array, device) for name, array in graph.constants.items()}
        self.rules: dict[Op, Callable[..., Tensor]] = {**UNARY, **OTHERS, Op.LINEAR: self._linear, Op.CAST: self._cast}
        last_use: dict[str, int] = {}
        for i, node in enumerate(graph.nodes):
            for name in node.inputs:
                last_use[name] = i
        keep = {v.name for v in graph.outputs} | set(graph.constants)
        # what each node's step may drop afterwards: intermediates are the whole memory footprint at large batches
        self.release = [{n for n in set(node.inputs) if last_use[n] == i and n not in keep}
                        for i, node in enumerate(graph.nodes)]

    def _tensor(self, array: np.ndarray, device) -> Tensor:
        t = torch.from_numpy(np.array(array))
        return t.to(device) if t.dtype == torch.bool else t.to(device, self.dtype)

    def _linear(self, x, weight, bias=None, activation: Activation | None = None):
        y = F.linear(x, weight, None if bias is None else bias.reshape(-1))
        return y if activation is None else self.rules[activation.op](y, **activation.attrs)

    def _cast(self, x, to):
        return x.bool() if to == "bool" else x.to(self.dtype)

    def __call__(self, inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
        env: dict[str, Any] = {**self.constants, **inputs}
        for node, release in zip(self.graph.nodes, self.release):
            env[node.outputs[0]] = self.rules[node.op](*(env[n] for n in node.inputs), **node.attrs)
            for name in release:
                if name not in inputs:
                    del env[name]
        batch = next(iter(inputs.values())).shape[0]
        return {v.name: env[v.name].expand((batch,) + v.features) for v in self.graph.outputs}
