"""Diagnostics of tensor-language text: a source range and a message, printed as the reference prints them
(`9.8-24: Operand type must match return type`), and the error that carries them."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.errors import CompileError
from coopnn.tl.ast import Span


@dataclass(frozen=True)
class Diagnostic:
    span: Span | None
    message: str

    def __str__(self) -> str:
        return f"{self.span}: {self.message}" if self.span is not None else self.message


class TensorLanguageError(CompileError):
    """Tensor-language text that does not parse or check; `diagnostics` lists every problem found, in source order."""

    def __init__(self, diagnostics: list[Diagnostic], source_name: str = ""):
        self.diagnostics = list(diagnostics)
        self.source_name = source_name
        prefix = f"{source_name}:" if source_name else ""
        super().__init__("\n".join(prefix + str(d) for d in self.diagnostics))
