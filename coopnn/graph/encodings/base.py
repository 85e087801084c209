"""What every encoding is: a frozen dataclass config with its sizes, its parameter layout and its float32 numpy
forward and backward passes. The graph node (`Op.ENCODING`), the trainer and the backends only use this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

Array = np.ndarray


@dataclass(frozen=True)
class Encoding(ABC):
    """One encoding of `n_input_dims` input columns into `n_output_dims` output columns.

    `forward(x, params)` maps a float32 [batch, n_input_dims] array (and the flat float32 parameter vector, empty for
    encodings without parameters) to [batch, n_output_dims]. `backward(x, params, dy)` gives the gradients of a loss
    in the parameters (same shape as `params`) and in `x`, given its gradient `dy` in the output.
    """

    otype: ClassVar[str]  # the name tiny-cuda-nn registers it under
    # what tiny-cuda-nn writes into columns it pads this encoding's output with (Composite alignment, MLP alignment)
    pad_value: ClassVar[float] = 1.0
    pads_in_front: ClassVar[bool] = False  # SphericalHarmonics writes its padding before its outputs

    n_input_dims: int

    @property
    @abstractmethod
    def n_output_dims(self) -> int:
        """Output columns (unpadded)."""

    @property
    def n_parameters(self) -> int:
        return 0

    @property
    def output_alignment(self) -> int:
        """What tiny-cuda-nn pads the output width of the encoding before this one in a Composite to a multiple of."""
        return 1

    def initial_parameters(self, rng: np.random.Generator) -> Array:
        """A fresh parameter vector (float32, length `n_parameters`) drawn from `rng`."""
        return np.zeros(0, np.float32)

    @abstractmethod
    def forward(self, x: Array, params: Array) -> Array:
        """The encoded [batch, n_output_dims] float32 array."""

    @abstractmethod
    def backward(self, x: Array, params: Array, dy: Array, input_gradient: bool = True) -> tuple[Array, Array]:
        """(d_params, d_x) for the output gradient `dy` [batch, n_output_dims]; without `input_gradient` d_x may be
        left zero (the trainer asks for it only when something before the encoding trains)."""

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """The tiny-cuda-nn config that makes this encoding again (every key written out)."""

    def describe(self) -> str:
        """One line for summaries: the otype and its settings."""
        keys = ", ".join(f"{k}={v}" for k, v in self.to_config().items() if k not in ("otype", "nested"))
        return f"{self.otype}({keys})" if keys else self.otype


def as_rows(x: Array, width: int) -> Array:
    """`x` as a float32 [batch, width] array."""
    return np.asarray(x, np.float32).reshape(-1, width)


def float32(array: Any) -> Array:
    return np.asarray(array, dtype=np.float32)
