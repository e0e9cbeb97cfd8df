#!/usr/bin/env python3
"""Sets every cell's slide type (Jupyter's `slideshow` metadata) in the English notebooks, by one
rule, so that each notebook is a slide deck (notebooks/slides.sh) without cells marked by hand:

  * a markdown cell starts a slide ("slide"): a section's heading, or the text that introduces
    the next failure or its fix, so that every failure is a slide of its own, the error first,
    and its fix the next one;
  * a code cell right after a markdown cell stays on that slide ("-"), with its outputs;
  * a code cell right after another code cell gets a slide of its own below it ("subslide"):
    the fix that follows its failure in the next cell, or the figure drawn from the cell before.

    python3 notebooks/slide_types.py            # writes the English notebooks (0*.ipynb)
    python3 notebooks/slide_types.py --check    # exits 1, naming the cells, if one differs

notebooks/zh-CN/ copies the metadata with the cells (`python3 notebooks/i18n.py build`), and
`i18n.py check` fails on a copy that is not up to date. Standard library only; the notebooks are
written as nbformat writes them (one-space indent, sorted keys, a final newline), so only the
metadata changes.
"""
import json
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent


def slide_type(cell, previous):
    if cell["cell_type"] == "markdown":
        return "slide"
    if previous is not None and previous["cell_type"] == "code":
        return "subslide"
    return "-"


def apply(nb):
    """Sets the slide types in NB; returns [(cell number, old, new)] for every change."""
    changes, previous = [], None
    for k, cell in enumerate(nb["cells"], 1):
        wanted = slide_type(cell, previous)
        old = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        if old != wanted:
            cell.setdefault("metadata", {}).setdefault("slideshow", {})["slide_type"] = wanted
            changes.append((k, old, wanted))
        previous = cell
    return changes


def dumps(nb):
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    wrong = []
    for path in sorted(NOTEBOOKS.glob("0*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        changes = apply(nb)
        if check:
            wrong += [f"{path.name} cell {k}: slide type {old!r}, expected {new!r}"
                      for k, old, new in changes]
        elif changes:
            path.write_text(dumps(nb), encoding="utf-8")
            print(f"{path.name}: {len(changes)} cell(s) set")
    if wrong:
        print("slide types not set by notebooks/slide_types.py (run it, then "
              "`python3 notebooks/i18n.py build`):\n  " + "\n  ".join(wrong), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
