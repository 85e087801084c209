"""Every collective, interpreted, against numpy over shapes, transposes, strided views, dynamic sizes and types."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.tl import parse
from coopnn.tl.interp import interpret
from tests.tl.collective_cases import cases, tolerance

CASES = cases(dtypes=("f32", "f64", "f16", "bf16", "c32", "c64", "i32", "i8"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_interpreter_computes_each_collective_as_numpy_does(case):
    interpret(parse(case.text), *case.args)
    np.testing.assert_allclose(case.output, case.expected, **tolerance(case.dtype))
