"""The coopvec training session's step kernels, one module each defining `KERNEL` (a
`coopnn.train.gpu.families.StepKernel`), found here by name: adding one is adding a module.

`step=` names the selectable ones (`STEP_METHODS`); "auto" takes the first of them, by `preference`, that
`takes_auto` the model.
"""

from __future__ import annotations

from coopnn.train.gpu.families import StepKernel, members


def step_kernels() -> dict[str, StepKernel]:
    return members(__name__, "KERNEL")


def selectable() -> list[StepKernel]:
    """The kernels `step=` may name, in the order "auto" tries them."""
    return sorted((k for k in step_kernels().values() if k.selectable), key=lambda k: k.preference)
