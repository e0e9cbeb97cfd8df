#!/usr/bin/env python3
"""An mdbook preprocessor: removes the common indentation of every code block.

The chapters include their listings from compiled code (`{{#include file:anchor}}`), where they
sit inside a function, 4 or 8 spaces in; mdbook 0.5 includes the lines as they are. This runs
after mdbook's `links` preprocessor (book.toml) and dedents each fenced code block, so a listing
starts at the left edge and keeps its width for the code (listings are at most 80 columns once
dedented: crates/workbook/tests/book/main.rs checks it).

Hand-written (Python's standard library only, as book/check_render.py) because mdbook has no
setting for it and no preprocessor crate that does only this was worth a build dependency.

mdbook runs `python3 dedent.py supports <renderer>` (any renderer: exit 0), then
`python3 dedent.py` with `[context, book]` as JSON on stdin, and reads the book back on stdout.
"""

import json
import re
import sys
import textwrap

FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")


def dedent_blocks(markdown: str) -> str:
    """Dedents the body of every fenced code block; everything else is left as it is."""
    out, body, fence = [], [], None
    for line in markdown.split("\n"):
        match = FENCE.match(line)
        if fence is None:
            out.append(line)
            if match:
                fence = match.group(2)
        elif match and match.group(2).startswith(fence[0] * len(fence)) and not match.group(3).strip():
            out.extend(textwrap.dedent("\n".join(body)).split("\n") if body else [])
            out.append(line)
            body, fence = [], None
        else:
            body.append(line)
    out.extend(body)  # an unclosed block stays as it was
    return "\n".join(out)


def visit(item) -> None:
    """Dedents every chapter's content, whatever the nesting (mdbook 0.5's `items`)."""
    if isinstance(item, dict):
        chapter = item.get("Chapter")
        if isinstance(chapter, dict) and isinstance(chapter.get("content"), str):
            chapter["content"] = dedent_blocks(chapter["content"])
        for value in item.values():
            visit(value)
    elif isinstance(item, list):
        for value in item:
            visit(value)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        sys.exit(0)
    _context, book = json.load(sys.stdin)
    visit(book)
    json.dump(book, sys.stdout)


if __name__ == "__main__":
    main()
