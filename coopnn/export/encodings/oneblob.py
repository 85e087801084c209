"""OneBlob: each input spread over n_bins bins of [0, 1] by the quartic kernel of radius 1/n_bins, the kernel's
wrapped copies (shifted by -1 and +1) added, as the encoding's numpy forward does: a bin's output is the difference
of the kernel's clamped integral at the bin's two boundaries."""

from __future__ import annotations

from coopnn.export.scalar import literal
from coopnn.graph.encodings.oneblob import SHIFTS


def _integral(program, t: str, bins: int) -> str:
    """The quartic kernel's integral up to `t` (clamped to [0, 1]), u = t n_bins."""
    u = program.assign(f"({t}) * {literal(bins)}")
    u2 = program.assign(f"{u} * {u}")
    return (f"clamp({literal(15 / 16)} * {u} * (1.0 - {literal(2 / 3)} * {u2} + {u2} * {u2} * {literal(1 / 5)}) "
            f"+ 0.5, 0.0, 1.0)")


def _oneblob(encoding, columns, params, program, what):
    bins, out = encoding.n_bins, []
    for x in columns:
        at = []
        for j in range(bins + 1):
            terms = [_integral(program, f"{literal(j / bins)} - {x} + {literal(s)}", bins) for s in SHIFTS]
            at.append(program.assign(" + ".join(terms)))
        out += [program.assign(f"{at[j + 1]} - {at[j]}") for j in range(bins)]
    return out


LOWERINGS = {"OneBlob": _oneblob}
