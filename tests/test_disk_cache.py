"""The on-disk caches' shared module: where caches live, damaged entries read as misses, concurrent writers of one
entry never show a reader part of a file, and a cache folder that cannot be written."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from coopnn.disk_cache import (CACHE_DIR_ENV, HEADER, TEMPORARY_PREFIX, CacheFolder, CacheWarning, EntryFormat,
                               cache_dir, read_file, write_atomic)
from coopnn.layouts.pack import Entry, WeightImage
from coopnn.layouts.weight_cache import WeightImageCache

FORMAT = EntryFormat(b"COOPNNTS", 3)
# Sizes from one byte to several pages, so that a torn write would show as a short or mixed payload.
PAYLOADS = [bytes([i]) * size for i, size in enumerate((1, 4096, 65537, 300_000))]


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("weights") == tmp_path / "mine" / "weights"
    monkeypatch.delenv(CACHE_DIR_ENV)
    assert cache_dir("weights") == tmp_path / "xdg" / "coopnn" / "weights"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir("pipelines") == tmp_path / "home" / ".cache" / "coopnn" / "pipelines"


def test_an_entry_round_trips(tmp_path):
    path = tmp_path / "a" / "b" / "entry.bin"
    assert read_file(path) is None
    write_atomic(path, FORMAT.pack(b"payload"))
    assert FORMAT.unpack(read_file(path)) == b"payload"
    assert FORMAT.unpack(FORMAT.pack(b"")) == b""
    assert [p.name for p in path.parent.iterdir()] == ["entry.bin"]


@pytest.mark.parametrize("damage", ["empty", "short_header", "truncated_payload", "flipped_payload_byte",
                                    "flipped_digest_byte", "appended_byte", "other_magic", "other_version"])
def test_a_damaged_entry_is_a_miss(damage):
    raw = FORMAT.pack(b"some payload bytes")
    damaged = {
        "empty": b"",
        "short_header": raw[:HEADER.size - 1],
        "truncated_payload": raw[:-1],
        "flipped_payload_byte": raw[:-1] + bytes([raw[-1] ^ 1]),
        "flipped_digest_byte": raw[:HEADER.size - 1] + bytes([raw[HEADER.size - 1] ^ 1]) + raw[HEADER.size:],
        "appended_byte": raw + b"\0",
        "other_magic": EntryFormat(b"COOPNNXX", FORMAT.version).pack(b"some payload bytes"),
        "other_version": EntryFormat(FORMAT.magic, FORMAT.version + 1).pack(b"some payload bytes"),
    }[damage]
    assert FORMAT.unpack(damaged) is None


def _read_until(path: Path, done: threading.Event) -> list[bytes | None]:
    """Every payload read from `path` until `done` is set (None for a file that is no whole entry)."""
    seen = []
    while not done.is_set():
        seen.append(FORMAT.unpack(read_file(path)))
    return seen


def test_writer_threads_of_one_entry_never_show_a_torn_file(tmp_path):
    path = tmp_path / "entry.bin"
    write_atomic(path, FORMAT.pack(PAYLOADS[0]))
    done = threading.Event()

    def write(payload: bytes) -> None:
        for _ in range(100):
            write_atomic(path, FORMAT.pack(payload))

    writers = [threading.Thread(target=write, args=(p,)) for p in PAYLOADS]
    reads: list[list[bytes | None]] = []
    readers = [threading.Thread(target=lambda: reads.append(_read_until(path, done))) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in readers:
        thread.join()
    seen = [payload for batch in reads for payload in batch]
    assert seen and all(payload in PAYLOADS for payload in seen)
    assert FORMAT.unpack(read_file(path)) in PAYLOADS
    assert [p.name for p in tmp_path.iterdir()] == ["entry.bin"]


_WRITER = """
import sys
from pathlib import Path
from coopnn.disk_cache import EntryFormat, write_atomic
payload = EntryFormat(b"COOPNNTS", 3).pack(bytes([int(sys.argv[2])]) * int(sys.argv[3]))
for _ in range(200):
    write_atomic(Path(sys.argv[1]), payload)
"""


def test_writer_processes_of_one_entry_never_show_a_torn_file(tmp_path):
    path = tmp_path / "entry.bin"
    write_atomic(path, FORMAT.pack(PAYLOADS[0]))
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(i), str(len(p))])
               for i, p in enumerate(PAYLOADS)]
    seen = []
    while any(w.poll() is None for w in writers):
        seen.append(FORMAT.unpack(read_file(path)))
    assert [w.returncode for w in writers] == [0] * len(PAYLOADS)
    assert seen and all(payload in PAYLOADS for payload in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["entry.bin"]


def test_a_failed_write_keeps_the_old_entry_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "entry.bin"
    write_atomic(path, FORMAT.pack(b"old"))

    def refuse(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr("coopnn.disk_cache.os.replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, FORMAT.pack(b"new"))
    assert FORMAT.unpack(read_file(path)) == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.bin"]


def _image(fill: int) -> WeightImage:
    data = bytes([fill]) * 20_000
    return WeightImage(data, {"w": Entry("w", 0, len(data), (100, 100), "row_major", "fp16", 200)})


def test_weight_cache_readers_see_whole_images_while_threads_put_one_key(tmp_path):
    images = [_image(i) for i in range(3)]
    WeightImageCache(tmp_path).put("key", images[0])
    done = threading.Event()
    seen = []

    def read() -> None:
        cache = WeightImageCache(tmp_path)
        while not done.is_set():
            seen.append(cache.get("key"))

    def put(image: WeightImage) -> None:
        cache = WeightImageCache(tmp_path)
        for _ in range(50):
            cache.put("key", image)

    reader = threading.Thread(target=read)
    writers = [threading.Thread(target=put, args=(image,)) for image in images]
    for thread in [reader, *writers]:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()
    assert seen and all(image in images for image in seen)


def test_an_unwritable_cache_folder_turns_writing_off_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the cache folder would go")
    with pytest.raises(OSError):
        write_atomic(blocker / "entry.bin", FORMAT.pack(b"x"))
    cache = WeightImageCache(blocker)
    with pytest.warns(CacheWarning, match=r"cannot write its converted-weights cache in .*not_a_directory"):
        cache.put("key", _image(1))
    attempts = []
    monkeypatch.setattr("coopnn.disk_cache.write_atomic", lambda *args: attempts.append(args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        cache.put("other", _image(2))
    assert attempts == [] and cache.get("key") is None
    assert blocker.read_text() == "a file where the cache folder would go"


def test_a_damaged_entry_is_deleted_with_one_warning_and_rebuilt(tmp_path):
    folder = CacheFolder("test", tmp_path, FORMAT)
    assert folder.write("a", b"payload") and folder.write("b", b"payload")
    for name in "ab":
        folder.path(name).write_bytes(folder.path(name).read_bytes()[:-1])
    with pytest.warns(CacheWarning, match="damaged or foreign entry") as caught:
        assert folder.read("a") is None and folder.read("b") is None
    assert len(caught) == 1 and not folder.path("a").exists()
    assert folder.write("a", b"payload") and folder.read("a") == b"payload"


def test_a_folder_keeps_its_most_recently_used_entries(tmp_path):
    folder = CacheFolder("test", tmp_path, FORMAT)
    for i, name in enumerate("abcde"):
        folder.write(name, b"x")
        os.utime(folder.path(name), ns=(i * 10**9, i * 10**9))
    folder.touch("a")
    folder.evict(3)
    assert sorted(p.stem for p in tmp_path.glob("*.bin")) == ["a", "d", "e"]


@pytest.mark.filterwarnings("ignore::coopnn.disk_cache.CacheWarning")  # the subject here; warned in test_disk_cache
@pytest.mark.vulkan
def test_an_unwritable_pipeline_cache_folder_only_counts_a_failure(tmp_path, require_vulkan):
    from coopnn.runtime.vk.pipeline_cache import PipelineCache, PipelineKey

    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the cache folder would go")
    info = SimpleNamespace(device_uuid="00" * 16, driver_version=1, pipeline_cache_uuid="11" * 16)
    cache = PipelineCache(info, blocker)
    key = PipelineKey(b"\x03\x02\x23\x07", "main", b"", 1, 0)
    cache.store(key, bytes(range(8)))
    assert cache.write_failures == 1
    assert cache.load(key) is None and (cache.hits, cache.misses, cache.discarded) == (0, 1, 0)


@pytest.mark.vulkan
def test_a_cache_dir_that_cannot_be_written_runs_models_with_one_warning(tmp_path, require_vulkan):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the cache folder would go")
    script = """
import warnings, numpy as np, coopnn
from coopnn.disk_cache import CacheWarning
from coopnn.backends.numpy.inference import run_graph
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x = np.random.default_rng(0).uniform(-1, 1, (33, 3)).astype(np.float32)
    for _ in range(2):
        with coopnn.load("models/mlp_3_64x2_3.onnx", backend="portable") as model:
            y = model.run(x)
            expected = run_graph(model.graph, {model.inputs[0].name: x})[model.outputs[0].name]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
print(sum(issubclass(w.category, CacheWarning) for w in caught))
"""
    env = {**os.environ, CACHE_DIR_ENV: str(blocker / "cache")}
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


@pytest.mark.vulkan
def test_eight_processes_sharing_a_cache_get_correct_results_and_leave_only_whole_entries(tmp_path, require_vulkan):
    from coopnn.runtime.vk.pipeline_cache import FORMAT as PIPELINE_FORMAT

    script = """
import sys, numpy as np, coopnn
from coopnn.backends.numpy.inference import run_graph
models = ["mlp_3_64x2_3", "mlp_32_64x4_16"][int(sys.argv[1]) % 2:] + ["mlp_3_64x2_3"]
for name in models:
    with coopnn.load(f"models/{name}.onnx", backend="portable") as model:
        x = np.random.default_rng(1).uniform(-1, 1, (17, model.inputs[0].shape[1])).astype(np.float32)
        expected = run_graph(model.graph, {model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_allclose(model.run(x), expected, rtol=1e-4, atol=1e-5)
"""
    env = {**os.environ, CACHE_DIR_ENV: str(tmp_path)}
    root = Path(__file__).resolve().parents[1]
    processes = [subprocess.Popen([sys.executable, "-c", script, str(i)], cwd=root, env=env, stderr=subprocess.PIPE,
                                  text=True) for i in range(8)]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    entries = list(tmp_path.rglob("*.bin"))
    assert entries and not [p for p in tmp_path.rglob(f"{TEMPORARY_PREFIX}*")]
    assert all(PIPELINE_FORMAT.unpack(p.read_bytes()) is not None for p in entries)


def test_files_coopnn_writes_survive_a_process_killed_mid_write(tmp_path):
    """Models, parameter files and checkpoints are written through `write_atomic`: a writer killed at any moment
    leaves a whole file (the previous one or the new one) at each path."""
    import signal
    import time

    import coopnn
    from coopnn.train.checkpoint import read_checkpoint

    script = f"""
import numpy as np, coopnn
out = {str(tmp_path)!r}
model = coopnn.mlp(3, [256, 256], 3, backend="numpy")
trainer = coopnn.Trainer(model)
x = np.zeros((8, 3), np.float32)
print("ready", flush=True)
while True:
    trainer.step(x, x)
    model.save(out + "/model.onnx")
    model.save_parameters(out + "/model.safetensors")
    trainer.save_checkpoint(out + "/ckpt.safetensors")
"""
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not (tmp_path / "ckpt.safetensors").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    with coopnn.load(tmp_path / "model.onnx", backend="numpy",
                     parameters_file=tmp_path / "model.safetensors") as model:
        assert model.run(np.zeros((2, 3), np.float32)).shape == (2, 3)
    assert read_checkpoint(tmp_path / "ckpt.safetensors").trainer["steps"] >= 1


def _write_with(kind: str, path: Path) -> None:
    """Write the file `path` the way coopnn's `kind` of file is written."""
    import coopnn
    from coopnn.cli import main

    model = coopnn.mlp(3, [8], 3, backend="numpy")
    if kind == "write_atomic":
        write_atomic(path, b"bytes")
    elif kind == "cache entry":
        assert CacheFolder("test", path.parent, FORMAT).write(path.stem, b"payload")
    elif kind == "Model.save":
        model.save(path)
    elif kind == "save_parameters":
        model.save_parameters(path)
    elif kind == "checkpoint":
        coopnn.Trainer(model).save_checkpoint(path)
    elif kind == "run -o":
        model.save(path.parent / "m.onnx")
        np.save(path.parent / "x.npy", np.zeros((2, 3), np.float32))
        assert main(["run", str(path.parent / "m.onnx"), "-i", str(path.parent / "x.npy"), "-o", str(path),
                     "-b", "numpy"]) == 0
    elif kind == "compile -o":
        model.save(path.parent / "m.onnx")
        assert main(["compile", str(path.parent / "m.onnx"), "--target", "portable", "-o", str(path)]) == 0
    model.close()


WRITERS = ["write_atomic", "cache entry", "Model.save", "save_parameters", "checkpoint", "run -o", "compile -o"]
SUFFIX = {"cache entry": ".bin", "run -o": ".npy"}


@contextlib.contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("kind", WRITERS)
@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_a_new_file_gets_the_mode_the_umask_gives_a_new_file(tmp_path, kind, mask):
    path = tmp_path / f"file{SUFFIX.get(kind, '')}"
    with _umask(mask):
        _write_with(kind, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert not list(tmp_path.glob(f"{TEMPORARY_PREFIX}*"))


@pytest.mark.parametrize("kind", WRITERS)
def test_a_file_written_again_keeps_its_mode(tmp_path, kind):
    path = tmp_path / f"file{SUFFIX.get(kind, '')}"
    path.write_bytes(b"old")
    path.chmod(0o640)
    with _umask(0o022):
        _write_with(kind, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_bytes() != b"old"


@pytest.mark.parametrize("kind", WRITERS)
@pytest.mark.parametrize("chain", [1, 2])
def test_writing_through_a_symbolic_link_writes_its_target_and_keeps_the_link(tmp_path, kind, chain):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / f"target{SUFFIX.get(kind, '')}"
    target.write_bytes(b"old")
    target.chmod(0o604)
    link = target
    for i in range(chain):  # a relative link to the previous one, so that the chain is resolved where it lies
        new = tmp_path / f"link{i}{SUFFIX.get(kind, '')}"
        new.symlink_to(os.path.relpath(link, tmp_path))
        link = new
    _write_with(kind, link)
    assert link.is_symlink() and target.read_bytes() != b"old"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert not list(tmp_path.rglob(f"{TEMPORARY_PREFIX}*"))


def test_a_dangling_link_creates_its_target(tmp_path):
    (tmp_path / "link").symlink_to("made.bin")
    write_atomic(tmp_path / "link", b"bytes")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "made.bin").read_bytes() == b"bytes"


def test_a_folder_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "to_folder").symlink_to("folder")
    for path in (tmp_path / "folder", tmp_path / "to_folder"):
        with pytest.raises(IsADirectoryError):
            write_atomic(path, b"bytes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "to_folder"]
    assert not list((tmp_path / "folder").iterdir())


@pytest.mark.parametrize("kind", ["Model.save", "save_parameters", "checkpoint"])
def test_a_folder_given_to_a_save_is_an_input_error_naming_it(tmp_path, kind):
    from coopnn.errors import InputError

    with pytest.raises(InputError, match=re.escape(repr(str(tmp_path))) + ".*is a folder"):
        _write_with(kind, tmp_path)
    assert not list(tmp_path.iterdir()) and not list(tmp_path.parent.glob(f"{TEMPORARY_PREFIX}*"))
