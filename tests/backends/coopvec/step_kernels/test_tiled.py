"""The tiled step kernel's blocked copy made from a working copy written from outside (`TiledStep.refresh_steps`):
its copy regions, checked without a device against the scatter the optimizer does."""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopvec.step_kernels.tiled import blocked_runs
from coopnn.shaders.training.layout import ParameterLayout


def test_the_copy_regions_rearrange_the_working_copy_as_the_scatter_does():
    layout = ParameterLayout.of([("w0", "b0", 32, 48), ("w1", "b1", 16, 32), ("w2", "b2", 16, 16)])
    order = layout.block_index(16)
    flat = np.random.default_rng(1).standard_normal(layout.size).astype(np.float16)
    want = np.empty_like(flat)
    want[order] = flat
    got = np.full_like(flat, np.nan)
    runs = blocked_runs(order)
    for source, destination, count in runs:
        got[destination:destination + count] = flat[source:source + count]
    np.testing.assert_array_equal(got, want)
    weights = sum(shape.weight_size for shape in layout.layers)
    assert len(runs) <= weights // 16 + 1  # a tile row a region at most, biases joined to their neighbours
    assert sum(count for _, _, count in runs) == layout.size
