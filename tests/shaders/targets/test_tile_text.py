"""The text pieces the tile targets share: a stage as scalar instructions (its start rounded to float16, each splat
constant defined once, the stage's source read as %x) and the function around the loop over tiles."""

from __future__ import annotations

import numpy as np

from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.tile_plan import plan_tiles
from coopnn.shaders.targets.tile_text import stage_lines, tile_function


def _plan():
    b = GraphBuilder("clamped")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.ones((3, 4)))])
    low = b.node(Op.MAX, "low", [h, b.constant("zero", 0.0)])
    y = b.node(Op.MIN, "high", [low, b.constant("six", 6.0)], output="y")
    return plan_tiles(lower(b.graph([y])), "coopmat")


def test_a_stage_reads_its_rounded_start_as_x_and_defines_each_constant_before_its_use():
    plan = _plan()
    stage = plan.stages[1]
    lines, result = stage_lines(plan, stage, "%v")
    constants = [line for line in lines if " = constant " in line]
    assert lines[:2] == ["%h = cast %v : f16", "%x = cast %h : f32"]
    assert len(constants) == 2 and result == f"%{stage.result}"
    assert lines[-1].startswith(f"%{stage.result} = min %") and lines[-1].endswith(" : f32")
    assert all(f"%{stage.source} " not in line for line in lines[2:])  # the source is %x
    assert stage_lines(plan, plan.stages[0], "%0") == (["%h = cast %0 : f16", "%x = cast %h : f32"], "%x")


def test_the_function_declares_its_parameters_and_loops_over_tiles():
    lines = tile_function("a-b", [("%x: memref<f32x3x?>", ""), ("%w: memref<f16x4x4>", "note")], (64, 2), 64,
                          ["    body"])
    assert lines == [
        "func @a_b(",
        "    %x: memref<f32x3x?>,",
        "    %w: memref<f16x4x4>,  ; note",
        "    %n: index) {work_group_size=[64,2]} {",
        "  %c0 = constant 0 : index",
        "  foreach_tile (%i) = (%c0), (%n) as (%ti) <= (64) {",
        "    body",
        "  }",
        "}",
    ]
