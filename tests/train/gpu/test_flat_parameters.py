"""Parameters to and from a session's flat arrays (`coopnn/train/gpu/flat_parameters.py`), with a target's padded
layer blocks."""

from __future__ import annotations

import numpy as np

import coopnn
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.gpu.flat_parameters import flatten, unflatten
from coopnn.train.gpu.plan import plan_training


def _padded(n: int) -> int:
    return -(-n // 8) * 8


def test_parameters_round_trip_through_padded_blocks_that_stay_zero():
    plan = plan_training(coopnn.mlp(3, [5, 12], 2, backend="numpy", seed=4).graph)
    layout = ParameterLayout.of([(p.weight, p.bias, _padded(p.rows), _padded(p.cols)) for p in plan.layers])
    rng = np.random.default_rng(0)
    values = {name: rng.standard_normal(shape).astype(np.float32) for p in plan.layers
              for name, shape in ((p.weight, (p.rows, p.cols)), (p.bias, (p.rows,)))}
    flat = flatten(layout, values)
    assert flat.shape == (layout.size,) and np.count_nonzero(flat) == sum(v.size for v in values.values())
    back = unflatten(layout, plan, flat)
    assert back.keys() == values.keys()
    for name, value in values.items():
        np.testing.assert_array_equal(back[name], value, err_msg=name)
        assert back[name].flags.c_contiguous


def test_parameters_not_given_are_zero():
    plan = plan_training(coopnn.mlp(2, [4], 1, backend="numpy", seed=4).graph)
    layout = ParameterLayout.of([(p.weight, p.bias, p.rows, p.cols) for p in plan.layers])
    first = plan.layers[0]
    flat = flatten(layout, {first.bias: np.ones(first.rows, np.float32)})
    back = unflatten(layout, plan, flat)
    np.testing.assert_array_equal(back[first.bias], np.ones(first.rows))
    assert all(not back[name].any() for name in back if name != first.bias)


def test_a_grids_table_follows_the_layers_and_round_trips():
    graph = coopnn.mlp(2, [4], 1, backend="numpy", seed=4, encoding={"otype": "HashGrid", "n_levels": 2,
                                                                     "log2_hashmap_size": 5}).graph
    plan = plan_training(graph)
    (table,) = plan.tables
    assert (table.name, table.node.name) == ("encoding.params", "encoding")
    layout = ParameterLayout.of([(p.weight, p.bias, _padded(p.rows), _padded(p.cols)) for p in plan.layers],
                                [(table.name, table.size)])
    assert layout.tables[0].offset == layout.layers_size and layout.size == layout.layers_size + table.size
    values = {table.name: np.arange(table.size, dtype=np.float32)}
    flat = flatten(layout, values)
    np.testing.assert_array_equal(flat[layout.layers_size:], values[table.name])
    np.testing.assert_array_equal(unflatten(layout, plan, flat)[table.name], values[table.name])
