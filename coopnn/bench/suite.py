"""A benchmark suite: every chosen runner on every model, into one results document (plain data, saved as JSON).

For each model and runner: the first call (prepare plus one small run) with a cold and then a warm pipeline cache,
the largest difference from the numpy reference on that small batch, and the timings at each batch size with the
throughput derived from them. A runner that is unavailable, cannot run the model, or fails is recorded with the
reason and the suite goes on.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from coopnn.bench import environment, peaks, roofline
from coopnn.bench.caches import disable_driver_shader_caches, pipeline_cache_at
from coopnn.bench.measure import BatchTiming, Budget, measure_batches, timed_run
from coopnn.bench.models import BenchModel
from coopnn.bench.report import comparisons
from coopnn.bench.runners import Runner, RunnerSpec
from coopnn.layouts.formats import weight_format
from coopnn.progress import Progress
from coopnn.backends.numpy.inference import run_graph

SCHEMA = "coopnn-bench/1"
DEFAULT_BATCHES = (1 << 14, 1 << 18, 1 << 21)


@dataclass(frozen=True)
class Settings:
    """What a suite measures besides the models and runners."""

    batches: tuple[int, ...] = DEFAULT_BATCHES
    # the coopnn weight format, or "auto": the one `coopnn.load` would take for each model here; baselines keep
    # their own precision
    weights: str = "auto"
    budget: Budget = field(default_factory=Budget)
    first_call_batch: int = 256  # also the batch the outputs are checked against the numpy reference on
    seed: int = 0
    measure_peaks: bool = False  # the roofline from this GPU's own copy and product rates (PyTorch), not the tables


def parse_batches(text: str) -> tuple[int, ...]:
    """Sorted batch sizes from text such as "16384,262144" or "2^14,2^18" (mixed too); ValueError otherwise."""
    batches = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        base, power, exponent = part.partition("^")
        value = int(base) ** int(exponent) if power else int(base)
        if value < 1:
            raise ValueError(f"batch sizes must be positive, got {part}")
        batches.append(value)
    if not batches:
        raise ValueError("no batch sizes given")
    return tuple(sorted(set(batches)))


def _max_abs(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]) -> tuple[float, float]:
    error = scale = 0.0
    for name, want in reference.items():
        want = np.asarray(want, np.float32)
        got = np.asarray(outputs[name], np.float32)
        error = max(error, float(np.max(np.abs(got - want))))
        scale = max(scale, float(np.max(np.abs(want))))
    return error, scale


DERIVED = ("time_source", "samples_per_s", "host_samples_per_s", "tflops", "fraction_of_fp16_peak",
           "fraction_of_bandwidth_bound")


def _throughput(timing: BatchTiming, model: BenchModel, peak: peaks.DevicePeak | None,
                bounds: roofline.RooflinePeaks | None = None) -> dict:
    """The batch record: the timing, and what follows from it (null for a skipped batch), its roofline included:
    the bytes and FLOPs of the batch (float32 in and out, as callers hand them over) against `bounds`."""
    record = {**asdict(timing), **dict.fromkeys(DERIVED), "roofline": None}
    if timing.status != "measured":
        return record
    seconds = (timing.gpu_ms or timing.host_ms).median / 1e3
    samples_per_s = timing.batch / seconds
    tflops = samples_per_s * model.flops_per_sample / 1e12
    record.update(
        time_source="host" if timing.gpu_ms is None else "gpu",
        samples_per_s=samples_per_s,
        host_samples_per_s=timing.batch / (timing.host_ms.median / 1e3),
        tflops=tflops,
        fraction_of_fp16_peak=tflops / peak.fp16_dense_tflops if peak else None,
        fraction_of_bandwidth_bound=samples_per_s / peaks.bandwidth_bound_samples_per_s(
            model.io_bytes_per_sample, peak.memory_bandwidth_gbs) if peak else None,
        roofline=roofline.inference_work(model.graph, timing.batch).against(seconds * 1e3, bounds),
    )
    return record


class SuiteRun:
    """Runs the suite, advancing `progress` by one step per (model, runner, batch)."""

    def __init__(self, specs: list[RunnerSpec], settings: Settings, peak: peaks.DevicePeak | None, progress: Progress,
                 bounds: roofline.RooflinePeaks | None = None):
        self.specs = specs
        self.settings = settings
        self.peak = peak
        self.bounds = bounds
        self.progress = progress

    def model(self, model: BenchModel) -> list[dict]:
        small = model.feeds(self.settings.first_call_batch, self.settings.seed)
        reference = run_graph(model.graph, small)
        cached: dict[int, dict[str, np.ndarray]] = {}  # every runner of this model gets the same inputs

        def feeds_for(batch: int) -> dict[str, np.ndarray]:
            if batch not in cached:
                cached[batch] = model.feeds(batch, self.settings.seed)
            return cached[batch]

        weights = resolved_weights(model.graph, self.settings.weights)
        return [self.runner(model, spec, weights, small, reference, feeds_for) for spec in self.specs]

    def runner(self, model: BenchModel, spec: RunnerSpec, weights: str, small, reference, feeds_for) -> dict:
        record = {"model": model.name, "runner": spec.name, "kind": spec.kind,
                  "precision": spec.precision or f"{weights} weights", "status": "ok", "reason": "",
                  "first_call_ms": None, "max_abs_error": None, "max_abs_reference": None, "batches": []}
        why = spec.unavailable_reason()
        status = "unavailable"
        if why is None:
            why, status = spec.unsupported_reason(model, weights), "unsupported"
        if why is not None:
            record.update(status=status, reason=why)
            self.progress.advance(len(self.settings.batches), f"{model.name} {spec.name}: {status}")
            return record
        done = 0

        def on_batch(batch: int) -> None:
            nonlocal done
            done += 1
            self.progress.advance(1, f"{model.name} {spec.name} {batch}")

        runner = None
        try:
            with tempfile.TemporaryDirectory(prefix="coopnn-bench-cache-") as cache, pipeline_cache_at(Path(cache)):
                cold, cold_ms, _ = self._first_call(spec, model, weights, small)
                cold.close()
                runner, warm_ms, outputs = self._first_call(spec, model, weights, small)
            record["first_call_ms"] = {"cold": cold_ms, "warm": warm_ms}
            record["max_abs_error"], record["max_abs_reference"] = _max_abs(outputs, reference)
            timings = measure_batches(runner, list(self.settings.batches), feeds_for, self.settings.budget, on_batch)
            record["batches"] = [_throughput(t, model, self.peak, self.bounds) for t in timings]
        except Exception as e:  # a failing runner is a result to report; the rest of the suite still runs
            record.update(status="failed", reason=f"{type(e).__name__}: {e}")
            self.progress.note(f"{model.name} on {spec.name} failed: {record['reason']}")
            self.progress.advance(len(self.settings.batches) - done)
        finally:
            if runner is not None:
                runner.close()
        return record

    def _first_call(self, spec: RunnerSpec, model: BenchModel, weights: str, small) -> tuple[Runner, float, dict]:
        """Prepare (compile, pack, create pipelines) and one small run: the runner, the milliseconds, the outputs."""
        start = time.perf_counter()
        runner = spec.prepare(model, weights)
        try:
            _, _, outputs = timed_run(runner, small)
        except BaseException:
            runner.close()
            raise
        return runner, (time.perf_counter() - start) * 1e3, outputs


def resolved_weights(graph, weights: str) -> str:
    """The weight format the suite runs `graph` in: `weights`, or for "auto" the one `coopnn.load(backend="auto")`
    takes for it on this machine (so that a benchmark times what a user gets); InputError for an unknown name."""
    if weights != "auto":
        return weight_format(weights).name
    from coopnn.backends.auto_weights import choose_weights

    return choose_weights(graph, "auto", None).weights.name


def run_suite(model_paths: list[str | Path], specs: list[RunnerSpec], settings: Settings,
              label: str = "bench") -> dict:
    """Benchmark every runner in `specs` on every model; returns the results document (see bench/README.md)."""
    if settings.weights != "auto":
        weight_format(settings.weights)  # an unknown name is an InputError before anything is measured
    switches = disable_driver_shader_caches()
    env = environment.describe_environment()
    device = environment.device_name(env)
    peak = peaks.device_peak(device)
    bounds = roofline.peaks_for(device, roofline.measured_peaks() if settings.measure_peaks else None)
    models = [BenchModel.load(p) for p in model_paths]
    started = time.perf_counter()
    results = []
    with Progress(len(models) * len(specs) * len(settings.batches), label) as progress:
        suite = SuiteRun(specs, settings, peak, progress, bounds)
        for model in models:
            results += suite.model(model)
    document = {
        "schema": SCHEMA,
        "environment": {**env, "device": device, "driver": environment.driver(env), "driver_shader_caches": switches},
        "peaks": peaks.peak_record(device),
        "roofline_peaks": asdict(bounds) if bounds else None,
        "settings": {"batches": list(settings.batches), "weights": settings.weights, **asdict(settings.budget),
                     "first_call_batch": settings.first_call_batch, "seed": settings.seed,
                     "measure_peaks": settings.measure_peaks},
        "models": [_model_record(m, peak) for m in models],
        "runners": [spec.record() for spec in specs],
        "results": results,
        "seconds": time.perf_counter() - started,
    }
    document["comparisons"] = comparisons(document)
    return document


def _model_record(model: BenchModel, peak: peaks.DevicePeak | None) -> dict:
    record = model.record()
    record["bandwidth_bound_samples_per_s"] = (
        peaks.bandwidth_bound_samples_per_s(model.io_bytes_per_sample, peak.memory_bandwidth_gbs) if peak else None)
    record["compute_bound_samples_per_s"] = (
        peaks.compute_bound_samples_per_s(model.flops_per_sample, peak.fp16_dense_tflops) if peak else None)
    return record
