"""Model functions as text: `-> (types)` parses, checks and prints back; what cannot be fused, what is mistyped and
what has no derivative are TensorLanguageErrors naming the line and column."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn import tl
from coopnn.errors import CompileError, CoopnnError, InputError
from coopnn.tl import TensorLanguageError
from coopnn.tl.functions.named import derivative_function
from tests.tl.functions.examples import FEATURES, LOG_COSH, SOFTPLUS, WAVE

RELU = """func @relu(%x: f32) -> f32 {
    %zero = constant 0.0 : f32
    %y = max %x, %zero : f32
    yield (%y)
}
"""


@pytest.mark.parametrize("text", [SOFTPLUS, WAVE, FEATURES, RELU])
def test_functions_with_results_round_trip(text):
    program = tl.parse(text)
    assert tl.check(program) == []
    printed = tl.print_program(program)
    assert "-> (f32" in printed and tl.parse(printed) == program


def test_a_function_with_results_is_not_a_kernel():
    with pytest.raises(InputError, match="@relu returns values: it is a function for use inside models"):
        tl.interpret(tl.parse(RELU), np.zeros(1, np.float32))


def _error(make, text: str, match: str) -> str:
    with pytest.raises(CoopnnError, match=match) as caught:
        make(text)
    return str(caught.value)


def test_a_type_error_names_its_line_and_column():
    text = RELU.replace("%y = max %x, %zero : f32", "%y = max %x, %zero : f64")
    assert _error(tl.activation, text, "Operand type must match return type").startswith("3.")


def test_the_yield_must_match_the_results():
    text = RELU.replace("yield (%y)", "yield (%y, %y)")
    assert _error(tl.activation, text, "must match the returned types").startswith("4.5-")


def test_an_unsupported_instruction_names_its_line():
    text = RELU.replace("%y = max %x, %zero : f32", "%n = cast %x : i32\n    %y = cast %n : f32")
    assert _error(tl.activation, text, "cast cannot be fused into a model's kernel").startswith("3.")


def test_integer_arithmetic_cannot_be_fused():
    text = RELU.replace("%y = max %x, %zero : f32", "%i = constant 1 : i32\n    %y = max %x, %zero : f32")
    assert _error(tl.activation, text, "fused functions compute in f32 and bool, not i32").startswith("3.")


def test_the_signature_must_fit_the_use():
    _error(tl.activation, FEATURES, "@features takes 2 arguments; a activation takes 1|takes 2 arguments")
    _error(tl.loss, RELU, "@relu takes 1 arguments; a loss takes 2")
    _error(tl.activation, RELU.replace(" -> f32", "").replace("    yield (%y)\n", ""), "@relu has no results")
    with pytest.raises(InputError, match="made from its text"):
        tl.activation(None)


def test_a_missing_derivative_is_an_error_naming_the_instruction_when_training():
    text = RELU.replace("%y = max %x, %zero : f32", "%two = constant 2.0 : f32\n    %y = rem %x, %two : f32")
    activation = tl.activation(text)  # it runs: the forward needs no derivative
    x = np.array([[-3.5, 0.5, 2.5]], np.float32)
    with coopnn.mlp(3, [4], 1, activation=activation, backend="numpy") as model:
        assert np.isfinite(model(x)).all()
        with pytest.raises(CompileError, match="4.5-27: rem has no derivative"):
            coopnn.Trainer(model).fit(x, np.zeros((1, 1), np.float32), steps=1, progress=False)
    with pytest.raises(CompileError, match="rem has no derivative"):
        derivative_function(text, None, None, 1)


def test_a_named_derivative_must_exist_and_fit():
    _error(lambda t: tl.activation(t, derivative="missing"), SOFTPLUS, "no function @missing")
    _error(lambda t: tl.activation(t, derivative="features"), SOFTPLUS + FEATURES, "takes 2 arguments")


@pytest.mark.parametrize("use, key, value", [
    *((use, "function", value) for use in (tl.activation, tl.encoding, tl.loss) for value in (["relu"], 3)),
    *((use, "derivative", value) for use in (tl.activation, tl.loss) for value in (["relu"], 1.0))])
def test_a_function_name_that_is_not_a_str_is_refused_by_key(use, key, value):
    with pytest.raises(InputError, match=f"{key} names a function of the text .*, not {value!r}".replace("[", r"\[")):
        use(RELU, **{key: value})


def _nested_ifs(depth: int) -> str:
    opening = "".join(f"%r{i} = if %c -> (f32) {{\n" for i in range(depth))
    closing = "".join("} else {\nyield (%x)\n}\n" + (f"yield (%r{i})\n" if i else "") for i in reversed(range(depth)))
    return ("func @f(%x: f32) -> (f32) {\n%c = cmp.lt %x, %x : bool\n" + opening + "yield (%x)\n" + closing
            + "yield (%r0)\n}\n")


def test_regions_nested_past_what_the_reader_descends_are_a_tensor_language_error():
    assert tl.activation(_nested_ifs(100)).op.value == "tl_function"
    with pytest.raises(TensorLanguageError, match="nests regions too deeply"):
        tl.activation(_nested_ifs(2000))


def test_a_loss_checks_its_named_derivative_when_made():
    _error(lambda t: tl.loss(t, derivative="missing"), LOG_COSH, "no function @missing")
    _error(lambda t: tl.loss(t, derivative="softplus"), LOG_COSH + SOFTPLUS,
           "@softplus takes 1 arguments; a derivative of a loss takes 2")

