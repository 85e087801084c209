"""The error the SPIR-V builder raises when it is asked for something the grammar or the SPIR-V rules forbid."""

from __future__ import annotations

from coopnn.errors import CompileError


class SpirvBuildError(CompileError):
    """A SPIR-V module could not be built: wrong operands, unknown names, or an incomplete module."""
