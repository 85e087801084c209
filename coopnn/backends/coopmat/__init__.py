"""`backend="coopmat"`: the tile kernel on VK_KHR_cooperative_matrix alone, for the tensor cores of any vendor: its
weight buffer (`packing`), its SPIR-V (`target`), its text form (`text`) and the record (`backend`)."""

from coopnn.backends import register
from coopnn.backends.coopmat.backend import CoopmatBackend

register(CoopmatBackend())
