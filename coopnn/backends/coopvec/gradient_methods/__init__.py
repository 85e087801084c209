"""The coopvec training session's weight-gradient methods, one module each defining `METHOD` (a
`coopnn.train.gpu.families.GradientMethod`), found here by name: adding one is adding a module.

`gradients=` names any of them, or "auto", which takes `AUTO_GRADIENTS`.
"""

from __future__ import annotations

from coopnn.train.gpu.families import GradientMethod, members

# "auto" takes cooperative-matrix gradients: they made whole steps fastest on the three benchmark MLPs at batch 2^18,
# and lost only on the smallest at 2^16, by less than they won (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-
# training-b262144.md, ...-b65536.md); fused gradients made whole steps slower
# (bench/results/nvidia-h200-2026-11-28-fused-gradients.md). The session does not know the batch when it compiles.
AUTO_GRADIENTS = "coopmat"


def gradient_methods() -> dict[str, GradientMethod]:
    return members(__name__, "METHOD")
