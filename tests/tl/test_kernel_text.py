"""coopnn's own kernels as tensor language: every zoo model's kernel program (and the training step kernels) prints
as valid tensor language with coopnn's extension, checks, prints back to the same text, reads back into the same
kernel program, and compiles to the same SPIR-V bytes as today's path for every target."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from coopnn.backends import target, target_format
from coopnn.backends.portable.training import flat_manifest
from coopnn.compiler import compile
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.training.layout import DELTA_LAYOUTS, ParameterLayout, TapeLayout
from coopnn.tl import check, parse, print_program
from coopnn.tl.kernel_text import kernel_program, kernel_text
from coopnn.train.gpu.plan import plan_training
from coopnn.train.gpu.step_program import step_program
from coopnn.train.losses import LOSSES
from tests.tl.functions.examples import made_loss

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


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("deltas", DELTA_LAYOUTS)
def test_training_step_kernels_round_trip_and_compile_to_the_same_spirv(loss, deltas):
    graph = mlp_graph(3, [16, 12], 4, activation="gelu", output_activation="sigmoid", encoding="frequency", octaves=2)
    plan = plan_training(graph)
    layout = ParameterLayout.of([(p.weight, p.bias, p.rows, p.cols) for p in plan.layers])
    program = step_program(plan, made_loss(loss), TapeLayout(layout.layers, deltas))
    text = kernel_text(program)
    assert check(parse(text)) == [] and print_program(parse(text)) == text
    again = kernel_program(text, program.constants, program.sources)
    assert (again.name, again.params, again.body) == (program.name, program.params, program.body)
    portable = target("portable")
    assert portable.compile(again, FP32, 64, packed=flat_manifest(again, layout)).spirv == \
        portable.compile(program, FP32, 64, packed=flat_manifest(program, layout)).spirv
