"""The `coopnn` command line: each subcommand is a function registered in COMMANDS with its argument setup.

User errors (a coopnn error, a missing or unreadable file) print one line and exit with status 1, no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from coopnn import cli_export
from coopnn.cli_arrays import OUTPUT_SUFFIXES, match_inputs, output_suffix, read_inputs
from coopnn.cli_format import HelpFormatter
from coopnn.disk_cache import write_atomic
from coopnn.cli_tl import TL_COMMAND
from coopnn.errors import CoopnnError, InputError
from coopnn.layouts.formats import format_names
from coopnn.layouts.formats.calibration import quantizing_format_names
from coopnn.tables import format_table

COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}
# `coopnn compile --workgroup-size` at most: the most invocations a work-group holds on the GPUs coopnn targets
# (maxComputeWorkGroupInvocations, 1024 on the H100); a kernel past a device's own limit is refused when it loads
MAX_WORKGROUP_SIZE = 1024


def command(name: str, help: str, setup: Callable[[argparse.ArgumentParser], None]):
    def register(fn: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = (help, setup, fn)
        return fn

    return register


def _info_setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="also say which backend and weights `coopnn.load(MODEL)` takes here, and "
                                            "why (its `backend_reason`)")


def _targets_on(info) -> list[str]:
    """The shader targets whose backends can run on the Vulkan device `info`: each backend's `unavailable_reason`
    asked with COOPNN_DEVICE naming the device, the way a user picks one."""
    import os

    from coopnn import backends
    from coopnn.runtime.vk.selection import DEVICE_ENV

    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = str(info.index)
    try:
        return [b.target.name for b in backends.all_backends()
                if b.target is not None and b.unavailable_reason() is None]
    finally:
        if previous is None:
            del os.environ[DEVICE_ENV]
        else:
            os.environ[DEVICE_ENV] = previous


@command("info", "version, backends, and the Vulkan devices with their cooperative-vector and -matrix support and "
                 "the targets each can take", _info_setup)
def cmd_info(args: argparse.Namespace) -> int:
    import coopnn

    print(f"coopnn {coopnn.__version__}")
    print("backends:")
    for status in coopnn.backends.statuses():
        state = "available" if status.available else f"unavailable: {status.reason}"
        print(f"  {status.name:10s} {state}")
    from coopnn.runtime.device_report import device_report

    print(device_report(_targets_on))
    if args.model is not None:
        _print_auto_choice(args.model)
    return 0


def _print_auto_choice(path: str) -> None:
    """What `backend="auto"` and `weights="auto"` take for the model at `path` here, with every reason."""
    import textwrap
    import warnings

    import coopnn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", coopnn.BackendNotice)  # the reasons are printed here in full
        with coopnn.load(path) as model:
            name, backend, weights, reason = model.graph.name, model.backend, model.weights, model.backend_reason
    print(f"{name}: backend {backend}, weights {weights}, because:")
    for part in reason.split("; "):
        print(textwrap.fill(part, 120, initial_indent="  ", subsequent_indent="    "))


def _model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an .onnx model")


def _inspect_setup(p: argparse.ArgumentParser) -> None:
    _model_arg(p)


@command("inspect", "a layer table of a model: op, shapes, parameters, activation", _inspect_setup)
def cmd_inspect(args: argparse.Namespace) -> int:
    from coopnn.graph.onnx.importer import import_model
    from coopnn.graph.passes import optimize
    from coopnn.graph.summary import layer_table

    graph = optimize(import_model(args.model))
    rows = layer_table(graph)
    print(f"model {graph.name!r}, opset {graph.opset}")
    for v in graph.inputs:
        print(f"  input  {v.name}: [batch, {', '.join(map(str, v.features))}]")
    for v in graph.outputs:
        print(f"  output {v.name}: [batch, {', '.join(map(str, v.features))}]")
    print(format_table(["node", "op", "input shapes", "output shape", "params", "activation"],
                       [[r.name, r.op, r.inputs, r.output, str(r.parameters), r.activation] for r in rows]))
    print(f"{graph.parameter_count()} parameters in all")
    return 0


def _calibration_arg(p: argparse.ArgumentParser, used_by: str) -> None:
    p.add_argument("--calibration", default=None,
                   help=f"representative inputs (.npy for one input, .npz keyed by input name, or FILE.npz:NAME) "
                        f"{used_by}")


def _calibration(args: argparse.Namespace):
    """The arrays of --calibration (a one-array .npz as that array), or None; an InputError when --weights names a
    format that quantizes inputs and no --calibration is given."""
    if args.calibration is None:
        if args.weights is not None and args.weights in quantizing_format_names():
            raise InputError(f"--weights {args.weights} quantizes each Linear's input with a scale measured on "
                             "calibration data: give --calibration FILE (.npy for one input, .npz keyed by input "
                             "name) holding a few thousand representative inputs")
        return None
    arrays = read_inputs(args.calibration)
    if isinstance(arrays, dict) and len(arrays) == 1:
        return next(iter(arrays.values()))
    return arrays


def _run_setup(p: argparse.ArgumentParser) -> None:
    _model_arg(p)
    p.add_argument("--input", "-i", required=True,
                   help=".npy (one input), .npz keyed by input name, or FILE.npz:NAME (its array NAME, one input)")
    p.add_argument("--output", "-o", required=True,
                   help=f"{', '.join(OUTPUT_SUFFIXES)}: .npz keyed by output name, the others for one output "
                        "(.txt and .csv for one row per sample); written exactly there")
    _placement_args(p)
    _calibration_arg(p, "from which --weights int8 measures each Linear's input scale, and on which --weights auto "
                        "compares float16 with float32")


def _placement_args(p: argparse.ArgumentParser) -> None:
    """--backend, --weights and --device, as `coopnn.load` takes them."""
    from coopnn import backends

    p.add_argument("--backend", "-b", default="auto", choices=["auto", *backends.names()],
                   help="backend (see `coopnn info`); auto takes the first that can run the model")
    p.add_argument("--weights", default="auto", choices=["auto", *format_names()],
                   help="weight format; auto takes float16 where accurate on a cooperative-vector GPU")
    p.add_argument("--device", default=None,
                   help="Vulkan device index or name substring (default: COOPNN_DEVICE, else the preferred device); "
                        "one that matches no device is an error")


@command("run", "run a model on inputs from .npy/.npz and write the outputs; an .npy input of any size is streamed "
                "through the model in chunks, with a progress bar on stderr", _run_setup)
def cmd_run(args: argparse.Namespace) -> int:
    import coopnn
    from coopnn.cli_stream import run_in_chunks

    output_suffix(args.output)  # the files checked before the model is loaded
    arrays = read_inputs(args.input, mapped=True)
    calibration = _calibration(args)
    with coopnn.load(args.model, backend=args.backend, weights=args.weights, device=args.device,
                     calibration=calibration) as model:
        feeds = model.named_inputs(match_inputs(arrays, [t.name for t in model.inputs], args.input))
        run_in_chunks(model, feeds, args.output)
        print(f"wrote {args.output} ({model.backend})")
    return 0


def _kernels_setup(p: argparse.ArgumentParser) -> None:
    _model_arg(p)
    _placement_args(p)
    p.add_argument("--train", action="store_true",
                   help="the kernels of a training step (L2 loss, Adam) instead of the inference kernel")


@command("kernels", "what the device's driver made of a model's kernels, for inference or a training step: "
                    "registers, spilled bytes, workgroup memory... as the driver reports them "
                    "(VK_KHR_pipeline_executable_properties)",
         _kernels_setup)
def cmd_kernels(args: argparse.Namespace) -> int:
    import coopnn
    from coopnn.runtime.kernel_statistics import statistics_table

    with coopnn.load(args.model, backend=args.backend, weights=args.weights, device=args.device) as model:
        statistics = coopnn.Trainer(model).kernel_statistics() if args.train else model.kernel_statistics()
        what = "training step" if args.train else "inference"
        print(f"{model.graph.name}, {what} on {model.backend} ({model.weight_format.name} weights):")
    print(statistics_table(statistics), end="")
    return 0


def _compile_setup(p: argparse.ArgumentParser) -> None:
    from coopnn import backends

    _model_arg(p)
    p.add_argument("--target", "-t", default="portable", choices=backends.target_names(), help="shader target")
    p.add_argument("--emit", "-e", default="spirv", choices=["spirv", "spvasm", "tl"],
                   help="SPIR-V binary, SPIR-V assembly, or the kernel program in the tensor language")
    p.add_argument("--weights", default=None, choices=format_names(),
                   help="weight format (default: the target's own: portable fp32, coopvec fp16)")
    _calibration_arg(p, "from which --weights int8 measures each Linear's input scale")
    p.add_argument("--decode-vector", action="store_true",
                   help="coopmat2 with --weights q8_0/q4_0: name a DecodeVectorFunc on each weight load as well "
                        "(SPV_NV_cooperative_matrix_decode_vector), for inspection where the device lacks it")
    p.add_argument("--workgroup-size", type=_workgroup_size, default=None, metavar="N",
                   help="samples per work-group (default: the target's own: 128 on coopmat2, 64 on the others); "
                        "a device runs the kernel only within its work-group limits (`coopnn info`)")
    p.add_argument("--output", "-o", required=True, help="file to write")


def _workgroup_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WORKGROUP_SIZE:
        raise argparse.ArgumentTypeError(f"expected a whole number of samples from 1 to {MAX_WORKGROUP_SIZE}, "
                                         f"not {text!r}")
    return value


@command("compile", "compile a model to SPIR-V (or its assembly, or the kernel program text)", _compile_setup)
def cmd_compile(args: argparse.Namespace) -> int:
    import coopnn

    program = coopnn.compile(args.model, target=args.target, weights=args.weights, calibration=_calibration(args),
                             decode_vector=args.decode_vector, workgroup_size=args.workgroup_size)
    emitted = {"spirv": lambda: program.spirv, "spvasm": lambda: program.spvasm().encode(),
               "tl": lambda: program.text.encode()}[args.emit]()
    try:
        write_atomic(Path(args.output), emitted, make_folder=False)
    except OSError as e:
        raise CoopnnError(f"cannot write {args.output!r}: {e.strerror or e}") from None
    print(f"wrote {args.output} ({len(emitted)} bytes, target {args.target}, entry point {program.entry_point}, "
          f"{len(program.bindings)} bindings)")
    return 0


def _batch_list(text: str) -> tuple[int, ...]:
    from coopnn.bench.suite import parse_batches

    try:
        return parse_batches(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e} (expected e.g. 16384,262144 or 2^14,2^18)") from None


def _bench_setup(p: argparse.ArgumentParser) -> None:
    from coopnn import backends
    from coopnn.bench.measure import Budget
    from coopnn.bench.runners import REFERENCE_ORDER
    from coopnn.bench.suite import DEFAULT_BATCHES

    budget = Budget()
    _model_arg(p)
    # lists separated by commas: argparse's choices= cannot check them, so the help names what they may hold
    p.add_argument("--backend", "-b", default="all",
                   help=f"coopnn backends: all, none, or names separated by commas ({', '.join(backends.names())})")
    p.add_argument("--baseline", default="none",
                   help=f"baselines run alongside: none, all, or names separated by commas "
                        f"({', '.join(REFERENCE_ORDER)})")
    p.add_argument("--batch", type=_batch_list, default=",".join(map(str, DEFAULT_BATCHES)),
                   help="batch sizes, e.g. 16384,262144 or 2^14,2^18")
    # a known format a backend or baseline cannot run is reported in the results, not refused
    p.add_argument("--weights", default="auto", choices=["auto", *format_names()],
                   help="coopnn weight format; auto resolves per model as `coopnn.load` does on this machine "
                        "(float16 where a float16 backend runs here and keeps the outputs accurate, else float32)")
    p.add_argument("--runs", type=int, default=budget.runs, help="timed runs per batch")
    p.add_argument("--warmup", type=int, default=budget.warmup, help="warm-up runs")
    p.add_argument("--budget", type=float, default=budget.seconds_per_batch,
                   help=f"seconds of timed runs per batch before runs are cut, to at least {budget.min_runs}")
    p.add_argument("--max-run", type=float, default=budget.max_run_seconds,
                   help="skip batches whose single run would take longer than this many seconds")
    p.add_argument("--json", help="also write the results document to this JSON file")


@command("bench", "time a model on every backend: GPU and host time, samples/s, TFLOP/s, first call", _bench_setup)
def cmd_bench(args: argparse.Namespace) -> int:
    from coopnn.bench.caches import disable_driver_shader_caches
    from coopnn.bench.measure import Budget
    from coopnn.bench.report import save, text_report
    from coopnn.bench.runners import select_runners
    from coopnn.bench.suite import Settings, run_suite

    disable_driver_shader_caches()  # before anything loads a Vulkan driver, which reads them once
    runs = max(args.runs, 1)
    budget = Budget(runs=runs, warmup=args.warmup, min_runs=min(Budget().min_runs, runs),
                    seconds_per_batch=args.budget, max_run_seconds=args.max_run)
    specs = select_runners(args.backend, args.baseline)
    if not specs:
        raise CoopnnError("nothing to benchmark: --backend and --baseline select no runner")
    document = run_suite([args.model], specs, Settings(batches=args.batch, weights=args.weights, budget=budget))
    print(text_report(document))
    if args.json:
        save(document, args.json)
        print(f"wrote {args.json}")
    return 0


def _fit_image_setup(p: argparse.ArgumentParser) -> None:
    from coopnn.examples.fit_image import add_arguments

    add_arguments(p)


@command("fit-image", "learn an image with an encoding (frequency, hashgrid, a tcnn config) and an MLP; write PNGs and "
         "a PSNR plot",
         _fit_image_setup)
def cmd_fit_image(args: argparse.Namespace) -> int:
    from coopnn.examples.fit_image import run

    return run(args)


command("export-shader", cli_export.HELP, cli_export.setup)(cli_export.run)
COMMANDS["tl"] = TL_COMMAND


def build_parser() -> argparse.ArgumentParser:
    from coopnn import __version__

    parser = argparse.ArgumentParser(prog="coopnn", description="Run and train neural-shading MLPs on Vulkan.")
    parser.add_argument("--version", action="version", version=f"coopnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help, setup, fn) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
        setup(p)
        p.set_defaults(func=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CoopnnError as e:
        print(f"coopnn: error: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        print(f"coopnn: error: {e.strerror}: {e.filename}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("coopnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
