"""Each rank's batch stream: the trainer's seed keyed by the rank, so ranks draw different batches with the same
sampler (`coopnn.shaders.targets.sampler`) and rank 0 draws exactly the batches of a single-process run."""

from __future__ import annotations

# An odd 32-bit constant (the golden ratio's fraction): seeds of neighbouring ranks differ in many bits.
RANK_STRIDE = 0x9E3779B9
SEED_MASK = 0xFFFFFFFF  # the step kernels take the seed as a u32 push constant


def rank_seed(seed: int, rank: int) -> int:
    """The sampler seed rank `rank` draws its batches with; `seed` itself for rank 0."""
    if rank < 0:
        raise ValueError(f"a rank is 0 or more, not {rank}")
    return (seed + rank * RANK_STRIDE) & SEED_MASK
