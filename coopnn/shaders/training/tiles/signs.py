"""ReLU's derivative kept in registers between the tiled step kernel's forward and backward passes (`SignBits`).

In place (`Tiling.in_place`), the subgroup that computes a column tile of a layer's output in the forward pass is the
one that forms the gradient at that output in the backward pass, and components of matrices of one type are the same
elements. So each invocation keeps a bit for every component it holds of a ReLU layer's output: whether the output's
float16 value there, the one the tape holds, is positive. That is ReLU's derivative as the backward pass would read
it back from the tape, so the gradients are the same, and the backward pass reads no tape tile for it.

An invocation holds 256 / SubgroupSize components of a 16x16 matrix. The bits are laid out for the smallest subgroup
the device may run (`bits_per_row_tile`): whole row tiles to a 32-bit word, a row tile's bits consecutive.

Why: reading ReLU's output back from the tape was a large share of the step kernel's bytes, and the bits made whole
steps faster for few registers more, with gradients identical
(bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md).
"""

from __future__ import annotations

from coopnn.shaders.training.tiles.addressing import MATRIX
from coopnn.graph.ir import Op
from coopnn.shaders.spirv.ops import Ops

# Activations whose derivative is 1 where the output is positive and 0 elsewhere
SIGN_DERIVATIVES = frozenset({Op.RELU})
WORD_BITS = 32


def bits_per_row_tile(min_subgroup_size: int) -> int | None:
    """Bits a row tile takes: the components an invocation holds of a 16x16 matrix on subgroups of
    `min_subgroup_size`, or None where that is more than a word."""
    held = MATRIX * MATRIX // min_subgroup_size
    return held if held <= WORD_BITS else None


class SignBits:
    """Words of sign bits in Function variables, by layer and row tile, zero until the forward pass sets them."""

    def __init__(self, fn, u32, bool_type, per_row_tile: int):
        self.fn, self.ops, self.u32, self.bool = fn, Ops(fn), u32, bool_type
        self.per_row_tile, self.row_tiles_a_word = per_row_tile, WORD_BITS // per_row_tile
        self.words: dict[tuple[int, int], object] = {}

    def _word(self, layer: int, row_tile: int):
        key = (layer, row_tile // self.row_tiles_a_word)
        if key not in self.words:
            self.words[key] = self.fn.variable(self.u32, initializer=self.fn.module.constant(self.u32, 0),
                                               name=f"signs_{key[0]}_{key[1]}")
        return self.words[key]

    def _bit(self, row_tile: int, component):
        first = self.fn.module.constant(self.u32, row_tile % self.row_tiles_a_word * self.per_row_tile)
        return self.ops.int_add(self.u32, component, first)

    def keep(self, layer: int, row_tile: int, component, positive) -> None:
        """Sets the bit of `component` of row tile `row_tile` of layer `layer`'s output where `positive`."""
        fn, word = self.fn, self._word(layer, row_tile)
        one, zero = (fn.module.constant(self.u32, v) for v in (1, 0))
        bit = self.ops.select(self.u32, positive, self.ops.shift_left(self.u32, one,
                                                                      self._bit(row_tile, component)), zero)
        self.ops.store(word, self.ops.bitwise_or(self.u32, self.ops.load(self.u32, word), bit))

    def positive(self, layer: int, row_tile: int, component):
        """Whether the output at `component` of row tile `row_tile` of layer `layer` was positive (a bool)."""
        fn = self.fn
        word = self.ops.load(self.u32, self._word(layer, row_tile))
        shifted = self.ops.shift_right(self.u32, word, self._bit(row_tile, component))
        return self.ops.int_not_equal(self.bool, self.ops.bitwise_and(self.u32, shifted,
                                                                      fn.module.constant(self.u32, 1)),
                       fn.module.constant(self.u32, 0))
