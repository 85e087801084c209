"""Where a GPU training step's time goes: each command of one step of a `KernelTrainingSession` (the step kernel,
fills, the weight-gradient products, a grid's widening, the optimizer, the working copy's conversion) timed alone
on the session's own buffers, round robin, next to the whole step (`bench/step_stages.py` runs it).

A command alone pays its own start and end on the GPU, which the barriers between commands of a recorded step also
cost, so the parts add up to about the whole; the difference is what ordering them costs.
"""

from __future__ import annotations

import numpy as np

from coopnn.bench.training_variants import time_round_robin

ROUNDS = 30


def command_name(command, index: int) -> str:
    """A label for one command of a step: the kernel a dispatch runs, or its place for other recorded commands."""
    kernel = getattr(command, "kernel", None)
    return getattr(kernel, "name", None) or f"command {index} (fill, copy or conversion)"


def one_step(session, data, batch: int, seed: int = 0) -> list:
    """The commands of one step on batches drawn from `data` (a `ResidentData` of the session), in order."""
    return session._forward_backward(batch, session.invocations(batch), data, seed) + session._update(batch)


def stage_times(session, data, batch: int, rounds: int = ROUNDS) -> list[dict]:
    """Median GPU ms of each command of a step alone, and of the whole step, as rows {"stage", "ms", "share"}."""
    from coopnn.runtime.vk.commands import Dispatch

    commands = one_step(session, data, batch)
    runs = {"whole step": commands}
    for index, command in enumerate(commands):
        alone = command if not isinstance(command, Dispatch) else _without_alongside(command)
        runs[f"{index}: {command_name(command, index)}"] = [alone]
    times = time_round_robin(session.context, runs, rounds)
    session.context.run([session.fill_zero(session.state, size=4)])  # a part run alone may leave the status word set
    whole = times["whole step"]
    rows = [{"stage": key, "ms": ms, "share": None if not (ms and whole) else ms / whole}
            for key, ms in times.items()]
    parts = float(np.sum([r["ms"] for r in rows[1:] if r["ms"] is not None]))
    rows.append({"stage": "sum of the parts", "ms": parts, "share": parts / whole if whole else None})
    return rows


def _without_alongside(dispatch):
    from dataclasses import replace

    return replace(dispatch, alongside=False)


def markdown(title: str, rows: list[dict]) -> str:
    """`stage_times`' rows as a markdown table under the heading `title`."""
    lines = [f"### {title}", "", "| command | GPU ms | share of the step |", "|---|---|---|"]
    for row in rows:
        ms = "-" if row["ms"] is None else f"{row['ms']:.4f}"
        share = "-" if row["share"] is None else f"{100 * row['share']:.1f}%"
        lines.append(f"| {row['stage']} | {ms} | {share} |")
    return "\n".join(lines) + "\n"
