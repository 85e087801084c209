"""Which integer products take an earlier product's NaN test (`nan_inherited`): along instructions that keep NaN and
make none, never across ones that may make NaN (sin of infinity, infinity times 0, infinity minus infinity) or
that mix in other values (a concatenation)."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.backends.quantized_layers import nan_inherited
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.program import Instr, KernelProgram, VecType
from tests.conftest import ROOT

V = VecType("f32", 16)


def _program(stem: str) -> KernelProgram:
    with coopnn.load(ROOT / "models" / f"{stem}.onnx", backend="numpy") as model:
        return lower(model.graph)


def _between(*instrs: Instr) -> dict[str, str]:
    """nan_inherited of: x = load, p = gemv(x), then `instrs` (p's followers), then q = gemv(last result)."""
    constants = [Instr("constant", name, V, (), {"value": value})
                 for name, value in (("zero", 0.0), ("half", 0.5), ("inf", float("inf")))]
    body = (Instr("load", "x", V, ("in",)), Instr("gemv", "p", V, ("w", "x")), *constants, *instrs,
            Instr("gemv", "q", V, ("w", instrs[-1].result)))
    return nan_inherited(KernelProgram("k", (), body, {}))


def test_every_hidden_product_of_a_relu_mlp_takes_the_first_ones_test():
    assert nan_inherited(_program("mlp_64_128x4_16")) == {"4": "1", "6": "4", "8": "6", "10": "8"}


def test_a_concatenation_starts_a_test_of_its_own():
    inherited = nan_inherited(_program("nerf_skip_two_heads"))
    assert "14" not in inherited and "26" not in inherited  # products of gathers (the skip, the direction)
    assert inherited["16"] == "14" and inherited["35"] == "16"


@pytest.mark.parametrize("instrs", [
    (Instr("max", "a", V, ("p", "zero")),),
    (Instr("mul", "a", V, ("p", "half")), Instr("max", "b", V, ("p", "a"))),  # leaky ReLU
    (Instr("tanh", "a", V, ("p",)), Instr("neg", "b", V, ("a",)), Instr("abs", "c", V, ("b",)),
     Instr("sub", "d", V, ("half", "c")), Instr("min", "e", V, ("d", "half"))),
], ids=["relu", "leaky_relu", "unary_and_finite_constants"])
def test_instructions_that_keep_nan_and_make_none_pass_it_on(instrs):
    assert _between(*instrs) == {"q": "p"}


@pytest.mark.parametrize("instrs", [
    (Instr("sin", "a", V, ("p",)),),
    (Instr("mul", "a", V, ("p", "zero")),),
    (Instr("add", "a", V, ("p", "inf")),),
    (Instr("add", "a", V, ("p", "p")),),
    (Instr("add", "a", V, ("p", "x")),),
], ids=["sin", "times_zero", "plus_infinity", "sum_of_two_followers", "another_value"])
def test_instructions_that_may_make_nan_or_mix_values_do_not(instrs):
    assert _between(*instrs) == {}
