"""Where a training session's parameters sit in a compiled model's weight buffer: what lets a trainer hand its
weights to the model on the GPU (`Backend.take_trained`) instead of through the host.

Both must live in one shared Vulkan context (`coopnn.runtime.vk.shared`), and the model's kernel must hold every
trainable parameter, the layers' and a trained grid's table, in an entry of its own, unchanged (the kernel level
shares parameters of identical contents, so a freshly initialised model whose biases are all zero holds them once;
it is prepared anew on the first step and takes later ones in place). The session may hold a parameter padded (the
tiled step kernel's layout: widths in whole 16s): the model's entry is then its leading rows and columns.
"""

from __future__ import annotations

from typing import Mapping

from coopnn.layouts.pack import Entry


def trained_entries(executable, session, session_entries: Mapping[str, Entry]) -> dict[str, tuple[Entry, Entry]] | None:
    """Each weight entry of `executable` that holds a trainable parameter, by entry name, with the parameter's entry
    in the session's buffer (`session_entries`, by stable parameter name) and its own; None when the two share no
    context or some parameter is not held once and whole."""
    if executable.context.shared_context is not session.context.shared_context:
        return None
    # parameters are named stably ("layers.0.weight"); kernels name the graph constants holding them
    by_constant = {}
    for layer in session.plan.layers:
        by_constant[layer.weight_constant] = session_entries[layer.weight]
        by_constant[layer.bias_constant] = session_entries[layer.bias]
    # a trained grid's table moves with the layers: a model left running its old table drifts from what was trained
    for table in session.plan.tables:
        by_constant[table.constant] = session_entries[table.name]
    pairs, found = {}, set()
    for name, entry in executable.binary.weight_image.entries.items():
        held = executable.sources.get(name, ())
        if not any(source in by_constant for source in held):
            continue
        if len(held) != 1 or not _holds(by_constant[held[0]], entry):
            return None
        pairs[name] = (by_constant[held[0]], entry)
        found.add(held[0])
    return pairs if found == set(by_constant) else None


def _holds(session_entry: Entry, entry: Entry) -> bool:
    """Whether the session's entry holds the model's as its leading rows and columns: the same shape, or padded."""
    return (len(session_entry.shape) == len(entry.shape)
            and all(padded >= n for padded, n in zip(session_entry.shape, entry.shape)))
