"""`coopnn tl check|print|compile|run FILE`: the tensor language on the command line (registered in cli.py as the
`tl` subcommand; see docs/tensor-language.md).

    coopnn tl check kernel.tl                    # every diagnostic, as FILE:line.column-column: message
    coopnn tl print kernel.tl                    # the canonical text
    coopnn tl compile kernel.tl -o kernel.spv    # SPIR-V (--disassemble for its text)
    coopnn tl run kernel.tl a.npy b.npy 16 -o out/ [--groups 4,1,1] [--interpret]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from coopnn.errors import InputError


def _setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("check", "print", "compile", "run"), help="what to do with the file")
    p.add_argument("file", type=Path, help="tensor-language source")
    p.add_argument("arguments", nargs="*", help="run: one per function argument: a .npy file for a memref, "
                                                "comma-separated .npy files for a group, a number for a scalar")
    p.add_argument("--function", help="the function to compile or run (default: the only one)")
    p.add_argument("-o", "--output", type=Path,
                   help="print: the file to write; compile: the .spv file; run: the folder the memref arguments "
                        "are saved to after the run, as <argument>.npy")
    p.add_argument("--groups", default="1", help="run: work-groups along x[,y[,z]] (default 1)")
    p.add_argument("--interpret", action="store_true", help="run: with the numpy interpreter, not on Vulkan")
    p.add_argument("--subgroup-size", type=int, help="compile: the subgroup size to compile for (default: the "
                                                     "function's subgroup_size, else the device's, else 16)")
    p.add_argument("--disassemble", action="store_true", help="compile: print the SPIR-V as text")


def _program(path: Path):
    from coopnn.tl import checked, parse

    return checked(parse(path.read_text(), str(path)), str(path))


def _check(args: argparse.Namespace) -> int:
    from coopnn.tl import check, parse

    program = parse(args.file.read_text(), str(args.file))
    diagnostics = check(program)
    for diagnostic in diagnostics:
        print(f"{args.file}:{diagnostic}")
    if not diagnostics:
        print(f"{args.file}: {len(program.functions)} function(s) check")
    return 1 if diagnostics else 0


def _print(args: argparse.Namespace) -> int:
    from coopnn.tl import parse, print_program

    text = print_program(parse(args.file.read_text(), str(args.file)))
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _subgroup_size(args: argparse.Namespace) -> int | None:
    if args.subgroup_size:
        return args.subgroup_size
    from coopnn.errors import BackendUnavailableError
    from coopnn.runtime.vk.shared import chosen_device

    try:
        return chosen_device(None).subgroup.size
    except BackendUnavailableError:
        return None


def _compile(args: argparse.Namespace) -> int:
    from coopnn.shaders.spirv import disassemble
    from coopnn.tl.codegen.compile import compile_function
    from coopnn.tl.launch import launch_for

    function = _program(args.file).function(args.function)
    compiled = compile_function(function, launch_for(function, _subgroup_size(args)))
    output = args.output or args.file.with_suffix(".spv")
    output.write_bytes(compiled.spirv)
    if args.disassemble:
        print(disassemble(compiled.spirv))
    launch = compiled.launch
    print(f"{output}: @{function.name}, {len(compiled.spirv)} bytes, subgroup size {launch.subgroup_size}, "
          f"work-group {launch.work_group_size[0]}x{launch.work_group_size[1]}, needs "
          f"{', '.join(sorted(compiled.features))}", file=sys.stderr)
    return 0


def _argument(text: str):
    if text.endswith(".npy") and "," in text:
        return [np.load(part) for part in text.split(",")]
    if text.endswith(".npy"):
        return np.load(text)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InputError(f"argument {text!r} is neither a .npy file nor a number") from None


def _run(args: argparse.Namespace) -> int:
    from coopnn.tl import compile as compile_kernel
    from coopnn.tl import interpret

    program = _program(args.file)
    function = program.function(args.function)
    values = [_argument(a) for a in args.arguments]
    try:
        groups = tuple(int(n) for n in args.groups.split(","))
    except ValueError:
        raise InputError(f"--groups takes up to three integers separated by commas, got {args.groups!r}") from None
    if args.interpret:
        interpret(function, *values, groups=groups)
    else:
        compile_kernel(program, function.name)(*values, groups=groups)
    for argument, value in zip(function.arguments, values):
        if isinstance(value, np.ndarray):
            if args.output:
                args.output.mkdir(parents=True, exist_ok=True)
                np.save(args.output / f"{argument.value.name}.npy", value)
            else:
                print(f"%{argument.value.name} = {np.array2string(value, threshold=64)}")
    return 0


ACTIONS = {"check": _check, "print": _print, "compile": _compile, "run": _run}


def _main(args: argparse.Namespace) -> int:
    return ACTIONS[args.action](args)


TL_COMMAND = ("check, print, compile or run a tensor-language kernel (docs/tensor-language.md)", _setup, _main)
