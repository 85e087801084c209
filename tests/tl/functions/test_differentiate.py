"""The derived functions against central differences of the tl interpreter, in every argument and result: each rule
(a quotient's divisor, max and min, sub, abs, the math instructions and their native forms, nested `if`s yielding
f32 and bool values) away from the kinks and poles: where three step sizes agree."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.tl.functions.differentiate import derivative
from coopnn.tl.functions.evaluate import evaluate
from coopnn.tl.functions.function import model_function

CASES = {
    "quotients": """func @f(%x: f32, %y: f32) -> (f32) {
    %q = div %x, %y : f32
    %r = div %q, %x : f32
    %s = mul %r, %q : f32
    yield (%s)
}""",
    "math": """func @f(%x: f32, %y: f32) -> (f32) {
    %a = exp2 %x : f32
    %b = abs %y : f32
    %c = native_log2 %b : f32
    %d = mul %a, %c : f32
    %e = native_cos %d : f32
    %g = native_sin %x : f32
    %h = sub %e, %g : f32
    %i = native_exp2 %h : f32
    %j = log %b : f32
    %k = add %i, %j : f32
    yield (%k)
}""",
    "max-min-sub": """func @f(%x: f32, %y: f32) -> (f32) {
    %one = constant 1.5 : f32
    %a = max %x, %y : f32
    %b = min %x, %y : f32
    %c = mul %a, %a : f32
    %d = sub %c, %b : f32
    %e = sub %one, %d : f32
    %g = sub %y, %one : f32
    %h = neg %e : f32
    %k = sub %h, %g : f32
    yield (%k)
}""",
    "nested-if": """func @f(%x: f32, %y: f32) -> (f32, f32) {
    %zero = constant 0.0 : f32
    %c = less_than %x, %y : bool
    %d = greater_than %y, %zero : bool
    %r, %b = if %c -> (f32, bool) {
        %in, %flag = if %d -> (f32, bool) {
            %m = mul %x, %y : f32
            yield (%m, %d)
        } else {
            %n = exp %x : f32
            yield (%n, %c)
        }
        yield (%in, %flag)
    } else {
        %o = sin %y : f32
        yield (%o, %d)
    }
    %s = if %b -> (f32) { yield (%x) } else { yield (%zero) }
    %t = add %r, %s : f32
    yield (%t, %x)
}""",
}
_rng = np.random.default_rng(5)
X = _rng.uniform(0.5, 2, (2, 4001)) * _rng.choice([-1, 1], (2, 4001))  # no quotient by nor log of numbers near 0


def _central(function, arguments, wrt: int, step: float) -> tuple[np.ndarray, ...]:
    up = [a + step if i == wrt else a for i, a in enumerate(arguments)]
    down = [a - step if i == wrt else a for i, a in enumerate(arguments)]
    return tuple((np.float64(u) - d) / (2 * step) for u, d in zip(evaluate(function, *up), evaluate(function, *down)))


@pytest.mark.parametrize("name", CASES)
def test_derived_functions_match_central_differences(name):
    function = model_function(CASES[name])
    for wrt in range(len(function.arguments)):
        slopes = evaluate(derivative(function, wrt), *X)
        steps = [_central(function, X, wrt, step) for step in (2e-2, 1e-2, 5e-3)]
        for result, slope in enumerate(slopes):
            a, b, c = (differences[result] for differences in steps)
            smooth = np.isclose(a, b, rtol=1e-3, atol=1e-3) & np.isclose(b, c, rtol=1e-3, atol=1e-3)
            assert smooth.mean() > 0.8, (wrt, result)  # most points are compared
            np.testing.assert_allclose(slope[smooth], b[smooth], rtol=5e-3, atol=5e-3, err_msg=f"{wrt}, {result}")
