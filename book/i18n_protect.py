#!/usr/bin/env python3
r"""An mdbook preprocessor for the translated editions: keeps formulas and code out of gettext.

mdbook-i18n-helpers (`mdbook-xgettext` extracts the messages, the `gettext` preprocessor puts the
translations in) parses every chapter as CommonMark and writes it back. That round trip is
harmless for prose, but not for formulas, which mdbook-katex reads from the raw markdown later:
`\{i\}` comes back as `{i}` (a CommonMark escape is consumed), `\,` as `,`, and `\alpha` as
`\\alpha`, which KaTeX reads as a line break followed by "alpha". So, around gettext:

  protect   (runs before `gettext`, and before `xgettext` extracts):
            * every formula, `\\( ... \\)` inline or `\\[ ... \\]` display, becomes a code span
              holding exactly the formula (`` `\\( x_i \\)` ``): a code span survives the round
              trip verbatim, and a translator sees the formula and copies it as it is;
            * every fenced code block gets `<!-- i18n:skip -->` before it, so that no listing,
              output or command is ever a message: the listings are compiled, tested code and the
              outputs are what the reader will see (they stay in English in every edition).
              The `{{#include ...}}` line of a Python listing would otherwise be extracted, as a
              Python comment.
            * a `<summary>label</summary>` line (the label of a collapsed block: "Answer",
              "Checked against (sources)") is opened up so that its label is a paragraph of its
              own, which gettext extracts and translates; HTML alone is never a message.
              theme/outputs.css keeps such a paragraph on the summary's line.
  restore   (runs after `gettext`, before `links` expands the includes and katex renders):
            * writes emphasis as `*text*`: gettext writes every paragraph back with `_text_`, and
              CommonMark does not open or close `_` emphasis between two letters, which is where
              it falls in Chinese or Japanese (`触发一个_设备端断言_（` shows its underscores).
              In markdown written back by gettext an underscore that could be a delimiter is
              escaped and one inside an English word (`torch_geometric`) cannot be one, so any
              other `_` outside code, link targets and HTML is an emphasis delimiter;
            * turns every code span that holds exactly one formula back into the formula, and
              drops the skip markers.

The English edition does not use this (book.toml does not name it); `book/i18n.sh` configures it,
with `gettext`, for the extraction and the translated builds. Consequence for authors: a code span
that holds nothing but a formula, delimiters included, is rendered as a formula in a translated
edition; show the delimiters in code with some other text in the span.

Hand-written (Python's standard library only, as dedent.py) because mdbook-i18n-helpers has no
setting for it and no preprocessor does this.

mdbook runs `python3 i18n_protect.py MODE supports <renderer>` (any renderer: exit 0), then
`python3 i18n_protect.py MODE` with `[context, book]` as JSON on stdin, and reads the book back.
"""

import json
import re
import sys

FORMULA = re.compile(r"\\\\\((?:.|\n)*?\\\\\)|\\\\\[(?:.|\n)*?\\\\\]")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
SKIP = "<!-- i18n:skip -->"
# A code span (any number of backticks, as pulldown-cmark-to-cmark writes it) that holds exactly
# one formula, with the optional padding spaces CommonMark allows.
SPAN = re.compile(
    r"(?P<ticks>`+) ?(?P<formula>\\\\\((?:.|\n)*?\\\\\)|\\\\\[(?:.|\n)*?\\\\\]) ?(?P=ticks)"
)


# A collapsed block's label on a line of its own: `<details><summary>Answer</summary>`.
SUMMARY = re.compile(r"^(?P<indent>\s*)(?P<details><details>\s*)?<summary>(?P<label>[^<>]+)</summary>\s*$")


def open_summary(line: str) -> list[str]:
    """Puts a summary's label in a paragraph of its own (CommonMark: an HTML block ends at a
    blank line, so the label between two blank lines is markdown, and so a message)."""
    match = SUMMARY.match(line)
    if not match:
        return [line]
    indent = match.group("indent")
    return [indent + (match.group("details") or "") + "<summary>", "",
            indent + match.group("label").strip(), "", indent + "</summary>"]


def protect(markdown: str) -> str:
    """Wraps every formula outside code in a code span; marks every fenced block to be skipped;
    opens up the labels of collapsed blocks."""
    out, fence, prose = [], None, []

    def flush_prose() -> None:
        if prose:
            out.append(FORMULA.sub(lambda m: "`" + m.group(0) + "`", "\n".join(prose)))
            prose.clear()

    for line in markdown.split("\n"):
        match = FENCE.match(line)
        if fence is None:
            if match:
                flush_prose()
                indent = match.group(1)
                # A blank line after the marker keeps it an HTML block of its own, also in a list.
                out.extend([indent + SKIP, ""])
                out.append(line)
                fence = match.group(2)
            else:
                prose.extend(open_summary(line))
        else:
            out.append(line)
            if match and match.group(2).startswith(fence[0] * len(fence)) and not match.group(3).strip():
                fence = None
    flush_prose()
    return "\n".join(out)


# What an emphasis underscore must not be looked for in: code spans, link targets, HTML and
# autolinks, and escaped characters.
VERBATIM = re.compile(r"(`+)(?:.|\n)*?\1|\]\([^)]*\)|<[^>\n]*>|\\.")


# gettext leaves an underscore inside an English word unescaped (`torch_geometric`): one between
# two ASCII letters or digits is text, any other unescaped one a delimiter.
DELIMITER = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def star_emphasis(prose: str) -> str:
    """Rewrites `_` emphasis delimiters as `*` outside code spans, link targets and HTML."""
    out, last = [], 0
    for match in VERBATIM.finditer(prose):
        out.append(DELIMITER.sub("*", prose[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(DELIMITER.sub("*", prose[last:]))
    return "".join(out)


def restore(markdown: str) -> str:
    """Undoes protect() on the translated chapter (see the module's doc)."""
    out, fence, prose = [], None, []

    def flush_prose() -> None:
        if prose:
            out.append(star_emphasis("\n".join(prose)))
            prose.clear()

    for line in markdown.split("\n"):
        match = FENCE.match(line)
        if fence is None and match:
            flush_prose()
            out.append(line)
            fence = match.group(2)
        elif fence is None:
            prose.append(line)
        else:
            out.append(line)
            if match and match.group(2).startswith(fence[0] * len(fence)) and not match.group(3).strip():
                fence = None
    flush_prose()
    markdown = "\n".join(out)
    markdown = SPAN.sub(lambda m: m.group("formula"), markdown)
    return "\n".join(line for line in markdown.split("\n") if line.strip() != SKIP)


def visit(item, transform) -> None:
    """Transforms every chapter's content, whatever the nesting (mdbook 0.5's `items`)."""
    if isinstance(item, dict):
        chapter = item.get("Chapter")
        if isinstance(chapter, dict) and isinstance(chapter.get("content"), str):
            chapter["content"] = transform(chapter["content"])
        for value in item.values():
            visit(value, transform)
    elif isinstance(item, list):
        for value in item:
            visit(value, transform)


def main() -> None:
    modes = {"protect": protect, "restore": restore}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        sys.exit("usage: i18n_protect.py protect|restore [supports RENDERER]")
    if len(sys.argv) > 2 and sys.argv[2] == "supports":
        sys.exit(0)
    _context, book = json.load(sys.stdin)
    visit(book, modes[sys.argv[1]])
    json.dump(book, sys.stdout)


if __name__ == "__main__":
    main()
