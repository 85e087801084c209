"""SPIR-V module builder: grammar table (generated from SPIRV-Headers), module/function building with symbolic ids,
type and constant deduplication, capability inference, assembly to words, and a spirv-dis style text dump;
cooperative_matrix2.py has typed helpers for tensor layouts, views, tensor loads and decode functions."""

from coopnn.shaders.spirv.builder import Module
from coopnn.shaders.spirv.disasm import disassemble
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.function import Block, Function
from coopnn.shaders.spirv.grammar import grammar
from coopnn.shaders.spirv.instruction import Id

__all__ = ["Block", "Function", "Id", "Module", "SpirvBuildError", "disassemble", "grammar"]
