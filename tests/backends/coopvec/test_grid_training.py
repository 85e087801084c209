"""A grid's tables on the coopvec training backend: refused naming the node, before any device is opened, until its
step kernels accumulate them (the portable backend trains them: `tests/backends/portable/test_encoding_training.py`)."""

from __future__ import annotations

import pytest

from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.errors import CompileError
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam


def test_a_grid_is_refused_naming_the_node_and_the_backends_that_train_it():
    graph = mlp_graph(2, [16], 3, encoding={"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 6}, seed=3)
    with pytest.raises(CompileError, match=r"node 'encoding': the coopvec training kernels do not train the tables "
                                           r"of Grid\(type=Hash.*backend='portable'"):
        CoopvecTrainingSession(graph, get_loss("l2"), Adam(), None)
