"""The training-step kernel program: forward keeping the tape, the loss and its gradient, and the backward pass.

One invocation per sample: the parameter-free prefix lowered as in inference; each layer stores its input on the
tape, multiplies, adds the bias and applies its activation; the loss's per-element terms give the sample's loss
(stored, summed over the outputs) and the gradient in the prediction, scaled by the `loss_scale` word of the
training state buffer (kept on the device, so steps need no host in between); then
from the last layer back, each layer's delta (the gradient times its activation's derivative at the pre-activation)
goes on the tape and the product with the transposed weight carries it to the layer before. Weight gradients are
sums over samples of the tape, which other kernels reduce; with `accumulate` (the outer-product method) the kernel
adds each sample's delta x input and delta to parameters of role "gradient" (`gradient_name`) instead. With a tape of
no layers (`accumulate`, or a kernel that forms the weight gradients from what it holds, `tiled_fused`) nothing goes on
the tape. A loss that `writes_input_gradient` also gets the gradient in the first layer's input (the transposed
product once more) stored into the output INPUT_GRADIENT, where no prefix stands before the first layer. A trained
grid (`TrainingPlan.tables`) reads its tables from the flat parameters like the layers, and the gradient in its
outputs (the first layer's transposed product) is added into the table's part of the flat gradient, bound as
TABLE_GRADIENT (`accumulate_encoding`: atomics, samples sharing entries; the coopvec target's float16 pairs add into a
float16 buffer of the table's own bound there instead, `coopnn.backends.coopvec.table_atomics`).
"""

from __future__ import annotations

import numpy as np

from coopnn.shaders.kernel import activations
from coopnn.shaders.kernel.derivatives import derivative
from coopnn.shaders.kernel.lower import Lowerer
from coopnn.shaders.kernel.program import KernelProgram, VecType
from coopnn.shaders.targets.base import TRAINING_STATE_FIELDS
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.train.gpu.loss_kernels import loss_terms
from coopnn.train.gpu.plan import PlannedTable, TrainingPlan
from coopnn.train.losses import Loss

TARGET = "target"  # the graph-name of the targets' input binding
TARGET_PARAM = "t"  # the kernel parameter the targets are loaded from
TAPE, LOSS, STATE = "tape", "loss", "state"
INPUT_GRADIENT = "input_gradient"  # the output a loss that `writes_input_gradient` gets: d loss / d first input
LOSS_SCALE = "loss_scale"
TABLE_GRADIENT = "table_gradient"  # the flat gradient, which a trained grid's gradient is added into


def gradient_name(parameter: str) -> str:
    """The kernel parameter a weight's or bias's gradient is accumulated into (with `accumulate`)."""
    return f"{parameter}/gradient"


def step_program(plan: TrainingPlan, loss: Loss, tape: TapeLayout, accumulate: bool = False,
                 layout: ParameterLayout | None = None) -> KernelProgram:
    """The step program of `plan`; weights are parameters named after the stable parameter names; a trained grid's
    gradient goes to its table's offset in `layout`."""
    lw = Lowerer(plan.graph)
    lw.lower_inputs()
    tables = {table.node.name: table for table in plan.tables}
    for node in plan.prefix:
        if node.name in tables:
            lw.vectors[node.outputs[0]] = _trained_encoding(lw, tables[node.name])
        else:
            lw.lower_node(node)
    k = lw.k
    out_features = plan.out_features
    k.add_param(TARGET_PARAM, "input", (out_features,), TARGET)
    k.add_param(TAPE, "tape", (tape.width,))
    k.add_param(LOSS, "loss", (1,))
    k.add_param(STATE, "state", (len(TRAINING_STATE_FIELDS),))
    # through a prefix (an encoding) the first layer's input is not the network's: its gradient is not written
    writes_input = loss.writes_input_gradient and not plan.prefix
    if writes_input:
        k.add_param(INPUT_GRADIENT, "output", (plan.layers[0].cols,), INPUT_GRADIENT)
    constants = plan.graph.constants
    x = lw.vectors[plan.input]
    saved = []
    for index, layer in enumerate(plan.layers):
        if tape.layers:
            k.emit("store", None, (x, TAPE), start=tape.input_start(index), width=tape.layers[index].cols,
                   layout="samples")
        w = k.own_param(layer.weight, constants[layer.weight_constant], "matrix")
        b = k.own_param(layer.bias, constants[layer.bias_constant].reshape(-1), "vector")
        z = k.emit("gemv", VecType("f32", layer.rows), (w, x, b), transpose=False)
        act = layer.activation
        y = z if act is None else activations.apply(k, act.op, z, act.attrs)
        saved.append((x, w, z, y))
        x = y
    target = k.emit("load", VecType("f32", out_features), (TARGET_PARAM,))
    values, derivatives = loss_terms(k, loss, x, target)
    mask = k.emit("sample_mask", VecType("f32", out_features))
    k.emit("store", None, (k.reduce("reduce_sum", k.binary("mul", values, mask), out_features), LOSS))
    scale = k.emit("uniform", VecType("f32", out_features), name=LOSS_SCALE)
    gradient = k.binary("mul", k.binary("mul", derivatives, mask), scale)
    for index in reversed(range(len(plan.layers))):
        layer, (x, w, z, y) = plan.layers[index], saved[index]
        act = layer.activation
        delta = gradient if act is None else k.binary("mul", gradient, derivative(k, act.op, z, y, act.attrs))
        if accumulate:
            k.emit("accumulate_outer", None, (delta, x, k.add_param(gradient_name(layer.weight), "gradient",
                                                                    (layer.rows, layer.cols)).name))
            k.emit("accumulate_sum", None, (delta, k.add_param(gradient_name(layer.bias), "gradient",
                                                               (layer.rows,)).name))
        elif tape.layers:
            k.emit("store", None, (delta, TAPE), start=tape.delta_start(index), width=tape.layers[index].rows,
                   layout=tape.deltas)
        if index or writes_input or plan.tables:  # a trained grid takes the first layer's input gradient
            gradient = k.emit("gemv", VecType("f32", layer.cols), (w, delta), transpose=True)
    for table in plan.tables:  # at most one: a trained grid feeds the first layer
        _accumulate_table(lw, table, gradient, layout)
    if writes_input:
        k.emit("store", None, (gradient, INPUT_GRADIENT))
    return k.build()


def _trained_encoding(lw: Lowerer, table: PlannedTable) -> str:
    """The encoding of a trained grid, its tables a parameter of the stable name (at its place in the flat
    parameters)."""
    node = table.node
    params = lw.k.own_param(table.name, np.asarray(lw.graph.constants[table.constant], np.float32).reshape(-1),
                            "vector")
    return lw.k.emit("encode", None, (lw.vectors[node.inputs[0]], params), encoding=node.attrs["encoding"])


def _accumulate_table(lw: Lowerer, table: PlannedTable, gradient: str, layout: ParameterLayout | None) -> None:
    """Add the grid's gradient from `gradient`, the loss's gradient in its outputs, into its table's elements of
    the flat gradient."""
    if layout is None:
        raise ValueError("a step program training a grid needs the parameter layout its table's gradient goes to")
    start = next(t.offset for t in layout.tables if t.name == table.name)
    target = lw.k.add_param(TABLE_GRADIENT, "table_gradient", (layout.size,))
    lw.k.emit("accumulate_encoding", None, (lw.vectors[table.node.inputs[0]], gradient, target.name),
              encoding=table.node.attrs["encoding"], start=start)
