"""The coopvec training step's kernels compiled with other knobs (`coopnn.shaders.training.tuning.Tuning`), each
timed alone on one session's buffers (bench/train_variants.py runs it on the GPU machine).

For each model, one session with the default tuning; for each batch its data is written once. Every variant's tiled
step kernel and cooperative-matrix products are built in worker processes (SPIR-V is built in Python, and a sweep
builds many), loaded on the session's device and dispatched on the session's tape, inputs and state, the products
into a partials buffer of their own. Variants are timed round-robin, one submission each in turn, so a clock change
hits them all alike: the step kernel alone (forward, loss, backward, the tape written), the products alone (the tape
read, the partial gradients written), and a whole step but the optimizer's update (those two, the loss tiles, the
partial gradients summed: the optimizer's update would move the weights every variant is checked on, and its
parameters' bytes are a few MB). Each variant is checked against the default first: the same per-sample losses from its step kernel, the
same gradient from its products on its own tape (summed by the session's partial-sum kernel); a variant that fails
to build, to run or to match is reported with why, and the sweep goes on.

Bytes counted are those a kernel moves as it lays them out: the step kernel reads the float32 inputs and targets,
writes the per-sample loss and the float16 tape (padded widths); the products read the tape and write the partials.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import statistics
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from coopnn.bench.training_variants_report import line, summary, write
from coopnn.shaders.training.tuning import DEFAULT, Tuning

MODELS = ("mlp_32_64x4_16", "mlp_64_128x4_16", "mlp_3_64x2_3")  # the target model first
ROUNDS = 10
WARMUP_SECONDS = 1.0
STEP_KNOBS = ("step_samples", "step_invocations", "in_place", "step_row_groups", "lean_barrier", "deltas")
GRADIENT_KNOBS = ("deltas", "row_tiles", "column_tiles", "chunk_tiles", "target_subgroups", "staged",
                  "gradient_subgroups")
GRADIENT_RTOL = 1e-3  # float32 sums in another order, of the same float16 products


def variants() -> list[Tuning]:
    """The default, then each group of knobs varied against the defaults of the others."""
    found = [DEFAULT]
    found += [Tuning(step_samples=samples, step_invocations=invocations, in_place=in_place)
              for samples, invocations, in_place in ((32, 128, None), (32, 256, None), (32, 256, False),
                                                     (64, 256, None), (64, 128, False), (128, 128, None),
                                                     (128, 256, None), (128, 256, False))]
    found += [Tuning(step_samples=samples, step_invocations=invocations, step_row_groups=True)
              for samples, invocations in ((32, 256), (64, 256), (64, 512), (128, 256), (128, 512))]
    found += [Tuning(lean_barrier=True), Tuning(step_invocations=256, step_row_groups=True, lean_barrier=True)]
    found.append(Tuning(deltas="features"))
    found += [Tuning(gradient_subgroups=s, chunk_tiles=c) for s, c in ((2, None), (4, None), (8, None), (4, 16),
                                                                        (4, 32), (4, 64), (1, 32), (1, 64), (8, 32))]
    found += [Tuning(gradient_subgroups=s, target_subgroups=3072) for s in (1, 4)]
    found += [Tuning(row_tiles=r, column_tiles=c, gradient_subgroups=s) for r, c in ((1, 4), (4, 4), (8, 4), (2, 2),
                                                                                      (4, 2)) for s in (1, 4)]
    found += [Tuning(row_tiles=4, column_tiles=4, gradient_subgroups=s) for s in (2, 8)]
    found += [Tuning(row_tiles=4, column_tiles=4, gradient_subgroups=4, **knob)
              for knob in ({"staged": True}, {"staged": False}, {"chunk_tiles": 64}, {"target_subgroups": 3072})]
    found += [Tuning(staged=staged, gradient_subgroups=s) for staged in (True, False) for s in (1, 4)]
    unique = []
    for tuning in found:
        if tuning not in unique:
            unique.append(tuning)
    return unique


def step_key(tuning: Tuning) -> tuple:
    return tuple(getattr(tuning, k) for k in STEP_KNOBS)


def gradient_key(tuning: Tuning) -> tuple:
    return tuple(getattr(tuning, k) for k in GRADIENT_KNOBS)


# ----- building (in worker processes) ---------------------------------------------------------------------------


def _pieces(model_path: str, deltas: str):
    """(plan, loss, layout, tape, program) as a default coopvec session with the tiled step lays them out, deltas
    kept `deltas`."""
    import coopnn
    from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
    from coopnn.train.gpu.plan import plan_training
    from coopnn.train.gpu.step_program import step_program
    from coopnn.train.gpu.tiling import padded
    from coopnn.train.losses import get_loss

    graph = coopnn.load(model_path, backend="numpy").graph
    plan, loss = plan_training(graph), get_loss("l2")
    layout = ParameterLayout.of([(p.weight, p.bias, padded(p.rows), padded(p.cols)) for p in plan.layers])
    tape = TapeLayout(layout.layers, deltas)
    return plan, loss, layout, tape, step_program(plan, loss, tape, layout=layout)


def build(kind: str, model_path: str, tuning: Tuning, deltas: str, device: tuple[int, int, int]):
    """The SPIR-V binary of the `kind` ("step" or "gradients") kernel of `tuning`, or the error it raised (as text);
    `device`: (workgroup memory, largest subgroup, smallest subgroup)."""
    from coopnn.backends.coopvec.tiled_step import tiled_step_shader
    from coopnn.shaders.training.coopmat_gradients import coopmat_gradient_shader

    try:
        plan, loss, layout, tape, program = _pieces(model_path, deltas)
        if kind == "step":
            return tiled_step_shader(program, plan, loss, layout, tape, *device, tuning=tuning)
        return coopmat_gradient_shader(layout, tape, tuning)
    except Exception as error:  # reported as the variant's status; the sweep goes on
        return f"{type(error).__name__}: {error}"


def build_all(model_path: str, tunings: list[Tuning], default_deltas: str, device) -> tuple[dict, dict]:
    """({step_key: binary or error}, {gradient_key: ...}) for every distinct kernel the tunings need, built in a
    pool of worker processes."""
    jobs = {}
    for tuning in tunings:
        deltas = tuning.deltas or default_deltas
        jobs.setdefault(("step", step_key(tuning)), ("step", model_path, tuning, deltas, device))
        jobs.setdefault(("gradients", gradient_key(tuning)), ("gradients", model_path, tuning, deltas, device))
    workers = max(1, min(len(jobs), (os.cpu_count() or 2) - 1))
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {key: pool.submit(build, *job) for key, job in jobs.items()}
            built = {key: future.result() for key, future in futures.items()}
    except (OSError, RuntimeError, concurrent.futures.process.BrokenProcessPool):
        traceback.print_exc()
        built = {key: build(*job) for key, job in jobs.items()}  # without workers, one after the other
    return ({k[1]: v for k, v in built.items() if k[0] == "step"},
            {k[1]: v for k, v in built.items() if k[0] == "gradients"})


# ----- measuring ------------------------------------------------------------------------------------------------


class Variant:
    """One tuning's kernels loaded on the session's device and its dispatches for one batch."""

    def __init__(self, tuning: Tuning, step, gradients, session, partials, kernels: dict):
        self.tuning, self.session, self.partials, self.chunks = tuning, session, partials, 0
        self.step_binary, self.gradient_binary = step, gradients
        self.step_kernel = _loaded(kernels, session, step)
        self.gradient_kernel = _loaded(kernels, session, gradients)

    def dispatches(self, batch: int, count: int) -> dict:
        """{"step": [...], "products": [...], "whole": [...]} for the batch in the session's inputs; and the chunks."""
        from coopnn.backends.coopvec.gradient_methods.coopmat import product_dispatches
        from coopnn.runtime.vk.commands import Dispatch

        s = self.session
        push = self.step_binary.pack_push(count=count, batch=batch, capacity=s.capacity, rows=batch, seed=0, whole=1)
        step = [Dispatch(self.step_kernel, s._buffers(None), push, self.step_kernel.group_count_for(count))]
        products, chunks = product_dispatches(s, self.gradient_binary, self.gradient_kernel, self.tuning, count,
                                              self.partials)
        loss_tiles = s.gradient_commands(batch)[0][0]
        self.chunks = chunks
        return {"step": step, "products": products, "whole": step + [loss_tiles] + products + [self.summed()]}

    def summed(self):
        """The session's partial-sum kernel over the variant's partials: what the optimizer reads of them, without
        its update (which would move the weights the variants are checked on)."""
        total = self.session.partial_sum_dispatch(self.chunks)
        return replace(total, buffers=(self.partials, *total.buffers[1:]))

    def summed_gradient(self, batch: int, count: int) -> np.ndarray:
        """The gradient its products leave, summed by the session's partial-sum kernel from its partials."""
        s = self.session
        s.context.run(self.dispatches(batch, count)["whole"] + [s.fill_zero(s.state, size=4)], downloads={})
        return s.gradient.download(np.float32, s.layout.layers_size)

    def losses(self, batch: int, count: int) -> np.ndarray:
        s = self.session
        loss_buffer, downloads = s._losses(batch)
        s.context.run(self.dispatches(batch, count)["step"], downloads)
        return loss_buffer.read(np.float32, batch).copy()


def driver_statistics(binaries, log=print) -> dict:
    """SPIR-V -> the driver's statistics of that kernel (`coopnn.runtime.kernel_statistics`: registers, spills,
    workgroup memory), for every built binary; {} where the device reports none."""
    from coopnn.runtime.kernel_statistics import kernel_statistics

    unique = {b.spirv: b for b in binaries if not isinstance(b, str)}
    try:
        found = kernel_statistics({str(i): b for i, b in enumerate(unique.values())})
    except Exception as error:  # statistics explain the times; the sweep goes on without them
        log(f"no kernel statistics: {type(error).__name__}: {error}")
        return {}
    return {spirv: kernel.values() for spirv, kernel in zip(unique, found)}


def _loaded(kernels: dict, session, binary):
    """`binary` loaded on the session's device, once for every variant that shares it."""
    from coopnn.runtime.executable import load_kernel

    if binary.spirv not in kernels:
        kernels[binary.spirv] = load_kernel(session.context, binary, f"{session.plan.graph.name} {binary.name}")
    return kernels[binary.spirv]


def kernel_bytes(session, batch: int, chunks: int) -> dict:
    """Bytes each kernel moves as laid out: {"step": ..., "products": ...}."""
    plan = session.plan
    tape = batch * session.tape.width * 2
    data = batch * (plan.layers[0].cols + plan.out_features + 1) * 4  # inputs and targets read, the loss written
    return {"step": data + tape, "products": tape + chunks * session.layout.size * 4}


def time_round_robin(context, runs: dict, rounds: int) -> dict:
    """Median GPU ms of each key's commands, submitted in turn `rounds` times after one untimed round."""
    times = {key: [] for key in runs}
    for index in range(rounds + 1):
        for key, commands in runs.items():
            ms = context.run(commands, downloads={})
            if index and ms is not None:
                times[key].append(ms)
    return {key: statistics.median(t) if t else None for key, t in times.items()}


def _session(model_path: str):
    import coopnn
    from coopnn.backends.coopvec.training import CoopvecTrainingSession
    from coopnn.train.losses import get_loss
    from coopnn.train.optim import Adam

    graph = coopnn.load(model_path, backend="numpy").graph
    return CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, tuning=DEFAULT)


def _partials_for(session, tunings, capacity: int):
    """One partials buffer large enough for every tuning's chunks at `capacity`."""
    from coopnn.runtime.vk.memory import HostAccess
    from coopnn.shaders.training.coopmat_blocks import most_chunks

    chunks = max(most_chunks(session.layout, capacity, t) for t in tunings)
    return session.context.create_buffer(chunks * session.layout.size * 4, HostAccess.NONE)


def measure_model(model_path: Path, log2_batches, tunings, rounds: int = ROUNDS, log=print) -> list[dict]:
    """Rows for every (batch, tuning) of one model, then for the tuning `combined` makes of them (where it is not
    one of them)."""
    from coopnn.bench.environment import describe_environment, device_name
    from coopnn.bench.roofline import peaks_for

    session = _session(str(model_path))
    bounds = peaks_for(device_name(describe_environment()))
    try:
        batches = sorted((1 << b for b in log2_batches), reverse=True)
        rng = np.random.default_rng(0)
        graph = session.plan.graph
        x = rng.uniform(-1, 1, (batches[0], graph.inputs[0].shape[1])).astype(np.float32)
        y = rng.uniform(0, 1, (batches[0], graph.outputs[0].shape[1])).astype(np.float32)
        session.step({graph.inputs[0].name: x}, {session.plan.output: y})  # the capacity of the largest batch
        sweep = lambda tried: _sweep(session, model_path, tried, x, y, batches, rounds, bounds, log)  # noqa: E731
        rows = sweep(tunings)
        best = combined([r for r in rows if r["batch"] == batches[0]])
        if best is not None and best not in tunings:
            log(f"{model_path.stem}: the best of each kernel together: {best.describe()}")
            rows += [{**r, "combined": True} for r in sweep([DEFAULT, best]) if r["variant"] != "default"]
    finally:
        session.close()
    return rows


def _sweep(session, model_path: Path, tunings, x, y, batches, rounds: int, bounds, log) -> list[dict]:
    """Build, load and measure `tunings` on the session at every batch (largest first)."""
    limits, subgroup = session.context.info.limits, session.context.info.subgroup
    device = (limits.max_compute_shared_memory_size, subgroup.max_size or subgroup.size,
              subgroup.min_size or subgroup.size)
    started = time.perf_counter()
    steps, gradients = build_all(str(model_path), tunings, session.tape.deltas, device)
    log(f"{model_path.stem}: built {len(steps)} step and {len(gradients)} gradient kernels in "
        f"{time.perf_counter() - started:.1f} s")
    default_step, default_gradients = steps[step_key(DEFAULT)], gradients[gradient_key(DEFAULT)]
    same = (default_step.spirv == session.binary.spirv, default_gradients.spirv == session.gradient_shaders[0].spirv)
    if not all(same):
        raise RuntimeError(f"the sweep's default kernels differ from the session's (step, gradients): {same}")
    partials = _partials_for(session, tunings, session.capacity)
    rows, loaded, kernels = [], {}, {}
    try:
        for tuning in tunings:
            step, grad = steps[step_key(tuning)], gradients[gradient_key(tuning)]
            failed = next((b for b in (step, grad) if isinstance(b, str)), None)
            if failed is None:
                try:
                    loaded[tuning] = Variant(tuning, step, grad, session, partials, kernels)
                except Exception as error:
                    failed = f"{type(error).__name__}: {error}"
            if failed is not None:
                rows += [{"model": model_path.stem, "batch": b, "tuning": asdict(tuning), "variant": tuning.describe(),
                          "status": failed} for b in batches]
        for batch in batches:
            rows += measure_batch(session, loaded, x[:batch], y[:batch], rounds, bounds, model_path.stem, log)
    finally:
        partials.destroy()
    statistics = driver_statistics(_notable(rows, loaded), log)
    for row in rows:
        variant = loaded.get(Tuning(**row["tuning"]))
        if variant is not None:
            row["step_statistics"] = statistics.get(variant.step_binary.spirv, {})
            row["products_statistics"] = statistics.get(variant.gradient_binary.spirv, {})
    return rows


def _notable(rows: list[dict], loaded: dict) -> list:
    """The binaries worth the driver's statistics (each a pipeline compiled once more): the default's and the
    fastest step kernel's and products' at each batch."""
    measured = [r for r in rows if r.get("whole_ms") and r["status"] == "measured"]
    chosen = [Tuning(**r["tuning"]) for batch in {r["batch"] for r in measured}
              for key in ("step_ms", "products_ms") for r in [min((r for r in measured if r["batch"] == batch),
                                                                  key=lambda r: r[key])]]
    return [b for t in (DEFAULT, *chosen) if t in loaded for b in (loaded[t].step_binary, loaded[t].gradient_binary)]


def combined(rows: list[dict]) -> Tuning | None:
    """The tiling of the fastest step kernel among the variants of step knobs alone, the knobs of the fastest
    rest of a step (products, partial sums) among the variants of gradient knobs alone, and the delta layout of the
    fastest whole step among the default and the layouts; None where a part has no measured row."""
    measured = [(Tuning(**r["tuning"]), r) for r in rows if r.get("whole_ms") and r["status"] == "measured"]

    def only(knobs):
        return [(t, r) for t, r in measured
                if all(getattr(t, k) == getattr(DEFAULT, k) for k in (*STEP_KNOBS, *GRADIENT_KNOBS) if k not in knobs)]

    steps = only([k for k in STEP_KNOBS if k != "deltas"])
    rests = only([k for k in GRADIENT_KNOBS if k != "deltas"])
    layouts = only(["deltas"])
    if not (steps and rests and layouts):
        return None
    step = min(steps, key=lambda tr: tr[1]["step_ms"])[0]
    rest = min(rests, key=lambda tr: tr[1]["whole_ms"] - tr[1]["step_ms"])[0]
    deltas = min(layouts, key=lambda tr: tr[1]["whole_ms"])[0].deltas
    knobs = {k: getattr(step, k) for k in STEP_KNOBS} | {k: getattr(rest, k) for k in GRADIENT_KNOBS}
    return Tuning(**{**knobs, "deltas": deltas})


def measure_batch(session, loaded: dict, x, y, rounds: int, bounds, model: str, log) -> list[dict]:
    from coopnn.bench.roofline import KernelWork, training_work

    batch = x.shape[0]
    feeds, targets = {session.plan.graph.inputs[0].name: x}, {session.plan.output: y}
    for _ in range(3):
        session.step(feeds, targets)
    count, _ = session._write_batch(feeds, targets, batch)
    reference = loaded.get(DEFAULT)
    expected_losses = reference.losses(batch, count) if reference else None
    expected = reference.summed_gradient(batch, count) if reference else None
    runs, rows, checked = {}, [], {}
    for tuning, variant in loaded.items():
        try:
            commands = variant.dispatches(batch, count)
            status = "measured"
            if reference is not None and tuning != DEFAULT:
                status = _check(variant, batch, count, expected_losses, expected)
            checked[tuning] = status
            runs.update({(tuning, part): cmds for part, cmds in commands.items()})
        except Exception as error:
            checked[tuning] = f"{type(error).__name__}: {error}"
            log(traceback.format_exc())
    started = time.perf_counter()
    while reference is not None and time.perf_counter() - started < WARMUP_SECONDS:
        session.context.run(reference.dispatches(batch, count)["whole"], downloads={})
    medians = time_round_robin(session.context, runs, rounds)
    session.context.run([session.fill_zero(session.state, size=4)])  # a variant that failed its check may flag it
    whole_default = medians.get((DEFAULT, "whole"))
    for tuning, status in checked.items():
        variant = loaded[tuning]
        row = {"model": model, "batch": batch, "tuning": asdict(tuning), "variant": tuning.describe(),
               "status": status}
        if (tuning, "whole") in medians:
            moved = kernel_bytes(session, batch, variant.chunks)
            step_ms, products_ms, whole_ms = (medians[(tuning, p)] for p in ("step", "products", "whole"))
            row.update(chunks=variant.chunks, step_ms=step_ms, products_ms=products_ms, whole_ms=whole_ms,
                       step=KernelWork(moved["step"], 0).against(step_ms, bounds),
                       products=KernelWork(moved["products"], 0).against(products_ms, bounds),
                       roofline=training_work(session.plan.graph, batch).against(whole_ms, bounds),
                       speedup=(whole_default / whole_ms) if whole_default and whole_ms else None)
        rows.append(row)
        log(line(row))
    return rows


def _check(variant, batch: int, count: int, expected_losses, expected) -> str:
    """"measured", or how the variant's losses or gradient differ from the default's."""
    losses = variant.losses(batch, count)
    if not np.allclose(losses, expected_losses, rtol=1e-3, atol=1e-6):
        return f"losses differ (max {np.max(np.abs(losses - expected_losses)):.3g})"
    got = variant.summed_gradient(batch, count)
    scale = float(np.max(np.abs(expected))) or 1.0
    error = float(np.max(np.abs(got - expected))) / scale
    return "measured" if error <= GRADIENT_RTOL else f"gradient differs ({error:.3g} of its largest element)"


def measure(model_paths, log2_batches, tunings=None, rounds: int = ROUNDS, log=print, out: Path | None = None,
            budget: float | None = None) -> dict:
    """Every model's rows; with `out`, the results so far are written there after each model (a sweep cut short
    keeps what it measured); no model starts once `budget` seconds have passed."""
    from coopnn.bench.environment import describe_environment

    tunings = variants() if tunings is None else tunings
    document = {"schema": "coopnn-train-variants/1", "environment": describe_environment(), "rows": []}
    started = time.perf_counter()
    for path in model_paths:
        if budget is not None and time.perf_counter() - started > budget:
            document["rows"].append({"model": Path(path).stem, "status": f"not measured: the sweep's {budget:.0f} s "
                                                                         f"had passed"})
            continue
        try:
            document["rows"] += measure_model(Path(path), log2_batches, tunings, rounds, log)
        except Exception as error:
            log(traceback.format_exc())
            document["rows"].append({"model": Path(path).stem, "status": f"{type(error).__name__}: {error}"})
        if out is not None:
            write(document, out)
        log(summary(document["rows"], Path(path).stem))
    return document
