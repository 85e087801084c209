"""The knobs of the step kernels and the cooperative-matrix weight gradients (`Tuning`), and the one place that picks
them for a model (`tuning_for`).

Every knob left None keeps the choice its kernel makes on its own (`coopnn.train.gpu.tiling.tiling_for`,
`coopnn.shaders.training.coopmat_gradients`), so `Tuning()` compiles the kernels exactly as before. bench/
train_variants.py sweeps them on a GPU; what it measured to be fastest for a model goes into `MEASURED`, keyed by the
model's layer shapes, and a session takes that entry (or `Tuning()`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from coopnn.shaders.training.layout import DELTA_LAYOUTS


@dataclass(frozen=True)
class Tuning:
    # the tiled step kernel (`coopnn.train.gpu.tiling.Tiling`)
    step_samples: int | None = None  # samples a work-group holds: a multiple of 16
    step_invocations: int | None = None  # invocations a work-group: a multiple of step_samples and of 32
    in_place: bool | None = None  # one activation buffer updated in place, or two
    # in place, subgroups beyond a layer's column tiles take a share of its row tiles (else they wait)
    step_row_groups: bool | None = None
    # the barrier after the forward pass makes the tape's stores visible only where the backward pass reads the tape
    lean_barrier: bool | None = None
    # the tape
    deltas: str | None = None  # "samples" or "features" (`TapeLayout.deltas`)
    # the cooperative-matrix weight gradients (`coopnn.shaders.training.coopmat_gradients`)
    row_tiles: int | None = None  # 16-row tiles of a subgroup's block
    column_tiles: int | None = None  # 16-column tiles of a subgroup's block
    chunk_tiles: int | None = None  # 16-sample tiles a chunk, fixed (else halved down to the target subgroups)
    target_subgroups: int | None = None  # the subgroups chunks are halved until they give
    staged: bool | None = None  # stage the tape tiles through workgroup memory (else by the block's row tiles)
    gradient_subgroups: int = 1  # subgroups a work-group, sharing a block and splitting its chunk's samples
    # the per-sample step kernel (`coopnn.backends.coopvec.step_kernels.coopvec`)
    sample_workgroup: int | None = None  # invocations a work-group: a multiple of 32
    # steps of up to `small_batch` samples run a copy of it with `small_batch_workgroup` invocations a work-group
    small_batch: int | None = None
    small_batch_workgroup: int | None = None
    table_copies: int | None = None  # copies of a grid's contended levels its float16-pair atomics add into

    def __post_init__(self):
        if self.deltas is not None and self.deltas not in DELTA_LAYOUTS:
            raise ValueError(f"deltas must be one of {', '.join(DELTA_LAYOUTS)} or None, not {self.deltas!r}")
        for name in ("step_samples", "step_invocations", "row_tiles", "column_tiles", "chunk_tiles",
                     "target_subgroups", "small_batch"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be positive or None, not {value}")
        for name in ("sample_workgroup", "small_batch_workgroup"):
            value = getattr(self, name)
            if value is not None and (value < 32 or value % 32):
                raise ValueError(f"{name} must be a positive multiple of 32 or None, not {value}")
        if (self.small_batch is None) != (self.small_batch_workgroup is None):
            raise ValueError("small_batch and small_batch_workgroup go together: set both or neither")
        if self.table_copies is not None and (self.table_copies < 1 or self.table_copies & (self.table_copies - 1)):
            raise ValueError(f"table_copies must be a power of two or None, not {self.table_copies}")
        if self.gradient_subgroups not in GRADIENT_SUBGROUPS:
            raise ValueError(f"gradient_subgroups must be one of {GRADIENT_SUBGROUPS}, not {self.gradient_subgroups}")

    def describe(self) -> str:
        """The knobs that differ from `Tuning()`, as name=value, or "default"."""
        changed = [f"{k}={v}" for k, v in asdict(self).items() if v != getattr(DEFAULT, k)]
        return " ".join(changed) or "default"


# a work-group's subgroups write its block's 16 x 16 tiles together, each invocation a whole number of elements
GRADIENT_SUBGROUPS = (1, 2, 4, 8)
DEFAULT = Tuning()

# Layer shapes ((outputs, inputs) per layer, in order) -> the tuning bench/train_variants.py measured fastest for them
# on the H200, whose gradients matched the default's.
MEASURED: dict[tuple[tuple[int, int], ...], Tuning] = {
    # mlp_32_64x4_16: whole steps 1.15x faster at 2^18, the products 1.44x
    # (bench/results/nvidia-h200-2026-12-02-0d3f101-train-variants.md)
    ((64, 32), (64, 64), (64, 64), (64, 64), (16, 64)): Tuning(row_tiles=4, column_tiles=4, gradient_subgroups=4),
    # tcnn's image configuration (a grid's 32 features in): its step reading the working copy 8.5% faster at 2^16 with
    # 256 invocations a work-group, 4.6% slower at 2^18 (bench/results/nvidia-h200-2026-12-03-93983e6-step-stages.md),
    # no faster at 2^17 (bench/results/nvidia-h200-2026-12-03-26ec04c-step-stages.md)
    ((64, 32), (64, 64), (3, 64)): Tuning(small_batch=1 << 16, small_batch_workgroup=256),
}


def tuning_for(shapes) -> Tuning:
    """The tuning of a model whose layers have these (outputs, inputs): its `MEASURED` entry, else `Tuning()`."""
    return MEASURED.get(tuple((int(r), int(c)) for r, c in shapes), DEFAULT)
