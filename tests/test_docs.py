"""The README's and docs' code blocks run as a reader would run them, and the files keep their shape.

A fenced block's info string says what it is. `python` blocks are executed, each in a fresh interpreter; `sh` (or
`bash`, `shell`) blocks are run line by line, and every line of one must be a `coopnn ...` or `python3 ...` command,
so that a reader can paste it. Further words say what a block needs: `vulkan` (any Vulkan device, lavapipe in CI),
`gpu` (a device with cooperative vectors), `torch` (PyTorch with CUDA), or `setup` (installs coopnn or runs this
suite: not run from here, as CI runs exactly those commands, which a test checks against `.ci/run`). A block's test
carries the `vulkan` or `gpu` marker its needs give, so `pytest -m gpu` runs the GPU blocks too. Blocks in other
languages (`text`, `json`, ...) are shown, not run. Everything runs in a temporary folder that holds links to the
repository's `models/` and `bench/`, so the blocks' relative paths work and what they write is thrown away.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.devices import coopvec_skip_reason, vulkan_skip_reason

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED_WIDTH = [*DOCUMENTS, ROOT / "DEVELOPERS.md"]
MAX_COLUMNS = 120
MAX_README_LINES = 300
SHELL_LANGUAGES = {"sh", "bash", "shell"}
NEEDS = {"vulkan", "gpu", "torch", "setup"}
FENCE = re.compile(r"^```(\S*)\s*(.*)$")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
BLOCK_SECONDS = 300


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, what it needs, its text."""

    path: Path
    line: int
    language: str
    needs: frozenset[str]
    text: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the line its fence opens on."""
    found, lines = [], path.read_text().splitlines()
    opened = None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if match is None:
            continue
        if opened is None:
            opened = (number, match.group(1), frozenset(match.group(2).split()))
        elif not match.group(1):
            start, language, needs = opened
            found.append(Block(path, start, language, needs, "\n".join(lines[start:number - 1]) + "\n"))
            opened = None
    assert opened is None, f"{path.relative_to(ROOT)}:{opened[0]}: a code fence is never closed"
    return found


def runnable_blocks() -> list:
    """Every python and shell block but the setup ones, as parameters marked with what they need."""
    return [pytest.param(block, id=block.id, marks=[getattr(pytest.mark, need) for need in ("vulkan", "gpu")
                                                    if need in block.needs])
            for path in DOCUMENTS for block in blocks_of(path)
            if (block.language == "python" or block.language in SHELL_LANGUAGES) and "setup" not in block.needs]


def skip_unless_possible(block: Block) -> None:
    """Skips a block whose device is missing here, saying which."""
    unknown = block.needs - NEEDS
    assert not unknown, f"{block.id}: unknown info-string words {sorted(unknown)}; known: {sorted(NEEDS)}"
    reason = (coopvec_skip_reason() if "gpu" in block.needs else None) or \
        (vulkan_skip_reason() if "vulkan" in block.needs else None) or \
        (torch_cuda_skip_reason() if "torch" in block.needs else None)
    if reason:
        pytest.skip(f"{block.id}: {reason}")


def torch_cuda_skip_reason() -> str | None:
    """Why a block that calls PyTorch on CUDA cannot run here, or None."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "needs PyTorch (pip install -e '.[export]')"
    torch = importlib.import_module("torch")
    return None if torch.cuda.is_available() else "needs PyTorch with a CUDA device"


@pytest.fixture
def reader_folder(tmp_path) -> Path:
    """A folder like a checkout's root as far as the blocks can tell: `models/` and `bench/` are there (blocks write
    their results elsewhere, under the folder itself)."""
    for name in ("models", "bench"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def reader_environment() -> dict[str, str]:
    """This checkout's coopnn first on the path, whatever is installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def command_of(line: str, where: str) -> list[str]:
    """A shell line as an argv, `coopnn` and `python3` run by this interpreter on this checkout."""
    words = shlex.split(line, comments=True)
    if words[:1] == ["coopnn"]:
        return [sys.executable, "-m", "coopnn", *words[1:]]
    if words[:1] == ["python3"]:
        return [sys.executable, *words[1:]]
    raise AssertionError(f"{where}: {line!r} is not a coopnn or python3 command; mark the block `setup`, "
                         f"or show it in a `text` block")


def run_checked(argv: list[str], where: str, cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, env=reader_environment(), capture_output=True, text=True,
                          timeout=BLOCK_SECONDS)
    assert done.returncode == 0, f"{where} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", runnable_blocks())
def test_code_block_runs(block: Block, reader_folder: Path):
    skip_unless_possible(block)
    if block.language == "python":
        run_checked([sys.executable, "-c", block.text], block.id, reader_folder)
        return
    for offset, line in enumerate(block.text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            where = f"{block.path.relative_to(ROOT)}:{block.line + offset}"
            run_checked(command_of(line, where), where, reader_folder)


@pytest.mark.parametrize("path", CHECKED_WIDTH, ids=lambda path: str(path.relative_to(ROOT)))
def test_lines_fit_in_120_columns(path: Path):
    long = [f"{number}: {len(line)}" for number, line in enumerate(path.read_text().splitlines(), 1)
            if len(line) > MAX_COLUMNS]
    assert not long, f"{path.relative_to(ROOT)} has lines over {MAX_COLUMNS} columns (line: length): {long}"


def test_readme_is_a_manual_not_a_notebook():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; at most {MAX_README_LINES}"


def test_readme_gives_the_test_command_ci_runs():
    ci_commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 ")]
    setup = "".join(block.text for block in blocks_of(ROOT / "README.md") if "setup" in block.needs)
    assert ci_commands and all(command in setup.splitlines() for command in ci_commands), ci_commands


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_reach_files(path: Path):
    targets = [target for target in LINK.findall(path.read_text()) if "://" not in target]
    missing = [target for target in targets if not (path.parent / target).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"
