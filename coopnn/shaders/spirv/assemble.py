"""Assembles a built module into words: sections in the order of the SPIR-V specification (2.4 Logical Layout),
capabilities and extensions inferred, entry point interfaces collected, and ids numbered last, in order of first
appearance, so that the same build always gives the same binary."""

from __future__ import annotations

from coopnn.shaders.spirv.capabilities import choose_capabilities, choose_extensions
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.instruction import Id, Instruction

GENERATOR = 0  # coopnn has no generator id registered with Khronos; 0 is the spec's "unknown"
SCHEMA = 0
INTERFACE_STORAGE_BEFORE_1_4 = ("Input", "Output")  # SPIR-V 1.4 widened the interface to every global variable


def _reachable_functions(module, entry) -> list:
    """The entry point's function and every function it calls, directly or not."""
    by_id = {f.id: f for f in module.functions}
    found, todo = [], [entry]
    while todo:
        function = todo.pop()
        if function in found:
            continue
        found.append(function)
        for block in function.blocks:
            todo.extend(by_id[i.operands[2]] for i in block.instructions if i.opname == "OpFunctionCall")
    return found


def _interface(module, entry) -> list[Id]:
    used = {
        word
        for function in _reachable_functions(module, entry)
        for instruction in [*function.variables, *(i for b in function.blocks for i in b.instructions)]
        for word in instruction.ids()
    }
    storage_classes = None if module.version >= (1, 4) else INTERFACE_STORAGE_BEFORE_1_4
    return [
        variable for variable in module.global_variables
        if variable in used
        and (storage_classes is None or module.type_info(module.type_of(variable)).operands[0] in storage_classes)
    ]


def _sections(module) -> list[Instruction]:
    """Everything after OpCapability and OpExtension, in layout order."""
    encode = module._encode
    entry_points = [
        encode("OpEntryPoint", (e.model, e.function.id, e.name, *_interface(module, e.function)))
        for e in module.entry_points
    ]
    return [
        *module.ext_inst_imports.values(),
        encode("OpMemoryModel", (module.addressing_model, module.memory_model)),
        *entry_points,
        *module.execution_modes,
        *module.debug_names,
        *module.annotations,
        *module.globals,
        *(i for function in module.functions for i in function.instructions()),
    ]


def _number_ids(stream: list[Instruction]) -> dict[Id, int]:
    numbers: dict[Id, int] = {}
    defined: set[Id] = set()
    for instruction in stream:
        if instruction.result is not None:
            if instruction.result in defined:
                raise SpirvBuildError(f"{instruction.result!r} is defined twice (second time by {instruction.opname})")
            defined.add(instruction.result)
        for word in instruction.ids():
            numbers.setdefault(word, len(numbers) + 1)
    undefined = [i for i in numbers if i not in defined]
    if undefined:
        raise SpirvBuildError(f"ids used but never defined: {undefined!r}")
    return numbers


def assemble(module) -> list[int]:
    if not module.entry_points:
        raise SpirvBuildError("the module has no entry point: call Module.entry_point")
    body = _sections(module)
    requirements = [*(r for i in body for r in i.requirements), *module._requirements]
    capabilities = choose_capabilities(module.grammar, requirements, module.explicit_capabilities)
    extensions = choose_extensions(module.grammar, requirements, capabilities, module.explicit_extensions,
                                   module.version)
    head = [module._encode("OpCapability", (c,)) for c in capabilities]
    head += [module._encode("OpExtension", (e,)) for e in extensions]
    stream = head + body
    numbers = _number_ids(stream)
    major, minor = module.version
    words = [module.grammar.magic_number, (major << 16) | (minor << 8), GENERATOR, len(numbers) + 1, SCHEMA]
    for instruction in stream:
        if len(instruction.operands) >= 0xFFFF:
            raise SpirvBuildError(f"{instruction.opname} has {len(instruction.operands)} operand words; at most 65534")
        words.append(((len(instruction.operands) + 1) << 16) | instruction.opcode)
        words.extend(numbers[w] if isinstance(w, Id) else w for w in instruction.operands)
    return words
