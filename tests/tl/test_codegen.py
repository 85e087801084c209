"""Every module the compiler emits for the collective cases, the examples and the reference's runnable blocks passes
spirv-val (Vulkan 1.3 environment); no device needed."""

from __future__ import annotations

import subprocess

import pytest

from coopnn.errors import CompileError
from coopnn.tl import checked, parse
from coopnn.tl.codegen.compile import compile_function
from coopnn.tl.launch import launch_for
from tests.devices import SPIRV_TOOLS_HINT, spirv_tool
from tests.tl.collective_cases import cases
from tests.tl.kernels import EXAMPLES
from tests.tl.test_reference import BLOCKS, wrapped

# every variant in float32, one of each collective in the other types
CASES = cases(dtypes=("f32",)) + [c for c in cases(dtypes=("f64", "f16", "c32", "i32", "bf16"))
                                  if "-dyn-strided" in c.name or "-static" in c.name and ".atomic" not in c.name]
NARROW = ("f16", "bf16")
SUBGROUP_SIZES = (8, 16, 32)


@pytest.fixture(scope="module")
def validate():
    validator = spirv_tool("spirv-val")
    if validator is None:
        pytest.skip(f"spirv-val not found; {SPIRV_TOOLS_HINT}")

    def run(spirv: bytes) -> None:
        result = subprocess.run([validator, "--target-env", "vulkan1.3", "-"], input=spirv, capture_output=True)
        assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()

    return run


def _compiled(text: str, subgroup_size: int = 8):
    function = checked(parse(text)).function()
    return compile_function(function, launch_for(function, subgroup_size))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_collective_module_validates(case, validate):
    if ".atomic" in case.name and case.dtype in NARROW:
        with pytest.raises(CompileError, match="atomic collectives on"):
            _compiled(case.text)
        return
    validate(_compiled(case.text).spirv)


@pytest.mark.parametrize("subgroup_size", SUBGROUP_SIZES)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_example_module_validates(example, subgroup_size, validate):
    validate(_compiled(example.text, subgroup_size).spirv)


def test_the_same_function_compiles_to_the_same_bytes():
    assert _compiled(EXAMPLES[0].text).spirv == _compiled(EXAMPLES[0].text).spirv


def test_gemm_lowers_to_khr_cooperative_matrices_where_the_device_offers_the_product(validate):
    from coopnn.tl.launch import MatrixShape

    text = """func @g(%alpha: f16, %a: memref<f16x32x48>, %b: memref<f16x32x16>, %beta: f32, %c: memref<f32x48x16>) {
        gemm.t %alpha, %a, %b, %beta, %c
    }"""
    function = checked(parse(text)).function()
    shapes = (MatrixShape(16, 16, 16, "f16", "f16", "f32"),)
    compiled = compile_function(function, launch_for(function, 32, matrix_shapes=shapes))
    validate(compiled.spirv)
    assert "cooperativeMatrix" in compiled.features and compiled.extensions == {"VK_KHR_cooperative_matrix"}
    deeper = (MatrixShape(16, 16, 64, "f16", "f16", "f32"),)
    assert not compile_function(function, launch_for(function, 32, matrix_shapes=deeper)).extensions  # loops


def test_the_products_a_device_lists_become_matrix_shapes():
    from types import SimpleNamespace

    from coopnn.runtime.vk.device_info import CooperativeMatrixShape, CooperativeMatrixSupport
    from coopnn.runtime.vk.nv_ffi import ComponentType as C
    from coopnn.runtime.vk.nv_ffi import Scope
    from coopnn.tl.kernel import matrix_shapes
    from coopnn.tl.launch import MatrixShape

    listed = (CooperativeMatrixShape(16, 16, 16, C.FLOAT16, C.FLOAT16, C.FLOAT32, C.FLOAT32, False, Scope.SUBGROUP),
              CooperativeMatrixShape(16, 16, 16, C.FLOAT16, C.FLOAT16, C.FLOAT32, C.FLOAT32, False, Scope.WORKGROUP),
              CooperativeMatrixShape(16, 8, 32, C.SINT8, C.SINT8, C.SINT32, C.SINT32, True, Scope.SUBGROUP),
              CooperativeMatrixShape(16, 16, 16, C.FLOAT16, C.FLOAT16, C.FLOAT16, C.FLOAT16, False, Scope.SUBGROUP))
    info = SimpleNamespace(cooperative_matrix=CooperativeMatrixSupport(True, False, 0x20, listed))
    assert matrix_shapes(info) == (MatrixShape(16, 16, 16, "f16", "f16", "f32"),
                                   MatrixShape(16, 16, 16, "f16", "f16", "f16"))
    assert matrix_shapes(SimpleNamespace(cooperative_matrix=None)) == ()


REFERENCE_BLOCKS = [b for b in BLOCKS if "; Illegal" not in b.text]


@pytest.mark.parametrize("block", REFERENCE_BLOCKS, ids=[f"line{b.line}" for b in REFERENCE_BLOCKS])
def test_every_reference_block_compiles_to_a_valid_module(block, validate):
    validate(_compiled(wrapped(block)).spirv)
