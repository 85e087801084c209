"""NumpyKernel: kernel rules evaluated on arrays give what the interpreted kernel program gives, in the arrays'
dtype, with graph activations inside a rule taken from the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.eager import NumpyKernel
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.program import VecType

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.uniform(-4, 4, 60), [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32).reshape(16, 4)
Y = np.concatenate([RNG.uniform(-4, 4, 60), [0.0, 2.0, np.nan, 1.0]]).astype(np.float32).reshape(16, 4)

FLOAT_BINARY = ["add", "sub", "mul", "div", "max", "min", "pow"]
FLOAT_UNARY = ["abs", "neg", "exp", "log", "sin", "cos", "tanh", "sqrt", "floor", "ceil", "sign"]
COMPARISONS = ["cmp.lt", "cmp.le", "cmp.gt", "cmp.ge", "cmp.eq"]


def _interpreted(write) -> np.ndarray:
    """write(k, x, y) run as a kernel program on X and Y by the interpreter (booleans stored as 0 and 1)."""
    k = KernelBuilder("eager")
    for name in ("x", "y"):
        k.add_param(name, "input", (4,), name)
    result = write(k, k.emit("load", None, ("x",)), k.emit("load", None, ("y",)))
    if k.type_of(result).dtype == "bool":
        result = k.emit("cast", VecType("f32", 4), (result,))
    k.emit("store", None, (result, k.add_param("r", "output", (4,), "r").name))
    return run_program(k.build(), {"x": X, "y": Y})["r"]


def _eager(write, dtype=np.float32) -> np.ndarray:
    with np.errstate(all="ignore"):  # as in the interpreter: NaN and inf are data
        result = write(NumpyKernel(dtype), X.astype(dtype), Y.astype(dtype))
    return np.broadcast_to(result, X.shape).astype(dtype)


WRITERS = {
    **{op: (lambda op: lambda k, x, y: k.binary(op, x, y))(op) for op in FLOAT_BINARY},
    **{op: (lambda op: lambda k, x, y: k.unary(op, x))(op) for op in FLOAT_UNARY},
    **{op: (lambda op: lambda k, x, y: k.compare(op, x, y))(op) for op in COMPARISONS},
    "logical": lambda k, x, y: k.binary("xor", k.binary("and", k.compare("cmp.lt", x, y), k.unary(
        "not", k.compare("cmp.eq", x, y))), k.binary("or", k.compare("cmp.gt", x, y), k.compare("cmp.le", x, y))),
    "select": lambda k, x, y: k.select(k.compare("cmp.gt", x, y), x, y),
    "select_constants": lambda k, x, y: k.select(k.compare("cmp.ge", x, y), k.splat(np.inf, 4), k.splat(-0.5, 4)),
    "scalar_left": lambda k, x, y: k.scalar("div", x, 2.0, left=True),
    "splat": lambda k, x, y: k.splat(1.5, 4),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_eager_evaluation_matches_the_interpreter(name):
    np.testing.assert_array_equal(_eager(WRITERS[name]), _interpreted(WRITERS[name]))


def test_values_keep_the_input_dtype():
    for name, write in WRITERS.items():
        with np.errstate(all="ignore"):
            result = write(NumpyKernel(np.float64), X.astype(np.float64), Y.astype(np.float64))
        assert result.dtype in (np.float64, np.bool_), name


def test_activations_in_a_rule_are_the_numpy_reference():
    x = X[np.isfinite(X)]
    np.testing.assert_array_equal(NumpyKernel(np.float32).activation(Op.ERF, x, {}), ops.evaluate(Op.ERF, [x], {}))
