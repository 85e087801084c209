"""The tensor language of the reference (tinytc v0.4.0's manual, `../shared/spec/tensor-language-reference.txt`):
parse, check and print programs, interpret them with numpy, compile them to SPIR-V and run them on Vulkan.

    from coopnn import tl
    program = tl.parse(text)            # Program (frozen dataclasses with source ranges)
    tl.check(program)                   # the diagnostics, [] when it checks
    text = tl.print_program(program)    # canonical text; parse(text) == program
    tl.interpret(program, a, b, c)      # the numpy oracle, writing results into a, b, c
    kernel = tl.compile(text)           # on the Vulkan device; kernel(a, b, c, groups=(4, 1, 1))
    tl.activation(text), tl.encoding(text), tl.loss(text)   # functions with results, fused into models' kernels

docs/tensor-language.md says what is supported and how the reference's slips are read.
"""

from coopnn.tl.checker import check, checked
from coopnn.tl.errors import Diagnostic, TensorLanguageError
from coopnn.tl.functions import activation, encoding, loss
from coopnn.tl.interp import interpret
from coopnn.tl.kernel import Kernel, compile
from coopnn.tl.parser import parse
from coopnn.tl.printer import print_program

__all__ = ["Diagnostic", "Kernel", "TensorLanguageError", "activation", "check", "checked", "compile", "encoding",
           "interpret", "loss", "parse", "print_program"]
