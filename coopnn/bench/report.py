"""Reading and writing a results document: speed-up ratios against the baseline, the terminal and markdown tables,
and the `<device>-<date>-<name>.{json,md}` pair a benchmark script leaves in its results folder.

Everything here works on the plain document (as run_suite returns it or as loaded from its JSON file), so tables and
plots can be made again later from a saved file. A speed-up compares GPU times when both sides have one and host
times otherwise, and always says which.
"""

from __future__ import annotations

import json
from pathlib import Path

from coopnn.bench.environment import results_stem
from coopnn.bench.runners import REFERENCE_ORDER
from coopnn.tables import format_table


def load(path: str | Path) -> dict:
    with open(path) as f:
        return json.load(f)


def save(document: dict, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def write_results(document: dict, out: Path, name: str, markdown: str) -> Path:
    """`<out>/<device>-<date>-<name>.json` (the document) and `.md` (`markdown`); returns the markdown's path."""
    stem = out / f"{results_stem(document['environment'])}-{name}"
    save(document, stem.with_suffix(".json"))
    stem.with_suffix(".md").write_text(markdown)
    return stem.with_suffix(".md")


def _measured(document: dict):
    """(result, batch record) for every measured batch."""
    for result in document["results"]:
        for record in result["batches"]:
            if record["status"] == "measured":
                yield result, record


def _time_ms(record: dict, basis: str) -> float:
    return record[f"{basis}_ms"]["median"]


def comparisons(document: dict) -> list[dict]:
    """For each model and batch, every runner's speed-up over the reference baseline (the first of REFERENCE_ORDER
    measured there): reference time / runner time, on GPU times where both have them, else host times."""
    by_key: dict[tuple[str, int], dict[str, dict]] = {}
    for result, record in _measured(document):
        by_key.setdefault((result["model"], record["batch"]), {})[result["runner"]] = record
    out = []
    for (model, batch), records in by_key.items():
        reference = next((name for name in REFERENCE_ORDER if name in records), None)
        if reference is None:
            continue
        ref = records[reference]
        for runner, record in records.items():
            basis = "gpu" if record["gpu_ms"] and ref["gpu_ms"] else "host"
            out.append({"model": model, "batch": batch, "runner": runner, "reference": reference, "basis": basis,
                        "speedup": _time_ms(ref, basis) / _time_ms(record, basis)})
    return out


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def _si(x: float | None) -> str:
    if x is None:
        return "-"
    for scale, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def batch_label(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


TIMING_HEADER = ["model", "runner", "batch", "GPU ms median (min, p90)", "host ms median", "samples/s", "MB moved",
                 "GFLOP", "TB/s", "TFLOP/s", "bound ms", "x bound", "speed-up", "note"]
FIRST_CALL_HEADER = ["model", "runner", "precision", "status", "first call ms cold", "warm", "max abs error",
                     "reason"]


def timing_rows(document: dict) -> list[list[str]]:
    speedups = {(c["model"], c["batch"], c["runner"]): c for c in document.get("comparisons", [])}
    rows = []
    for result in document["results"]:
        for r in result["batches"]:
            if r["status"] != "measured":
                rows.append([result["model"], result["runner"], batch_label(r["batch"])]
                            + ["-"] * (len(TIMING_HEADER) - 4) + [r["note"]])
                continue
            gpu = r["gpu_ms"]
            c = speedups.get((result["model"], r["batch"], result["runner"]))
            rows.append([
                result["model"], result["runner"], batch_label(r["batch"]),
                f"{_ms(gpu['median'])} ({_ms(gpu['min'])}, {_ms(gpu['p90'])})" if gpu else "-",
                _ms(r["host_ms"]["median"]), _si(r["samples_per_s"]), *roofline_cells(r.get("roofline")),
                f"{c['speedup']:.3g}x {c['basis']} vs {c['reference']}" if c else "-",
                r["note"],
            ])
    return rows


def roofline_cells(row: dict | None) -> list[str]:
    """MB moved, GFLOP, TB/s, TFLOP/s, the bound (with what sets it) and the ratio to it, from a batch's roofline
    record (`coopnn.bench.roofline.KernelWork.against`); dashes for files written before it existed."""
    if row is None:
        return ["-"] * 6
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    bound = "-" if row["bound_ms"] is None else f"{row['bound_ms']:.4g} ({row['bound_by']})"
    return [f"{row['bytes'] / 1e6:.4g}", f"{row['flops'] / 1e9:.4g}", fmt(row["tb_per_s"], ".3g"),
            fmt(row["tflop_per_s"], ".3g"), bound, fmt(row["ratio_to_bound"], ".3g")]


def first_call_rows(document: dict) -> list[list[str]]:
    rows = []
    for r in document["results"]:
        first = r["first_call_ms"] or {}
        error = "-" if r["max_abs_error"] is None else f"{r['max_abs_error']:.2g} (of {r['max_abs_reference']:.2g})"
        rows.append([r["model"], r["runner"], r["precision"], r["status"], _ms(first.get("cold")),
                     _ms(first.get("warm")), error, r["reason"]])
    return rows


def _device_line(document: dict) -> str:
    env, peak = document["environment"], document["peaks"]
    limits = (f"fp16 dense peak {peak['fp16_dense_tflops']:g} TFLOP/s, memory bandwidth "
              f"{peak['memory_bandwidth_gbs']:g} GB/s ({peak['label']})" if "fp16_dense_tflops" in peak
              else "peaks unknown (not in coopnn.bench.peaks)")
    bounds = document.get("roofline_peaks")
    roof = (f"; roofline {bounds['bandwidth_tbps']:.3g} TB/s and {bounds['tensor_tflops']:.3g} TFLOP/s "
            f"({bounds['source']})" if bounds else "; no roofline (peaks unknown)")
    return f"{env['device']}, driver {env['driver']}, {env['date']}; {limits}{roof}"


def text_report(document: dict) -> str:
    return "\n\n".join([
        _device_line(document),
        format_table(TIMING_HEADER, timing_rows(document)),
        format_table(FIRST_CALL_HEADER, first_call_rows(document)),
    ])


def _model_line(model: dict) -> str:
    bounds = ""
    if model["bandwidth_bound_samples_per_s"] is not None:
        bounds = (f"; bandwidth bound {_si(model['bandwidth_bound_samples_per_s'])} samples/s, fp16 compute bound "
                  f"{_si(model['compute_bound_samples_per_s'])} samples/s")
    return (f"- `{model['name']}`: {model['parameters']} parameters, {model['flops_per_sample']} FLOP and "
            f"{model['io_bytes_per_sample']} bytes in and out per sample{bounds}")


def markdown_report(document: dict) -> str:
    env, settings = document["environment"], document["settings"]
    versions = [f"coopnn {env['coopnn']}", f"Python {env['python']}", f"numpy {env['numpy']}"]
    if env["torch"]:
        versions.append(f"PyTorch {env['torch']['version']} (CUDA {env['torch']['cuda']})")
    if env["onnxruntime"]:
        versions.append(f"onnxruntime {env['onnxruntime']['version']}")
    unavailable = [f"- {r['name']}: {r['reason']}" for r in document["runners"] if not r["available"]]
    parts = [
        f"# coopnn benchmark: {env['device']}",
        f"{_device_line(document)}. CPU: {env['cpu']} ({env['cpu_count']} threads). {', '.join(versions)}.",
        f"Batches {', '.join(batch_label(b) for b in settings['batches'])}; {settings['runs']} timed runs after "
        f"warm-up (up to {settings['warmup']}), fewer where they would exceed {settings['seconds_per_batch']:g} s per "
        f"batch; coopnn weights {settings['weights']}. Samples/s and TFLOP/s come from the median GPU time where "
        f"the runner has a GPU clock, else from the median host time; host time includes the copies in and out. "
        f"Speed-ups are against the first baseline measured of {', '.join(REFERENCE_ORDER)}. Roofline "
        f"(`coopnn.bench.roofline`): the bytes a batch must move (float32 in and out, float16 weights once) and "
        f"FLOPs it must do, the rates achieved, the bound max(bytes / bandwidth, FLOPs / tensor peak) and the time "
        f"as a multiple of it (x bound: 1 is the roofline).",
        "## Models\n\n" + "\n".join(_model_line(m) for m in document["models"]),
        "## Timings\n\n" + format_table(TIMING_HEADER, timing_rows(document), markdown=True),
        "## First call and accuracy\n\nFirst call: prepare plus one run at batch "
        f"{settings['first_call_batch']}, with an empty (cold) and then a filled (warm) pipeline cache. Max abs error: "
        "against the numpy reference with float32 weights on that batch.\n\n"
        + format_table(FIRST_CALL_HEADER, first_call_rows(document), markdown=True),
    ]
    if unavailable:
        parts.append("## Not run here\n\n" + "\n".join(unavailable))
    return "\n\n".join(parts) + "\n"
