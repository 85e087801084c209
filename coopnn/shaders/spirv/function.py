"""Functions and basic blocks: instructions are emitted at a cursor (the current block), checked by the grammar.

A function starts with its entry block current. `emit` appends to the current block (kernels emit through `fn.ops`,
the named instructions of ops.py); a terminator (OpBranch, OpReturn, ...) closes it, and `start_block` moves on to a
new one. Function-local variables are gathered at the top of the entry block, where SPIR-V wants them. Structured
control flow helpers live in control_flow.py.
"""

from __future__ import annotations

from typing import Sequence

from coopnn.shaders.spirv.control_flow import Loop, Selection, for_range
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.instruction import Id, Instruction
from coopnn.shaders.spirv.ops import Ops

# Block termination instructions (SPIR-V spec 2.2.4).
TERMINATORS = frozenset({
    "OpBranch", "OpBranchConditional", "OpSwitch", "OpReturn", "OpReturnValue", "OpKill", "OpUnreachable",
    "OpTerminateInvocation", "OpIgnoreIntersectionKHR", "OpTerminateRayKHR", "OpEmitMeshTasksEXT",
})
# Instructions a function body must not emit itself, and what builds them instead.
BUILT_ELSEWHERE = {
    "OpVariable": "Function.variable (or Module.global_variable)",
    "OpFunction": "Module.function",
    "OpFunctionParameter": "Module.function(parameter_types=...)",
    "OpFunctionEnd": "nothing: assembly ends every function",
    "OpLabel": "Function.new_block and Function.start_block",
    "OpExtInstImport": "Function.ext_inst, which imports the set",
    "OpCapability": "Module.capability",
    "OpExtension": "Module.extension",
    "OpMemoryModel": "Module(memory_model=...)",
    "OpEntryPoint": "Module.entry_point",
    "OpExecutionMode": "Module.execution_mode",
    "OpExecutionModeId": "Module.execution_mode",
    "OpName": "Module.name",
    "OpMemberName": "Module.member_name",
    "OpDecorate": "Module.decorate",
    "OpMemberDecorate": "Module.member_decorate",
}
GLOBAL_CLASSES = {"Type-Declaration": "Module.type*", "Constant-Creation": "Module.constant*"}


class Block:
    """A basic block: its label and its instructions, the last of which must be a terminator."""

    def __init__(self, label: Id):
        self.label = label
        self.instructions: list[Instruction] = []

    @property
    def terminated(self) -> bool:
        return bool(self.instructions) and self.instructions[-1].opname in TERMINATORS


class Function:
    """A function under construction; made by `Module.function`."""

    def __init__(self, module, return_type: Id, parameter_types: Sequence[Id], control, name: str | None):
        self.module = module
        self.id = Id(name)
        self.return_type = return_type
        self.type = module.type_function(return_type, parameter_types)
        self.header = module._encode("OpFunction", (return_type, control, self.type), result=self.id)
        self.parameter_instructions = [module._encode("OpFunctionParameter", (t,)) for t in parameter_types]
        self.params: tuple[Id, ...] = tuple(p.result for p in self.parameter_instructions)
        self.variables: list[Instruction] = []
        self.blocks: list[Block] = []
        self.current: Block | None = None
        self.ops = Ops(self)  # the named instructions, emitted at this function's current block
        if name:
            module.name(self.id, name)
        self.start_block(self.new_block())

    def emit(self, opname: str, *operands, name: str | None = None) -> Id | None:
        """Appends an instruction to the current block; returns its result id (None if it has none). Operands follow
        the grammar, result id left out: `emit("OpFAdd", f32, a, b)`, `emit("OpStore", ptr, value, "Aligned", 4)`."""
        spec = self.module.grammar.instruction(opname)
        if spec.opname in BUILT_ELSEWHERE or spec.cls in GLOBAL_CLASSES:
            helper = BUILT_ELSEWHERE.get(spec.opname) or GLOBAL_CLASSES[spec.cls]
            raise SpirvBuildError(f"{spec.opname} is not emitted into a function body; use {helper}")
        return self.append(self.current_block(), self.module._encode(opname, operands), name)

    def append(self, block: Block, instruction: Instruction, name: str | None = None) -> Id | None:
        """Appends an already encoded instruction to `block` (the control flow helpers fill header blocks late)."""
        if block.terminated:
            raise SpirvBuildError(f"{instruction.opname} after the terminator of block {block.label!r}")
        block.instructions.append(instruction)
        if name and instruction.result is not None:
            self.module.name(instruction.result, name)
        return instruction.result

    def current_block(self) -> Block:
        if self.current is None or self.current.terminated:
            raise SpirvBuildError("no open block: start one with Function.start_block after a terminator")
        return self.current

    def new_block(self, name: str | None = None) -> Block:
        """A block not placed yet; `start_block` places it, so blocks appear in the order they are started."""
        block = Block(Id(name))
        if name:
            self.module.name(block.label, name)
        return block

    def start_block(self, block: Block) -> Block:
        """Places `block` after the others and makes it current; the current block must be terminated."""
        if self.current is not None and not self.current.terminated:
            raise SpirvBuildError(f"block {self.current.label!r} has no terminator yet")
        return self.switch_to(block)

    def switch_to(self, block: Block) -> Block:
        """Makes `block` current, placing it if new, whether or not the previous block is finished (structured
        control flow leaves a header block open until its construct ends)."""
        if all(b is not block for b in self.blocks):
            self.blocks.append(block)
        self.current = block
        return block

    def variable(self, pointee_type: Id, *, name: str | None = None, initializer: Id | None = None) -> Id:
        """A Function-storage variable, declared at the top of the entry block."""
        pointer = self.module.type_pointer("Function", pointee_type)
        operands = (pointer, "Function", *((initializer,) if initializer is not None else ()))
        instruction = self.module._encode("OpVariable", operands)
        self.variables.append(instruction)
        if name:
            self.module.name(instruction.result, name)
        return instruction.result

    def ext_inst(self, result_type: Id, opname: str, *operands: Id, set_name: str = "GLSL.std.450",
                 name: str | None = None) -> Id:
        """An extended instruction, e.g. `ext_inst(f32, "Exp", x)`; imports the set on first use."""
        spec = self.module.grammar.ext_inst(set_name, opname)
        fixed = [o for o in spec.operands if not o.quantifier]
        if len(operands) < len(fixed) or (len(operands) > len(spec.operands) and spec.operands[-1].quantifier != "*"):
            raise SpirvBuildError(f"{set_name} {opname} takes {', '.join(o.label for o in spec.operands)}; "
                                  f"got {len(operands)} operands")
        instruction = self.module._encode(
            "OpExtInst", (result_type, self.module.ext_inst_import(set_name), spec.opcode, *operands))
        self.module.require(spec.availability)
        return self.append(self.current_block(), instruction, name)

    def return_(self, value: Id | None = None) -> None:
        if value is None:
            self.emit("OpReturn")
        else:
            self.emit("OpReturnValue", value)

    def barrier(self, scope: str = "Workgroup", memory: tuple[str, ...] = ("WorkgroupMemory",)) -> None:
        """A control barrier of `scope` (execution and memory) that also makes the writes before it to the `memory`
        storage classes (MemorySemantics names: workgroup memory by default, "UniformMemory" for storage buffers)
        visible after it."""
        m = self.module
        scope_id = m.enum_constant("Scope", scope)
        self.emit("OpControlBarrier", scope_id, scope_id, m.enum_constant("MemorySemantics", "AcquireRelease", *memory))

    def if_(self, condition: Id, control: str | tuple = "None") -> Selection:
        """`with fn.if_(c) as branch: ...; branch.else_(); ...` — a structured selection."""
        return Selection(self, condition, control)

    def loop(self, control: str | tuple = "None") -> Loop:
        """`with fn.loop() as lp: i = lp.phi(t, init); lp.while_(cond); ...; lp.continue_(); lp.set_next(i, ...)`."""
        return Loop(self, control)

    def for_range(self, start: Id, stop: Id, step: Id | None = None, control: str | tuple = "None"):
        """`with fn.for_range(lo, hi) as i:` — a counted loop, i from lo (step 1 unless given) while i < hi."""
        return for_range(self, start, stop, step, control)

    def instructions(self) -> list[Instruction]:
        """The whole function, OpFunction to OpFunctionEnd, once every block is terminated."""
        for block in self.blocks:
            if not block.terminated:
                raise SpirvBuildError(f"function {self.id!r}: block {block.label!r} has no terminator")
        body = []
        for index, block in enumerate(self.blocks):
            body.append(self.module._encode("OpLabel", (), result=block.label))
            body.extend(self.variables if index == 0 else ())
            body.extend(block.instructions)
        return [self.header, *self.parameter_instructions, *body, self.module._encode("OpFunctionEnd", ())]
