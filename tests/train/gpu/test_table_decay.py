"""How many leading flat elements the GPU optimizer decays (`coopnn/train/gpu/table_decay.py`): the layers' where
`no_decay` names the grid's table, all where it does not or nothing decays, refused where it names a layer's."""

from __future__ import annotations

import pytest

from coopnn.errors import CompileError
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.gpu.table_decay import decayed_elements
from coopnn.train.optim import SGD, Adam

LAYOUT = ParameterLayout.of([("w", "b", 3, 4)], [("encoding.params", 40)])


def test_the_table_is_spared_where_no_decay_names_it():
    assert decayed_elements(LAYOUT, Adam(weight_decay=0.1, no_decay=("encoding.params",))) == 15
    assert decayed_elements(LAYOUT, SGD(weight_decay=0.1)) == LAYOUT.size == 55
    assert decayed_elements(LAYOUT, Adam(no_decay=("w",))) == LAYOUT.size  # no decay at all


def test_a_layer_in_no_decay_is_refused_by_name():
    with pytest.raises(CompileError, match=r"spares only a grid's table from weight decay, not 'b'"):
        decayed_elements(LAYOUT, Adam(weight_decay=0.1, no_decay=("b", "encoding.params")))
