"""Throughput against batch size, one panel per model and one line per runner, with the device's reference lines.

matplotlib is optional: without it `plot_unavailable_reason()` says so and callers skip the PNG; it can be drawn
later from the saved JSON with `python3 bench/plot.py RESULTS.json`.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from coopnn.bench.report import batch_label


def plot_unavailable_reason() -> str | None:
    if importlib.util.find_spec("matplotlib") is None:
        return "matplotlib is not installed (pip install matplotlib)"
    return None


def plot_throughput(document: dict, path: str | Path) -> Path:
    """Write the PNG to `path`; samples/s on log axes, solid where from GPU time, dashed where from host time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = document["models"]
    columns = min(3, len(models))
    rows = math.ceil(len(models) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4.2 * rows), squeeze=False)
    runners = [r["name"] for r in document["runners"]]
    colours = {name: plt.cm.tab10(i % 10) for i, name in enumerate(runners)}
    for ax, model in zip(axes.flat, models):
        for result in document["results"]:
            points = [r for r in result["batches"] if r["status"] == "measured"]
            if result["model"] != model["name"] or not points:
                continue
            style = "-" if all(p["time_source"] == "gpu" for p in points) else "--"
            ax.plot([p["batch"] for p in points], [p["samples_per_s"] for p in points], style, marker="o",
                    color=colours[result["runner"]], label=result["runner"])
        for key, label, colour in (("bandwidth_bound_samples_per_s", "memory bandwidth bound", "grey"),
                                   ("compute_bound_samples_per_s", "fp16 dense peak", "black")):
            if model[key] is not None:
                ax.axhline(model[key], linestyle=":", color=colour, label=label)
        ax.set(xscale="log", yscale="log", title=model["name"], xlabel="batch", ylabel="samples/s")
        batches = document["settings"]["batches"]
        ax.set_xticks(batches, [batch_label(b) for b in batches])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    env = document["environment"]
    figure.suptitle(f"coopnn on {env['device']}\ndriver {env['driver']}, {env['date'][:10]}", fontsize=10)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
