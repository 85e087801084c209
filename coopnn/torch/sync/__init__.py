"""How a `coopnn.torch` module's kernels see the parameter vector after torch changed it: one member per backend,
each a module of this package naming its backend (`BACKEND`), whether it reads the float16 mirror (`READS_HALVES`)
and `prologue(executable, master, held)`, the commands that rewrite the model's weight buffer from the module's
vector on the GPU, recorded in the run's own submission (`coopnn.interop.slot.Prologue`), or None where the weight
buffer's layout is not one it can write (the module then refreshes the model through the host), and the training
options of the sessions its backward passes run on, where the input's gradient is wanted (`INPUT_GRADIENT_OPTIONS`)
and where it is not (`BACKWARD_OPTIONS`).

`held_parameters` says which weight entry holds which parameter: every parameter must sit unchanged in exactly one
entry of its own (the kernel builder never shares an entry between two graph constants, so zero biases qualify).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from coopnn.graph.ir import Graph
from coopnn.graph.parameters import parameter_constants

MEMBERS = ("portable", "coopvec")


def member(backend: str) -> ModuleType | None:
    """The member for `backend` (a backend name), or None where no member writes its weights on the GPU."""
    for name in MEMBERS:
        module = importlib.import_module(f"{__name__}.{name}")
        if module.BACKEND == backend:
            return module
    return None


def held_parameters(executable, graph: Graph) -> dict[str, str] | None:
    """Weight entry name -> the parameter it holds, for every entry holding one; None unless every parameter of
    `graph` sits unchanged in one entry of its own."""
    by_constant = {constant: name for name, constant in parameter_constants(graph).items()}
    held, found = {}, set()
    for entry in executable.binary.weight_image.entries:
        sources = executable.sources.get(entry, ())
        names = [by_constant[s] for s in sources if s in by_constant]
        if not names:
            continue
        if len(sources) != 1:
            return None
        held[entry] = names[0]
        found.add(names[0])
    return held if found == set(by_constant.values()) else None
