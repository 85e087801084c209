"""`backend="coopvec"`: cooperative vectors (VK_NV_cooperative_vector): the target (`target`, `values`), the
driver's weight layouts (`layouts`, `driver`), the record (`backend`), and training (`training`, with the weight
gradients of `coopvec_gradients` and `coopmat_gradients`)."""

from coopnn.backends import register
from coopnn.backends.coopvec.backend import CoopvecBackend

register(CoopvecBackend())
