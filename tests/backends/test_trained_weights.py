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


def _pair(model_shapes, session_shapes, table=False):
    """trained_entries of a one-layer model and session; with `table`, the session trains a grid's table too (the
    model's kernel holding it where model_shapes has a third shape)."""
    names = ("w", "b", "t")
    executable = SimpleNamespace(
        context=SimpleNamespace(shared_context=CONTEXT),
        binary=SimpleNamespace(weight_image=SimpleNamespace(
            entries={f"k_{n}": _entry(f"k_{n}", s) for n, s in zip(names, model_shapes)})),
        sources={f"k_{n}": (f"graph_{n}",) for n in names})
    layer = SimpleNamespace(weight="layers.0.weight", bias="layers.0.bias", weight_constant="graph_w",
                            bias_constant="graph_b")
    tables = [SimpleNamespace(name="encoding.params", constant="graph_t")] if table else []
    session = SimpleNamespace(context=SimpleNamespace(shared_context=CONTEXT),
                              plan=SimpleNamespace(layers=[layer], tables=tables))
    session_entries = {name: _entry(name, shape) for name, shape in
                       zip(("layers.0.weight", "layers.0.bias", "encoding.params"), session_shapes)}
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


def test_a_trained_grids_table_pairs_up_with_the_layers():
    pairs = _pair([(64, 8), (64,), (512,)], [(64, 8), (64,), (512,)], table=True)
    assert {name: s.name for name, (s, _) in pairs.items()} == {
        "k_w": "layers.0.weight", "k_b": "layers.0.bias", "k_t": "encoding.params"}


def test_a_model_not_holding_the_trained_table_takes_the_host_path():
    assert _pair([(64, 8), (64,)], [(64, 8), (64,), (512,)], table=True) is None
