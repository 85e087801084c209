"""The tensor language of the reference (tinytc v0.4.0's manual, `../shared/spec/tensor-language-reference.txt`):
parse, check and print programs, interpret them with numpy, compile them to SPIR-V and run them on Vulkan.

    from coopnn import tl
    program = tl.parse(text)            # Program (frozen dataclasses with source ranges)
    tl.check(program)                   # TensorLanguageError listing every diagnostic, or nothing
    text = tl.print_program(program)    # canonical text; parse(text) == program
"""

from coopnn.tl.errors import Diagnostic, TensorLanguageError
from coopnn.tl.parser import parse
from coopnn.tl.printer import print_program

__all__ = ["Diagnostic", "TensorLanguageError", "parse", "print_program"]
