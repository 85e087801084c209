"""The report of the training-kernel sweep (`coopnn.bench.training_variants`): its log lines, the summary a batch,
and the markdown and JSON written to bench/results/."""

from __future__ import annotations

from pathlib import Path


def registers(statistics: dict) -> str:
    """The registers an invocation takes, from a kernel's driver statistics, or "-"."""
    return next((str(v) for k, v in statistics.items() if "register" in k.lower()), "-")


def _ms(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _fixed(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _rate(row: dict, part: str) -> str:
    value = row[part]["tb_per_s"] if part in row else None
    return "-" if value is None else f"{value:.2f}"


def line(row: dict) -> str:
    """One log line of a measured (or failed) variant."""
    if "whole_ms" not in row:
        return f"{row['model']} {row['batch']} {row['variant']}: {row['status']}"
    tb = lambda part: row[part]["tb_per_s"] or 0.0  # noqa: E731
    return (f"{row['model']} {row['batch']} {row['variant']}: step {row['step_ms']:.4f} ms ({tb('step'):.2f} TB/s), "
            f"products {row['products_ms']:.4f} ms ({tb('products'):.2f} TB/s), whole {row['whole_ms']:.4f} ms "
            f"({row['roofline']['ratio_to_bound'] or 0:.2f} x bound) {row['status']}")


def summary(rows: list[dict], model: str) -> str:
    """One line a batch of `model`: the default's and the fastest whole step, step kernel and products."""
    lines = []
    for batch in sorted({r["batch"] for r in rows if r.get("model") == model and "batch" in r}, reverse=True):
        measured = [r for r in rows if (r.get("model"), r.get("batch")) == (model, batch) and r.get("whole_ms")
                    and r["status"] == "measured"]
        if not measured:
            lines.append(f"SUMMARY {model} {batch}: nothing measured")
            continue
        default = next((r for r in measured if r["variant"] == "default"), None)
        best = {key: min(measured, key=lambda r: r[key]) for key in ("whole_ms", "step_ms", "products_ms")}
        lines.append(f"SUMMARY {model} {batch}: default whole {_ms(default and default['whole_ms'])} step "
                     f"{_ms(default and default['step_ms'])} products {_ms(default and default['products_ms'])}; "
                     + "; ".join(f"best {key[:-3]} {_ms(r[key])} [{r['variant']}]" for key, r in best.items()))
    return "\n".join(lines)


def markdown(document: dict) -> str:
    """Per model and batch: the fastest whole step, step kernel and products, then every variant by whole step."""
    from coopnn.bench.environment import device_name, driver

    env = document["environment"]
    lines = [f"# Training-step kernels by tuning, {device_name(env)} (driver {driver(env)}), {env['date'][:10]}", "",
             "Each variant's tiled step kernel and cooperative-matrix products (`coopnn.shaders.training.tuning`; "
             "'default' is `Tuning()`) timed alone on one session's buffers, variants in turn (median GPU ms): the "
             "step kernel (inputs and targets read, tape and losses written), the products (tape read, partials "
             "written), and a whole step but the optimizer's update (with the loss tiles and the partials summed). "
             "TB/s: bytes "
             "the kernel moves as laid out over its time; x bound: the whole step against the roofline of "
             "`coopnn.bench.roofline.training_work`. Status: 'measured' where the variant's losses and gradient "
             "match the default's; regs: registers an invocation, in the driver's statistics.", ""]
    measured = [r for r in document["rows"] if r.get("whole_ms") and r.get("status") == "measured"]
    keys = sorted({(r["model"], r["batch"]) for r in document["rows"] if "batch" in r})
    lines += ["| model | batch | default whole ms | best whole ms (x bound) | its variant | best step ms (TB/s) | "
              "its variant | best products ms (TB/s) | its variant |", "|---|---|---|---|---|---|---|---|---|"]
    for model, batch in keys:
        rows = [r for r in measured if (r["model"], r["batch"]) == (model, batch)]
        if not rows:
            continue
        default = next((r for r in rows if r["variant"] == "default"), None)
        whole = min(rows, key=lambda r: r["whole_ms"])
        step = min(rows, key=lambda r: r["step_ms"])
        products = min(rows, key=lambda r: r["products_ms"])
        lines.append(f"| {model} | {batch} | {_ms(default and default['whole_ms'])} | {_ms(whole['whole_ms'])} "
                     f"({whole['roofline']['ratio_to_bound'] or 0:.2f}) | {whole['variant']} | "
                     f"{_ms(step['step_ms'])} ({_rate(step, 'step')}) | {step['variant']} | "
                     f"{_ms(products['products_ms'])} ({_rate(products, 'products')}) | {products['variant']} |")
    for model, batch in keys:
        rows = [r for r in document["rows"] if (r.get("model"), r.get("batch")) == (model, batch)]
        rows.sort(key=lambda r: (r.get("whole_ms") is None, r.get("whole_ms") or 0.0))
        lines += ["", f"## {model}, batch {batch}", "",
                  "| variant | chunks | step ms | step TB/s | step regs | products ms | products TB/s | products regs | "
                  "whole ms | x bound | speed-up | status |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ratio = r["roofline"]["ratio_to_bound"] if "roofline" in r else None
            lines.append(f"| {r['variant']} | {r.get('chunks', '-')} | {_ms(r.get('step_ms'))} | {_rate(r, 'step')} | "
                         f"{registers(r.get('step_statistics', {}))} | {_ms(r.get('products_ms'))} | "
                         f"{_rate(r, 'products')} | {registers(r.get('products_statistics', {}))} | "
                         f"{_ms(r.get('whole_ms'))} | "
                         f"{_fixed(ratio)} | {_fixed(r.get('speedup'))} | {r['status'][:80]} |")
    failed = [r for r in document["rows"] if "batch" not in r]
    lines += [""] + [f"- {r['model']}: {r['status']}" for r in failed]
    return "\n".join(lines) + "\n"


def write(document: dict, out: Path) -> Path:
    """`<out>/<device>-<date>-train-variants.{json,md}`; returns the markdown's path."""
    from coopnn.bench.report import write_results

    return write_results(document, out, "train-variants", markdown(document))
