"""`backend="coopmat2"`: a work-group carries a tile of samples through every layer as workgroup-scope cooperative
matrices (VK_NV_cooperative_matrix2, tensor addressing): the kernel's steps (`steps`), their SPIR-V (`target`) and
text form (`text`), and the record (`backend`)."""

from coopnn.backends import register
from coopnn.backends.coopmat2.backend import Coopmat2Backend

register(Coopmat2Backend())
