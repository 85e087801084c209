"""The flat parameter vector's layout: padded, aligned blocks in the model's order, and views that round-trip."""

from __future__ import annotations

import numpy as np

from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch.flat_layout import ALIGNMENT, GROUP, FlatLayout  # noqa: E402


def _values():
    rng = np.random.default_rng(0)
    return {"layers.0.weight": rng.normal(size=(64, 3)), "layers.0.bias": rng.normal(size=64),
            "layers.1.weight": rng.normal(size=(3, 64)), "layers.1.bias": rng.normal(size=3)}


def test_blocks_are_padded_to_groups_and_start_aligned():
    layout = FlatLayout.of({name: array.shape for name, array in _values().items()})
    entries = list(layout.entries.values())
    assert [e.padded for e in entries] == [(64, 8), (64,), (8, 64), (8,)]
    assert all(e.offset % ALIGNMENT == 0 for e in entries)
    assert all(n % GROUP == 0 for e in entries for n in e.padded)
    assert all(a.offset + a.size <= b.offset for a, b in zip(entries, entries[1:]))
    assert layout.size % ALIGNMENT == 0 and layout.size >= entries[-1].offset + entries[-1].size


def test_flatten_and_views_round_trip_with_zero_padding():
    values = _values()
    layout = FlatLayout.of({name: array.shape for name, array in values.items()})
    flat = layout.flatten(values)
    assert flat.dtype == np.float32
    views = layout.views(flat)
    for name, array in values.items():
        np.testing.assert_array_equal(views[name], array.astype(np.float32))
    assert np.count_nonzero(flat) == sum(a.size for a in values.values())


def test_views_of_a_torch_tensor_share_its_memory():
    values = _values()
    layout = FlatLayout.of({name: array.shape for name, array in values.items()})
    tensor = torch.from_numpy(layout.flatten(values))
    views = layout.views(tensor)
    views["layers.1.bias"].fill_(7.0)
    assert torch.count_nonzero(tensor == 7.0) == 3
    np.testing.assert_array_equal(views["layers.0.weight"].numpy(), values["layers.0.weight"].astype(np.float32))
