"""Real shader compilers from a package: Slang's compiler and the glslang it bundles, both shipped in the `slangpy`
wheel (libslang-compiler and libslang-glslang), called through ctypes without importing slangpy itself.

glslang is called through the C entry point Slang's own GLSL pass-through uses (`glslang_compile_1_2`, whose request
layout is Slang's `slang-glslang.h`); it has no include callback, so `#include "file"` lines are resolved here,
relative to the including file and then `include_dirs`, as glslc's `-I` would. Slang compiles through its C API
(`spProcessCommandLineArguments` takes slangc's options). Both give SPIR-V words or raise CompileError with the
compiler's diagnostics; BackendUnavailableError names the package when it is missing.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
import re
import tempfile
import threading
from importlib import metadata
from pathlib import Path
from typing import Iterable, Mapping

from coopnn.errors import BackendUnavailableError, CompileError

PACKAGE = "slangpy"
HINT = f"pip install {PACKAGE} (its wheel ships Slang's compiler and glslang)"
STAGES = {"vertex": 1, "fragment": 5, "compute": 6}  # SlangStage values
_lock = threading.Lock()  # neither library is documented as safe to call from several threads at once


def package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailableError(f"compiling exported shaders needs the {PACKAGE} package: {HINT}")
    return Path(list(spec.submodule_search_locations)[0])


def _library(pattern: str) -> ctypes.CDLL:
    found = sorted(glob.glob(str(package_dir() / pattern)))
    if not found:
        raise BackendUnavailableError(f"{PACKAGE} at {package_dir()} has no {pattern}: {HINT}")
    return ctypes.CDLL(found[-1])


@functools.cache
def versions() -> dict[str, str]:
    """The versions of the compilers: the wheel's, Slang's build tag and glslang's."""
    text = Path(_glslang()._name).read_bytes()
    glslang = re.search(rb"glslang Khronos\. ([0-9.]+)", text)
    return {PACKAGE: metadata.version(PACKAGE), "slang": _slang().spGetBuildTagString().decode(),
            "glslang": glslang.group(1).decode() if glslang else "unknown"}


# ----- glslang ---------------------------------------------------------------------------------------------------

_OUTPUT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class _SpirvVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


class _GlslangRequest(ctypes.Structure):
    _fields_ = [("sizeInBytes", ctypes.c_size_t), ("sourcePath", ctypes.c_char_p), ("inputBegin", ctypes.c_void_p),
                ("inputEnd", ctypes.c_void_p), ("diagnosticFunc", _OUTPUT), ("diagnosticUserData", ctypes.c_void_p),
                ("outputFunc", _OUTPUT), ("outputUserData", ctypes.c_void_p), ("slangStage", ctypes.c_int),
                ("action", ctypes.c_uint), ("optimizationLevel", ctypes.c_uint), ("debugInfoType", ctypes.c_uint),
                ("spirvTargetName", ctypes.c_char_p), ("spirvVersion", _SpirvVersion),
                ("entryPointName", ctypes.c_char_p)]


@functools.cache
def _glslang() -> ctypes.CDLL:
    lib = _library("libslang-glslang*.so")
    lib.glslang_compile_1_2.argtypes = [ctypes.POINTER(_GlslangRequest)]
    lib.glslang_compile_1_2.restype = ctypes.c_int
    return lib


def resolve_includes(source: str, path: Path, include_dirs: Iterable[Path], seen: tuple[Path, ...] = ()) -> str:
    """`source` with each `#include "file"` replaced by the file's text (`#line` keeps line numbers meaningful)."""
    out = []
    for number, line in enumerate(source.splitlines(), 1):
        match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not match:
            out.append(line)
            continue
        candidates = [path.parent / match.group(1), *(Path(d) / match.group(1) for d in include_dirs)]
        found = next((c.resolve() for c in candidates if c.is_file()), None)
        if found is None or found in seen:
            why = "includes itself" if found else f"was not found in {[str(c.parent) for c in candidates]}"
            raise CompileError(f"{path}:{number}: {match.group(1)!r} {why}")
        out += ["#line 1", resolve_includes(found.read_text(), found, include_dirs, seen + (found,)),
                f"#line {number + 1}"]
    return "\n".join(out)


def _with_defines(source: str, defines: Mapping[str, str]) -> str:
    """`source` with `#define`s right after its #version line."""
    lines = source.splitlines()
    at = next((i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("#version")), 0)
    added = [f"#define {k} {v}" for k, v in defines.items()]
    return "\n".join(lines[:at] + added + [f"#line {at + 1}"] + lines[at:])


def compile_glsl(source: str, stage: str, *, path: str | os.PathLike = "shader.glsl",
                 include_dirs: Iterable[str | os.PathLike] = (), defines: Mapping[str, str] | None = None) -> bytes:
    """SPIR-V (1.6, for Vulkan 1.3) of the GLSL `source` for `stage` ("vertex", "fragment", "compute")."""
    path = Path(path)
    text = _with_defines(resolve_includes(source, path, [Path(d) for d in include_dirs]), defines or {})
    data = text.encode()
    buffer = ctypes.create_string_buffer(data, len(data))
    diagnostics, words = [], []
    keep = [_OUTPUT(lambda p, n, _: diagnostics.append(ctypes.string_at(p, n))),
            _OUTPUT(lambda p, n, _: words.append(ctypes.string_at(p, n)))]
    start = ctypes.addressof(buffer)
    request = _GlslangRequest(ctypes.sizeof(_GlslangRequest), str(path).encode(), start, start + len(data), keep[0],
                              None, keep[1], None, STAGES[stage], 0, 0, 0, None, _SpirvVersion(1, 6, 0), b"main")
    with _lock:
        failed = _glslang().glslang_compile_1_2(ctypes.byref(request))
    message = b"".join(diagnostics).decode(errors="replace").strip()
    if failed or not words:
        raise CompileError(f"glslang rejected {path} ({stage}):\n{message}")
    return b"".join(words)


# ----- Slang -----------------------------------------------------------------------------------------------------

class _GlobalSessionDesc(ctypes.Structure):
    _fields_ = [("structureSize", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32),
                ("minLanguageVersion", ctypes.c_uint32), ("enableGLSL", ctypes.c_bool),
                ("reserved", ctypes.c_uint32 * 16)]


@functools.cache
def _slang() -> ctypes.CDLL:
    lib = _library("libslang-compiler.so*")
    signatures = {
        "slang_createGlobalSession2": ([ctypes.POINTER(_GlobalSessionDesc), ctypes.POINTER(ctypes.c_void_p)],
                                       ctypes.c_int32),
        "spCreateCompileRequest": ([ctypes.c_void_p], ctypes.c_void_p),
        "spDestroyCompileRequest": ([ctypes.c_void_p], None),
        "spProcessCommandLineArguments": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int],
                                          ctypes.c_int32),
        "spCompile": ([ctypes.c_void_p], ctypes.c_int32),
        "spGetDiagnosticOutput": ([ctypes.c_void_p], ctypes.c_char_p),
        "spGetCompileRequestCode": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.c_void_p),
        "spGetBuildTagString": ([], ctypes.c_char_p),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = arguments, result
    return lib


@functools.cache
def _global_session() -> int:
    """The process's Slang global session (Slang makes one per process at most cheaply; it is never released)."""
    session = ctypes.c_void_p()
    desc = _GlobalSessionDesc(ctypes.sizeof(_GlobalSessionDesc), 0, 2025, False)
    if _slang().slang_createGlobalSession2(ctypes.byref(desc), ctypes.byref(session)) < 0 or not session.value:
        raise BackendUnavailableError(f"Slang from {package_dir()} could not start a global session: {HINT}")
    return session.value


def compile_slang(source: str, stage: str, *, path: str | os.PathLike = "shader.slang", entry: str = "main",
                  include_dirs: Iterable[str | os.PathLike] = (), defines: Mapping[str, str] | None = None) -> bytes:
    """SPIR-V of the entry point `entry` of the Slang `source` for `stage`; `#include` finds files beside `path`
    and in `include_dirs`."""
    path = Path(path)
    with tempfile.TemporaryDirectory() as scratch:
        written = Path(scratch) / path.name
        written.write_text(source)
        args = [str(written), "-target", "spirv", "-profile", "spirv_1_6", "-stage", stage, "-entry", entry,
                "-fvk-use-entrypoint-name", "-I", str(path.parent.resolve())]
        for directory in include_dirs:
            args += ["-I", str(directory)]
        for key, value in (defines or {}).items():
            args += ["-D", f"{key}={value}"]
        words, message = _run_slang(args)
    if not words:
        raise CompileError(f"Slang rejected {path} ({stage}):\n{message}")
    return words


def _run_slang(args: list[str]) -> tuple[bytes, str]:
    lib = _slang()
    with _lock:
        request = lib.spCreateCompileRequest(_global_session())
        try:
            encoded = [a.encode() for a in args]
            failed = lib.spProcessCommandLineArguments(request, (ctypes.c_char_p * len(encoded))(*encoded),
                                                       len(encoded)) < 0
            failed = failed or lib.spCompile(request) < 0
            message = (lib.spGetDiagnosticOutput(request) or b"").decode(errors="replace").strip()
            size = ctypes.c_size_t()
            code = None if failed else lib.spGetCompileRequestCode(request, ctypes.byref(size))
            return (ctypes.string_at(code, size.value) if code and size.value else b""), message
        finally:
            lib.spDestroyCompileRequest(request)
