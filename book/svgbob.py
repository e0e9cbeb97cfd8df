#!/usr/bin/env python3
"""An mdbook preprocessor: draws every ```bob code block as an inline SVG diagram, at build time.

The diagrams are text (book/src/diagrams/NAME.bob, included into a page with
`{{#include diagrams/NAME.bob}}` inside a ```bob block), so they stay diffable and reviewable, and
the built book needs no script and no network to show them: `svgbob_cli` (the svgbob crate's
command line, `cargo install svgbob_cli --locked --version 0.7.6`) turns each block into SVG, and
this preprocessor puts the SVG in the page, in a `<figure class="diagram">`.

The third-party mdbook-svgbob preprocessors speak mdbook 0.4's JSON; the book is built with
mdbook 0.5 (see dedent.py), so this one is hand-written, with Python's standard library only.

Colours follow mdbook's themes: lines and text are drawn in `var(--fg)` and the backdrop (and the
inside of open shapes) in `var(--bg)`, CSS variables of the page that an inline SVG inherits, so a
diagram is dark on light in the light themes and light on dark in the dark ones. Text is
monospaced (13 px, about 7.8 px a character, inside svgbob's 8 px cells), so labels keep to the
grid they were drawn on. theme/diagrams.css scales a diagram down to the text column.

A missing svgbob_cli is an error (the build fails and says how to install it), not a skipped
diagram: the book must not pass its checks without its diagrams (book/check.sh,
check_render.py). So is a diagram svgbob cannot draw.

Registered in book.toml after `links` (the includes are expanded first), `katex` and `dedent`.
In the translated builds (book/i18n.sh) it runs after gettext and i18n_protect.py's restore:
a ```bob block is a fenced code block, which i18n_protect.py keeps out of the catalogue, so a
diagram is drawn from the same source in every edition.

mdbook runs `python3 svgbob.py supports <renderer>` (any renderer: exit 0), then
`python3 svgbob.py` with `[context, book]` as JSON on stdin, and reads the book back on stdout.
Environment: SVGBOB (the command to run, default `svgbob_cli`).
"""

import json
import os
import re
import shutil
import subprocess
import sys

VERSION = "0.7.6"
INSTALL = f"cargo install svgbob_cli --locked --version {VERSION}"
FENCE = re.compile(r"^( {0,3})(```+|~~~+)\s*(.*)$")
# The size of svgbob's cell, in pixels, at its default scale (one character of the source).
CELL = (8, 16)
# svgbob's settings (svgbob_cli's flags). The colours are CSS, resolved by the page.
SETTINGS = [
    "--stroke-color", "var(--fg)",
    "--fill-color", "var(--fg)",
    "--background", "var(--bg)",
    "--font-family", "'Source Code Pro', Consolas, 'DejaVu Sans Mono', monospace",
    "--font-size", "13",
    "--stroke-width", "1.5",
]


class DiagramError(Exception):
    """A diagram that cannot be drawn: the message says which and why."""


def svgbob_command() -> str:
    """The svgbob_cli to run, or a DiagramError that says how to install it."""
    command = os.environ.get("SVGBOB", "svgbob_cli")
    found = shutil.which(command)
    if found is None:
        raise DiagramError(
            f"svgbob.py: '{command}' was not found, so the book's ```bob diagrams cannot be "
            f"drawn. Install it with: {INSTALL} (book/README.md)"
        )
    return found


def render(source: str, command: str, where: str) -> str:
    """The SVG svgbob draws for `source`, on one line, sized to scale with the text column."""
    try:
        done = subprocess.run(
            [command, *SETTINGS], input=source, capture_output=True, text=True, timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DiagramError(f"svgbob.py: {where}: running {command} failed: {e}") from e
    svg = done.stdout.strip()
    if done.returncode != 0 or not svg.startswith("<svg"):
        raise DiagramError(
            f"svgbob.py: {where}: {command} exited with {done.returncode} and did not write an "
            f"SVG: {done.stderr.strip() or svg[:200]!r}"
        )
    match = re.match(r'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"', svg)
    # Past the style and the markers' <defs>, a drawing has lines, shapes or text; an empty
    # block gives only the backdrop.
    drawing = svg[svg.find("</defs>"):]
    if not match or not re.search(r"<(text|line|path|polygon|circle)\b", drawing):
        raise DiagramError(f"svgbob.py: {where}: the diagram is empty (an empty ```bob block?)")
    # svgbob sizes the picture by what it draws and leaves quoted ("escaped") text out, so a
    # label that ends a line, or the last line, would be cut off: the size is at least the
    # source's grid, in svgbob's cells (8 x 16 px), with a cell to spare each way as svgbob does.
    lines = source.rstrip("\n").split("\n")
    width = max(float(match.group(1)), (max(len(line) for line in lines) + 1) * CELL[0])
    height = max(float(match.group(2)), (len(lines) + 1) * CELL[1])
    head = svg[: svg.index(">") + 1]
    sized = re.sub(r'\swidth="[\d.]+"', f' width="{width:g}"', head, count=1)
    sized = re.sub(r'\sheight="[\d.]+"', f' height="{height:g}"', sized, count=1)
    # A viewBox lets theme/diagrams.css scale the drawing down to a narrow window; role and
    # aria-label tell a screen reader it is a picture (its labels are real text inside).
    sized = sized.replace(
        "<svg", f'<svg viewBox="0 0 {width:g} {height:g}" role="img" aria-label="diagram"', 1
    )
    svg = sized + svg[len(head):]
    # An HTML block in markdown ends at a blank line: the figure must have none inside.
    return " ".join(line.strip() for line in svg.splitlines() if line.strip())


def draw_blocks(markdown: str, where: str, command_for) -> str:
    """Replaces every ```bob fenced block by its figure; everything else is left as it is.

    `command_for()` gives the svgbob_cli to run.
    """
    lines = markdown.split("\n")
    out, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, fence, info = match.groups()
        # The closing fence: the same character, at least as long, nothing after it.
        end = i + 1
        while end < len(lines):
            close = FENCE.match(lines[end])
            if close and close.group(2).startswith(fence[0] * len(fence)) and not close.group(3):
                break
            end += 1
        if end == len(lines):
            out.extend(lines[i:])  # an unclosed block stays as it was
            break
        if info.split()[:1] == ["bob"]:
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip()
                    for line in lines[i + 1:end]]
            svg = render("\n".join(body) + "\n", command_for(), f"{where}, line {i + 1}")
            # Blank lines around: the figure is an HTML block, and the caption under it
            # (*Figure 2.1: ...*) must stay a paragraph of its own.
            out.extend(["", f'{indent}<figure class="diagram">{svg}</figure>', ""])
        else:
            out.extend(lines[i:end + 1])
        i = end + 1
    return "\n".join(out)


def visit(item, command_for) -> None:
    """Draws the diagrams of every chapter, whatever the nesting (mdbook 0.5's `items`)."""
    if isinstance(item, dict):
        chapter = item.get("Chapter")
        if isinstance(chapter, dict) and isinstance(chapter.get("content"), str):
            where = chapter.get("source_path") or chapter.get("path") or chapter.get("name")
            chapter["content"] = draw_blocks(chapter["content"], str(where), command_for)
        for value in item.values():
            visit(value, command_for)
    elif isinstance(item, list):
        for value in item:
            visit(value, command_for)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        sys.exit(0)
    _context, book = json.load(sys.stdin)
    try:
        # Looked for even when no page has a diagram yet: a machine that builds the book
        # must be able to draw its diagrams, so the check fails the same way everywhere.
        command = svgbob_command()
        visit(book, lambda: command)
    except DiagramError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    json.dump(book, sys.stdout)


if __name__ == "__main__":
    main()
