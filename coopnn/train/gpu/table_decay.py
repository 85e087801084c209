"""Weight decay and a trained grid's table on the GPU optimizer: the table follows the layers in the flat arrays,
so sparing it (tiny-cuda-nn decays its MLP's matrices, not a grid's entries; `Optimizer.no_decay`) is decaying only
the leading `decay_count` elements (`coopnn.shaders.training.optimizer`, `decay_limit`)."""

from __future__ import annotations

from coopnn.errors import CompileError
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.optim import Optimizer


def decayed_elements(layout: ParameterLayout, optimizer: Optimizer) -> int:
    """How many leading flat elements weight decay applies to: the layers', where the optimizer's `no_decay` names
    the tables, else all; a CompileError where it names a layer's parameter, which the GPU optimizer cannot spare."""
    exempt = set(getattr(optimizer, "no_decay", ()))
    if not optimizer.weight_decay:
        return layout.size
    layers = exempt & {name for layer in layout.layers for name in (layer.weight, layer.bias)}
    if layers:
        raise CompileError(f"the GPU optimizer spares only a grid's table from weight decay, not {sorted(layers)[0]!r}"
                           f" (no_decay); train with backend='numpy'")
    # a plan trains at most one table, the grid feeding the first layer
    return layout.layers_size if {table.name for table in layout.tables} <= exempt else layout.size
