"""`backend="coopvec"`: cooperative vectors (VK_NV_cooperative_vector): the target (`target`, with the lowerings of
`elementwise`, registered here, and `values`), the driver's weight layouts (`layouts`, `driver`), the record
(`backend`), and training (`training`, composing a member of `step_kernels` and of `gradient_methods`; the
per-sample kernels' accumulations are `accumulate`, whose lowerings are registered here, and `outer_product`). The
cooperative-matrix training kernels it shares with other targets are in `coopnn.shaders.training`."""

from coopnn.backends import register
from coopnn.backends.coopvec import accumulate  # noqa: F401  (registers the target's accumulation lowerings)
from coopnn.backends.coopvec import elementwise  # noqa: F401  (registers its arithmetic and elementwise lowerings)
from coopnn.backends.coopvec.backend import CoopvecBackend

register(CoopvecBackend())
