"""Render the service definition's doc fragment placements from their one source.

A service definition (contract C1) is documented at five places of
plugins/doc_fragments/service_definition.py, because ansible-doc composes fragments only at the
top level of ``options`` and ansible-test reads a fragment's strings as literals. The keys are
written once, in ``DEFINITION``; this script writes them into CHECKS, SERVICES, VERIFY and DEPENDS
(each keeps its own head: the option's name, description and ``name`` suboption).

    python scripts/render_doc_fragments.py          # rewrite the file
    python scripts/render_doc_fragments.py --check  # exit 1 when the file is not rendered

tests/unit/plugins/doc_fragments/test_service_definition.py runs the check.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

FRAGMENT = Path(__file__).resolve().parent.parent / "plugins" / "doc_fragments" / "service_definition.py"
SOURCE = "DEFINITION"
# Placements holding the whole definition as suboptions of one option, after that option's head.
NESTED = ("SERVICES", "VERIFY", "DEPENDS")
NESTED_START = "\n      checks:"
NESTED_INDENT = 4


def _indent(text: str, width: int) -> str:
    return "".join((" " * width + line) if line.strip() else line for line in text.splitlines(True))


def literals(text: str) -> dict[str, str]:
    """The fragment class's string attributes, by name."""
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found[node.targets[0].id] = node.value.value
    return found


def rendered(text: str) -> dict[str, str]:
    """What each placement must say, given the file's DEFINITION and the placements' heads."""
    values = literals(text)
    source = values[SOURCE]
    keys = source.split("options:\n", 1)[1]
    out = {"CHECKS": "\noptions:\n" + keys[:keys.index("\n  units:") + 1]}
    for name in NESTED:
        head = values[name][:values[name].index(NESTED_START) + 1]
        out[name] = head + _indent(keys, NESTED_INDENT)
    return out


def render(text: str) -> str:
    values = literals(text)
    for name, want in rendered(text).items():
        old = 'r"""' + values[name] + '"""'
        if text.count(old) != 1:
            raise SystemExit(f"{FRAGMENT}: the literal of {name} is not unique; cannot rewrite it")
        text = text.replace(old, 'r"""' + want + '"""')
    return text


def main(argv: list[str]) -> int:
    text = FRAGMENT.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print(f"{FRAGMENT} is not rendered from its {SOURCE}: run python scripts/render_doc_fragments.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        FRAGMENT.write_text(new, encoding="utf-8")
        print(f"rewrote {FRAGMENT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
