"""Where a training session's parameters sit in a compiled model's weight buffer: what lets a trainer hand its
weights to the model on the GPU (`Backend.take_trained`) instead of through the host.

Both must live in one shared Vulkan context (`coopnn.runtime.vk.shared`), and the model's kernel must hold every
trainable parameter in an entry of its own, unchanged (the kernel level shares parameters of identical contents,
so a freshly initialised model whose biases are all zero holds them once; it is prepared anew on the first step
and takes later ones in place).
"""

from __future__ import annotations

from typing import Mapping

from coopnn.layouts.pack import Entry


def trained_entries(executable, session, session_entries: Mapping[str, Entry]) -> dict[str, tuple[Entry, Entry]] | None:
    """Each weight entry of `executable` that holds a trainable parameter, by entry name, with the parameter's entry
    in the session's buffer (`session_entries`, by parameter name) and its own; None when the two share no context
    or some parameter is not held once and whole."""
    if executable.context.shared_context is not session.context.shared_context:
        return None
    pairs, found = {}, set()
    for name, entry in executable.binary.weight_image.entries.items():
        held = executable.sources.get(name, ())
        trained = [source for source in held if source in session_entries]
        if not trained:
            continue
        if len(held) != 1 or session_entries[held[0]].shape != entry.shape:
            return None
        pairs[name] = (session_entries[held[0]], entry)
        found.add(held[0])
    return pairs if found == set(session_entries) else None
