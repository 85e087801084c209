"""Which of a compiled model's weight entries a training session's buffer can fill on the GPU
(`coopnn.backends.trained_weights`): same shapes, or the session's padded to whole matrices; no GPU."""

from __future__ import annotations

import math
from types import SimpleNamespace

from coopnn.backends.trained_weights import trained_entries
from coopnn.layouts.pack import Entry

CONTEXT = object()


def _entry(name, shape, offset=0):
    layout = "vector" if len(shape) == 1 else "row_major"
    return Entry(name, offset, 2 * math.prod(shape), shape, layout, "fp16")


def _pair(model_shapes, session_shapes):
    names = ("w", "b")
    executable = SimpleNamespace(
        context=SimpleNamespace(shared_context=CONTEXT),
        binary=SimpleNamespace(weight_image=SimpleNamespace(
            entries={f"k_{n}": _entry(f"k_{n}", s) for n, s in zip(names, model_shapes)})),
        sources={f"k_{n}": (f"graph_{n}",) for n in names})
    layer = SimpleNamespace(weight="layers.0.weight", bias="layers.0.bias", weight_constant="graph_w",
                            bias_constant="graph_b")
    session = SimpleNamespace(context=SimpleNamespace(shared_context=CONTEXT), plan=SimpleNamespace(layers=[layer]))
    session_entries = {"layers.0.weight": _entry("layers.0.weight", session_shapes[0]),
                       "layers.0.bias": _entry("layers.0.bias", session_shapes[1])}
    return trained_entries(executable, session, session_entries)


def test_entries_of_the_same_shape_pair_up():
    pairs = _pair([(64, 8), (64,)], [(64, 8), (64,)])
    assert {name: (s.name, d.name) for name, (s, d) in pairs.items()} == {
        "k_w": ("layers.0.weight", "k_w"), "k_b": ("layers.0.bias", "k_b")}


def test_a_session_padded_to_whole_matrices_fills_the_leading_rows_and_columns():
    assert _pair([(3, 2), (3,)], [(16, 16), (16,)]) is not None


def test_a_session_entry_smaller_than_the_models_is_refused():
    assert _pair([(64, 16), (64,)], [(64, 8), (64,)]) is None
    assert _pair([(64, 8), (64,)], [(64, 8), (48,)]) is None
