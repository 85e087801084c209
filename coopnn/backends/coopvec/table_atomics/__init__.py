"""How the per-sample coopvec step kernel adds a trained grid's gradient (one module each defining `METHOD`, a
`TableAtomics`, found here by name: adding one is adding a module): the buffer it adds into with which atomics, what
the device must offer for them, and the commands around the step kernel that zero that buffer and bring its sums
into the float32 gradient the optimizer reads.

`table_atomics=` names one, or "auto", which takes the first of `AUTO_TABLE_ATOMICS` the device offers
(`auto_table_atomics`).
"""

from __future__ import annotations

from coopnn.errors import BackendUnavailableError
from coopnn.train.gpu.families import members

# "auto" takes the first of these the device offers: float16 pairs made tcnn's image configuration's step at 2^18
# 0.510 ms against 0.910 with float32 atomics, at the PSNR of the PyTorch reference
# (bench/results/nvidia-h200-2026-12-03-94b4281-hashgrid.md), and match the oracle as float32 atomics do
# (bench/results/nvidia-h200-2026-12-03-94b4281-gpu-tests.md); float32 atomics where the device lacks them.
AUTO_TABLE_ATOMICS = ("float16_pairs", "float32")


class TableAtomics:
    """One way of adding a grid's gradient in the step kernel (`emitter`: the `CoopvecEmitter` compiling it;
    `session`: the `CoopvecTrainingSession` running it)."""

    name = ""
    features: frozenset[str] = frozenset()  # what the device must enable for the step kernel's atomics
    # whether `after_step`'s dispatches leave the buffer the step kernel adds into zero (no fill before the next step)
    clears_after_step = False

    def element_type(self, emitter):
        """(element type, array stride in bytes) of the runtime array the step kernel binds as its table gradient."""
        raise NotImplementedError

    def adds(self, emitter, binding: int, start: int, encoding):
        """`coopnn.shaders.targets.encodings.grid.scatter_gradient`'s add(first, values, level) into `binding`, for a
        table at element `start` of the flat parameters (its first element `first` + 0)."""
        raise NotImplementedError

    def tuned(self, tuning) -> TableAtomics:
        """This method as a session's `Tuning` sets it (itself where no knob applies)."""
        return self

    def missing_features(self, info) -> list[str]:
        """The features of this method the device (`DeviceInfo`) lacks, sorted."""
        return sorted(f for f in self.features if not info.features.get(f))

    def check_device(self, info) -> None:
        """BackendUnavailableError naming this method where the device (`DeviceInfo`) lacks its features."""
        missing = self.missing_features(info)
        if missing:
            others = sorted(name for name, method in table_atomics_methods().items()
                            if method is not self and not method.missing_features(info))
            raise BackendUnavailableError(f"table_atomics={self.name!r} needs {', '.join(missing)}, which "
                                          f"{info.describe()} lacks; use table_atomics="
                                          + " or ".join(repr(o) for o in others))

    def shaders(self, session) -> list:
        """The kernels `after_step` dispatches (before the device is made)."""
        return []

    def create_buffers(self, session) -> None:
        """Make what the step kernel adds into, where it is not the gradient."""

    def gradient_buffer(self, session):
        """The buffer bound as the step kernel's table gradient."""
        return session.gradient

    def zeroed(self, session) -> tuple:
        """(buffer, first byte, bytes) the step kernel adds into: zeroed before it, or once where `after_step`
        clears it."""
        table = session.layout.tables[0]
        return session.gradient, table.offset * 4, table.size * 4

    def after_step(self, session) -> list:
        """Dispatches after the step kernel leaving the table's gradient in the float32 gradient (none where it is
        there already)."""
        return []


def table_atomics_methods() -> dict[str, TableAtomics]:
    return members(__name__, "METHOD")


def auto_table_atomics(info) -> TableAtomics:
    """The member "auto" takes on the device `info` (a `DeviceInfo`): the first of `AUTO_TABLE_ATOMICS` whose
    features it offers, else the last (whose `check_device` then names what is missing)."""
    methods = table_atomics_methods()
    return next((methods[name] for name in AUTO_TABLE_ATOMICS if not methods[name].missing_features(info)),
                methods[AUTO_TABLE_ATOMICS[-1]])
