"""The SPIR-V kernel the Vulkan executor tests dispatch, assembled by `assemble` (`tests.devices`)."""

from __future__ import annotations

import pytest

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
