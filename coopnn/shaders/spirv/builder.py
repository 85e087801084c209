"""The SPIR-V module builder: the global section (types, constants, variables), debug names, decorations, entry
points and execution modes, and functions, all with symbolic ids; `to_words` assembles it (assemble.py).

    m = Module()                                          # SPIR-V 1.6, Logical addressing, Vulkan memory model
    f32 = m.type_float(32)
    buf = m.global_variable("StorageBuffer", m.type_struct([m.type_runtime_array(f32, stride=4)], offsets=[0],
                            decorations=["Block"]), decorations=[("DescriptorSet", 0), ("Binding", 0)])
    main = m.function(m.type_void(), name="main")
    ...; main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(64, 1, 1))
    words = m.to_words()

Capabilities and extensions are inferred from what the module uses (capabilities.py); `capability` and `extension`
add ones explicitly, which also settles which of several alternatives is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from coopnn.shaders.spirv.assemble import assemble
from coopnn.shaders.spirv.constants import ConstantBuilder
from coopnn.shaders.spirv.encode import encode_instruction
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.function import Function
from coopnn.shaders.spirv.grammar import ID_KINDS, Availability, Version, grammar
from coopnn.shaders.spirv.instruction import Id, Instruction
from coopnn.shaders.spirv.types import Decoration, TypeBuilder, TypeInfo, decoration_tuple

# Decorations and execution modes whose parameters are ids or strings use their own opcodes (SPIR-V 1.2 / 1.4).
DECORATE_OPCODE_BY_PARAMETER_KIND = {"LiteralString": "OpDecorateString", **{k: "OpDecorateId" for k in ID_KINDS}}
MEMBER_DECORATE_OPCODE_BY_PARAMETER_KIND = {"LiteralString": "OpMemberDecorateString"}
EXECUTION_MODE_OPCODE_BY_PARAMETER_KIND = {k: "OpExecutionModeId" for k in ID_KINDS}


@dataclass(frozen=True)
class EntryPoint:
    function: Function
    name: str
    model: str


class Module(TypeBuilder, ConstantBuilder):
    """A SPIR-V module being built. See the module docstring for an example."""

    def __init__(self, version: Version = (1, 6), memory_model: str = "Vulkan", addressing_model: str = "Logical"):
        self.grammar = grammar()
        self.version: Version = tuple(version)
        if self.version > self.grammar.version:
            newest = ".".join(map(str, self.grammar.version))
            raise SpirvBuildError(f"SPIR-V {'.'.join(map(str, version))} is newer than the grammar table ({newest})")
        self.memory_model = memory_model
        self.addressing_model = addressing_model
        self.explicit_capabilities: list[str] = []
        self.explicit_extensions: list[str] = []
        self.ext_inst_imports: dict[str, Instruction] = {}
        self.entry_points: list[EntryPoint] = []
        self.execution_modes: list[Instruction] = []
        self.debug_names: list[Instruction] = []
        self.annotations: list[Instruction] = []
        self.globals: list[Instruction] = []
        self.global_variables: list[Id] = []
        self.functions: list[Function] = []
        self.value_types: dict[Id, Id] = {}
        self._requirements: list[Availability] = []
        self._types: dict[tuple, Id] = {}
        self._type_info: dict[Id, TypeInfo] = {}
        self._constants: dict[tuple, Id] = {}
        self._constant_values: dict[Id, object] = {}
        self._decorations: set[tuple] = set()

    def _encode(self, opname: str, operands: Sequence, result: Id | None = None) -> Instruction:
        instruction = encode_instruction(self.grammar, opname, operands, self.number_format, result)
        if instruction.result_type is not None:
            self.value_types[instruction.result] = instruction.result_type
        return instruction

    def _declare(self, opname: str, operands: Sequence, name: str | None = None) -> Id:
        """Appends a type, constant or global variable to the global section."""
        instruction = self._encode(opname, operands)
        self.globals.append(instruction)
        if name:
            self.name(instruction.result, name)
        return instruction.result

    def type_of(self, value: Id) -> Id:
        """The result type of a value made by this module."""
        try:
            return self.value_types[value]
        except KeyError:
            raise SpirvBuildError(f"{value!r} is not a typed value of this module") from None

    def capability(self, name: str) -> None:
        """Declares a capability explicitly (inference adds the rest)."""
        self.explicit_capabilities.append(self.grammar.enumerant("Capability", name).name)

    def extension(self, name: str) -> None:
        self.explicit_extensions.append(name)

    def require(self, availability: Availability) -> None:
        """Records what something outside the grammar's instruction table needs (an extended instruction, say)."""
        self._requirements.append(availability)

    def ext_inst_import(self, set_name: str) -> Id:
        """The id of an extended instruction set, imported once."""
        if set_name not in self.ext_inst_imports:
            if set_name not in self.grammar.ext_inst_sets():
                raise SpirvBuildError(f"unknown extended instruction set {set_name!r}; known: "
                                      f"{', '.join(self.grammar.ext_inst_sets())}")
            self.ext_inst_imports[set_name] = self._encode("OpExtInstImport", (set_name,))
        return self.ext_inst_imports[set_name].result

    def name(self, target: Id, text: str) -> None:
        self.debug_names.append(self._encode("OpName", (target, text)))

    def member_name(self, struct: Id, member: int, text: str) -> None:
        self.debug_names.append(self._encode("OpMemberName", (struct, member, text)))

    def decorate(self, target: Id, decoration: str, *parameters) -> None:
        """OpDecorate (or OpDecorateId / OpDecorateString, as the decoration's parameters need); repeats are dropped."""
        opname = self._opcode_for("Decoration", decoration, "OpDecorate", DECORATE_OPCODE_BY_PARAMETER_KIND)
        self._annotate((opname, target, decoration, *parameters))

    def member_decorate(self, struct: Id, member: int, decoration: str, *parameters) -> None:
        opname = self._opcode_for("Decoration", decoration, "OpMemberDecorate",
                                  MEMBER_DECORATE_OPCODE_BY_PARAMETER_KIND)
        self._annotate((opname, struct, member, decoration, *parameters))

    def _annotate(self, key: tuple) -> None:
        if key not in self._decorations:
            self._decorations.add(key)
            self.annotations.append(self._encode(key[0], key[1:]))

    def _opcode_for(self, kind: str, enumerant: str, default: str, by_parameter_kind: dict) -> str:
        parameters = self.grammar.enumerant(kind, enumerant).parameters
        return next((by_parameter_kind[p.kind] for p in parameters if p.kind in by_parameter_kind), default)

    def global_variable(
        self,
        storage_class: str,
        pointee_type: Id,
        *,
        name: str | None = None,
        initializer: Id | None = None,
        decorations: Iterable[Decoration] = (),
    ) -> Id:
        """A module-scope variable: `global_variable("StorageBuffer", block, decorations=[("Binding", 0), ...])`."""
        pointer = self.type_pointer(storage_class, pointee_type)
        initial = (initializer,) if initializer is not None else ()
        variable = self._declare("OpVariable", (pointer, storage_class, *initial), name=name)
        self.global_variables.append(variable)
        for decoration in decorations:
            self.decorate(variable, *decoration_tuple(decoration))
        return variable

    def builtin_input(self, builtin: str, type_id: Id, *, name: str | None = None) -> Id:
        """An Input variable decorated with a BuiltIn, e.g. `builtin_input("GlobalInvocationId", v3u32)`."""
        return self.global_variable("Input", type_id, name=name or builtin, decorations=[("BuiltIn", builtin)])

    def function(self, return_type: Id, parameter_types: Sequence[Id] = (), *, name: str | None = None,
                 control: str | tuple = "None") -> Function:
        """A new function with its entry block open; see function.py."""
        function = Function(self, return_type, parameter_types, control, name)
        self.functions.append(function)
        return function

    def entry_point(self, function: Function, name: str = "main", model: str = "GLCompute",
                    local_size: Sequence[int | Id] | None = None) -> None:
        """Makes `function` an entry point; its interface is filled in at assembly. `local_size` of ints sets
        LocalSize, of ids (spec constants, say) LocalSizeId."""
        self.grammar.enumerant("ExecutionModel", model)
        self.entry_points.append(EntryPoint(function, name, model))
        if local_size is not None:
            mode = "LocalSizeId" if any(isinstance(n, Id) for n in local_size) else "LocalSize"
            self.execution_mode(function, mode, *local_size)

    def execution_mode(self, function: Function, mode: str, *parameters) -> None:
        """OpExecutionMode, or OpExecutionModeId for modes whose parameters are ids."""
        opname = self._opcode_for("ExecutionMode", mode, "OpExecutionMode", EXECUTION_MODE_OPCODE_BY_PARAMETER_KIND)
        self.execution_modes.append(self._encode(opname, (function.id, mode, *parameters)))

    def to_words(self) -> list[int]:
        """The assembled module: header, then sections in the order the specification requires, ids numbered."""
        return assemble(self)

    def to_bytes(self) -> bytes:
        return b"".join(w.to_bytes(4, "little") for w in self.to_words())
