"""The two families a `KernelTrainingSession` composes one member of each: a step kernel (forward, loss, backward)
and a gradient method (how the weight gradients are reduced), and the registry a target finds its members with.

A member is one module defining one object, `KERNEL` (a `StepKernel`) or `METHOD` (a `GradientMethod`); a target's
family is a package of such modules (`coopnn.backends.coopvec.step_kernels`, `...gradient_methods`), found by
`members`, so adding a member is adding a module. The session asks its two members the questions below rather than
testing names, and the members ask the session (`session`: the `KernelTrainingSession` they serve) for its plan,
layouts, device and buffers.
"""

from __future__ import annotations

import functools
from typing import Any

from coopnn.registry import package_modules
from coopnn.shaders.targets.base import Binary


class StepKernel:
    """A step kernel: what it is compiled from, how it is dispatched, and the weight buffers it reads."""

    name = ""
    selectable = True  # whether `step=` may name it (else a gradient method takes it: `GradientMethod.step_for`)
    preference = 0  # "auto" takes the selectable kernel of least preference that `takes_auto`
    keeps_blocked_copy = False  # the optimizer also writes a blocked working copy (`ParameterLayout.block_index`)
    samples_major_deltas = False  # it stores deltas sample-major most cheaply, for methods that read either layout

    def padded(self, width: int) -> int:
        """The width a layer of `width` features takes in the kernel's parameter layout."""
        return width

    def takes_auto(self, session) -> bool:
        """Whether `step="auto"` takes this kernel for the session's model, before the device is known."""
        return False

    def unsupported_reason(self, session) -> str | None:
        """Why the kernel cannot run on the session's device (workgroup memory, subgroups), or None."""
        return None

    def compile(self, session) -> Binary:
        raise NotImplementedError

    def granularity(self, samples: int, binary: Binary) -> int:
        """The multiple of samples a step runs, given the gradient method's `samples` and the compiled kernel."""
        return samples

    def groups(self, session, count: int) -> int:
        """Work-groups of the kernel for `count` invocations."""
        return session.step_kernel.group_count_for(count)

    def launch(self, session, count: int) -> tuple:
        """(loaded kernel, work-groups) a step of `count` invocations dispatches: the session's step kernel."""
        return session.step_kernel, self.groups(session, count)

    def binaries(self, session) -> dict[str, Binary]:
        """The kernel's binaries beside the session's `binary`, by name (none)."""
        return {}

    def create_weights(self, session) -> None:
        """Make the buffers the kernel reads its weights from (once, before the first `working_steps`)."""

    def weights_buffer(self, session) -> Any:
        raise NotImplementedError

    def working_steps(self, session) -> list:
        """Commands after the optimizer that turn its working copy into what the kernel reads."""
        return []

    def refresh_steps(self, session) -> list:
        """Commands that turn a working copy written from outside (a `coopnn.torch` module's parameters copied in)
        into what the kernel reads, including what the optimizer itself would have written beside it."""
        return self.working_steps(session)


class GradientMethod:
    """A weight-gradient method: what it needs of the step kernel and the device, its kernels, buffers and
    dispatches."""

    name = ""
    keeps_tape = True  # the step kernel writes a tape the method's kernels read
    accumulates = False  # the step kernel sums the weight gradients itself (`step_program(accumulate=True)`)
    # the optimizer adds the chunks' partial gradients itself (`products`): their kernels flag non-finite ones, or
    # no step is skipped for them
    optimizer_adds_partials = False
    features: frozenset[str] = frozenset()  # device features beyond its kernels' own
    device_features: frozenset[str] = frozenset()  # every feature any kernel of the method may need

    def step_for(self, requested: str) -> str:
        """The step kernel the method runs with for `step=requested` ("auto" or a selectable kernel's name), or
        ValueError where it cannot."""
        return requested

    def delta_layout(self, session) -> str:
        """How the tape keeps deltas (`coopnn.shaders.training.layout`): as the method's kernels read them."""
        return "features"

    def shaders(self, session) -> list[Binary]:
        """The kernels `products` dispatches, the partial sum last where it has one (before the device is made)."""
        raise NotImplementedError

    def weight_image(self, session, packed):
        """The per-sample step kernel's weight image: `packed`, with the method's accumulators where it has them."""
        return packed

    def create_buffers(self, session) -> None:
        """Make the buffers the method's dispatches read besides the tape (once)."""

    def partial_chunks(self, session, capacity: int) -> int:
        """The most partial gradients a batch of up to `capacity` samples is summed in; 0: none."""
        return 0

    def step_prologue(self, session) -> list:
        """Commands before the step kernel."""
        return []

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        """Dispatches summing the tape into the gradient, and 0; or into the partial gradients of chunks of the
        batch, and the number of chunks."""
        raise NotImplementedError


@functools.cache
def members(package: str, attribute: str) -> dict[str, Any]:
    """The members of the family `package` (a package of modules each defining `attribute`), by name."""
    found: dict[str, Any] = {}
    for module in package_modules(package):
        member = getattr(module, attribute, None)
        if member is None:
            continue
        if member.name in found:
            raise ValueError(f"{package}: {member.name!r} defined twice")
        found[member.name] = member
    return dict(sorted(found.items()))
