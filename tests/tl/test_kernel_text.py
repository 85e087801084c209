"""coopnn's own kernels as tensor language: every zoo model's kernel program prints as valid tensor language with
coopnn's extension, checks, prints back to the same text, reads back into the same kernel program, and compiles to
the same SPIR-V bytes as today's path for every target."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from coopnn.backends import target, target_format
from coopnn.compiler import compile
from coopnn.errors import CompileError
from coopnn.tl import check, parse, print_program
from coopnn.tl.kernel_text import kernel_program, kernel_text

MODELS = sorted((Path(__file__).resolve().parents[2] / "models").glob("*.onnx"))
TARGETS = ("portable", "coopvec", "coopmat", "coopmat2")


@pytest.fixture(scope="module", params=MODELS, ids=[m.stem for m in MODELS])
def compiled(request):
    return compile(request.param, target="portable")


def test_the_kernel_prints_as_tensor_language_that_checks_and_prints_back(compiled):
    text = kernel_text(compiled.kernel)
    program = parse(text)
    assert check(program) == []
    assert print_program(program) == text


@pytest.mark.parametrize("target_name", TARGETS)
def test_print_parse_compile_gives_the_same_spirv(compiled, target_name):
    kernel = compiled.kernel
    again = kernel_program(kernel_text(kernel), kernel.constants, kernel.sources)
    assert (again.name, again.params, again.body) == (kernel.name, kernel.params, kernel.body)
    chosen, fmt = target(target_name), target_format(target_name, None)
    try:
        today = chosen.compile(kernel, fmt).spirv
    except CompileError as refused:  # the target does not take this model: neither way
        with pytest.raises(CompileError, match=re.escape(str(refused))):
            chosen.compile(again, fmt)
        return
    assert chosen.compile(again, fmt).spirv == today


def test_the_extension_does_not_run_in_the_interpreter():
    from coopnn.errors import InputError
    from coopnn.tl import interpret

    text = """func @k(%in0: memref<f32x2x?> {"coopnn.role"="input"}, %n: index) {
        %c0 = constant 0 : index
        foreach (%i)=(%c0),(%n) {
            %0 = coopnn.load %in0 : coopvector<f32x2>
        }
    }"""
    with pytest.raises(InputError, match=r"^4\.\d+-\d+: the interpreter does not run Extension instructions"):
        interpret(parse(text), np.zeros((2, 1), np.float32), 1)
