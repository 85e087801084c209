"""Which OpCapability and OpExtension a module needs, from what its instructions, enumerants and types require.

The grammar says what each instruction and enumerant needs. Where it lists several capabilities (any one will do), one
already declared or implied wins; otherwise `Shader` first and `Kernel` last, since coopnn targets Vulkan compute, and
a capability declared explicitly always counts. An extension is needed only while the module's SPIR-V version is below
the one where the item became core. A few rules the grammar cannot express (a 16-bit float type needs Float16, 16-bit
data in a storage buffer needs StorageBuffer16BitAccess, ...) come from the tables below.
"""

from __future__ import annotations

from typing import Iterable

from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.grammar import Availability, Grammar, Version

# Lower ranks are preferred among alternatives; unlisted capabilities rank 1, ties keep the grammar's order.
CAPABILITY_RANK = {"Shader": 0, "Kernel": 2}
EXTENSION_PREFIX_RANK = ("SPV_KHR_", "SPV_EXT_")

# Plain scalar types (no FPEncoding) whose width needs a capability of its own (SPIR-V spec 2.16.1, Vulkan 15.1).
SCALAR_CAPABILITY = {
    ("OpTypeFloat", 16): "Float16",
    ("OpTypeFloat", 64): "Float64",
    ("OpTypeInt", 8): "Int8",
    ("OpTypeInt", 16): "Int16",
    ("OpTypeInt", 64): "Int64",
}
# (scalar width, storage class of a pointer reaching it) -> capability for 8/16-bit access to that storage.
STORAGE_ACCESS_CAPABILITY = {
    (16, "StorageBuffer"): "StorageBuffer16BitAccess",
    (16, "PhysicalStorageBuffer"): "StorageBuffer16BitAccess",
    (16, "Uniform"): "UniformAndStorageBuffer16BitAccess",
    (16, "PushConstant"): "StoragePushConstant16",
    (16, "Input"): "StorageInputOutput16",
    (16, "Output"): "StorageInputOutput16",
    (8, "StorageBuffer"): "StorageBuffer8BitAccess",
    (8, "PhysicalStorageBuffer"): "StorageBuffer8BitAccess",
    (8, "Uniform"): "UniformAndStorageBuffer8BitAccess",
    (8, "PushConstant"): "StoragePushConstant8",
}


def _capability_rank(indexed: tuple[int, str]) -> tuple[int, int]:
    index, name = indexed
    return CAPABILITY_RANK.get(name, 1), index


def _extension_rank(indexed: tuple[int, str]) -> tuple[int, int]:
    index, name = indexed
    prefix = [i for i, p in enumerate(EXTENSION_PREFIX_RANK) if name.startswith(p)]
    return (prefix[0] if prefix else len(EXTENSION_PREFIX_RANK)), index


def _preferred(options: tuple[str, ...], rank) -> str:
    return min(enumerate(options), key=rank)[1]


def choose_capabilities(grammar: Grammar, requirements: Iterable[Availability], explicit: Iterable[str]) -> list[str]:
    """Capabilities to declare: the explicit ones plus one per unmet requirement, without those another declared
    capability implies; ordered by enumerant value."""
    explicit = [grammar.enumerant("Capability", name).name for name in explicit]
    declared = list(dict.fromkeys(explicit))
    implied = set().union(*(grammar.implied_capabilities(c) for c in declared))
    wanted = [r.capabilities for r in requirements if r.capabilities]
    # Requirements with a single option first, so that alternatives can be met by what must be declared anyway.
    for options in sorted(wanted, key=len):
        if not implied.intersection(options):
            choice = _preferred(options, _capability_rank)
            declared.append(choice)
            implied |= grammar.implied_capabilities(choice)
    kept = [
        c for c in declared
        if c in explicit or not any(c in grammar.implied_capabilities(other) for other in declared if other != c)
    ]
    return sorted(kept, key=lambda c: grammar.enumerant("Capability", c).value)


def check_version(requirement: Availability, version: Version) -> None:
    if requirement.last_version is not None and version > requirement.last_version:
        last = ".".join(map(str, requirement.last_version))
        raise SpirvBuildError(f"{requirement.what} was removed after SPIR-V {last}; the module targets "
                              f"{'.'.join(map(str, version))}")
    if not requirement.extensions and requirement.version is not None and version < requirement.version:
        raise SpirvBuildError(f"{requirement.what} needs SPIR-V {'.'.join(map(str, requirement.version))}; the "
                              f"module targets {'.'.join(map(str, version))}")


def choose_extensions(
    grammar: Grammar,
    requirements: Iterable[Availability],
    capabilities: Iterable[str],
    explicit: Iterable[str],
    version: Version,
) -> list[str]:
    """Extensions to declare: the explicit ones plus one per item (instruction, enumerant, declared capability) that
    the module's SPIR-V version does not have in core; sorted by name."""
    chosen = set(explicit)
    declared = [grammar.enumerant("Capability", c).availability for c in capabilities]
    for requirement in [*requirements, *declared]:
        check_version(requirement, version)
        core = requirement.version is not None and version >= requirement.version
        if requirement.extensions and not core and not chosen.intersection(requirement.extensions):
            chosen.add(_preferred(requirement.extensions, _extension_rank))
    return sorted(chosen)


# Scopes that need a capability of their own in a module on the Vulkan memory model (SPIR-V spec 2.17, Vulkan 15.1).
VULKAN_MEMORY_MODEL_SCOPE_CAPABILITY = {"Device": "VulkanMemoryModelDeviceScope"}


def scope_requirements(kind: str, names: Iterable[str], memory_model: str) -> list[Availability]:
    """VulkanMemoryModelDeviceScope for a Device scope operand under the Vulkan memory model."""
    if kind != "Scope" or memory_model != "Vulkan":
        return []
    return [Availability(f"Scope {name} under the Vulkan memory model", (VULKAN_MEMORY_MODEL_SCOPE_CAPABILITY[name],))
            for name in names if name in VULKAN_MEMORY_MODEL_SCOPE_CAPABILITY]


def scalar_type_requirements(opname: str, operands: tuple) -> list[Availability]:
    """Float16, Int8, ... for a scalar type; floats with an FPEncoding get theirs from the grammar instead."""
    if opname == "OpTypeFloat" and len(operands) > 1:
        return []
    capability = SCALAR_CAPABILITY.get((opname, operands[0] if operands else None))
    return [Availability(f"{opname} {operands[0]}", (capability,))] if capability else []


def storage_access_requirements(storage_class: str, scalar_widths: Iterable[int]) -> list[Availability]:
    """StorageBuffer16BitAccess, StoragePushConstant8, ... for narrow scalars reached through a pointer."""
    found = []
    for width in sorted(set(scalar_widths)):
        capability = STORAGE_ACCESS_CAPABILITY.get((width, storage_class))
        if capability:
            found.append(Availability(f"{width}-bit data in {storage_class}", (capability,)))
    return found
