#!/usr/bin/env python3
"""Tests of svgbob.py (`python3 book/test_svgbob.py`; standard library only).

They run the real svgbob_cli (book/check.sh installs nothing: a machine without it fails here,
as the build would), and the preprocessor as mdbook runs it, over its JSON protocol.
"""
import json
import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

from svgbob import INSTALL, draw_blocks, svgbob_command

HERE = Path(__file__).resolve().parent
BOX = ".---.\n| a |--->\n'---'\n"


def chapter(name: str, content: str, sub_items=()) -> dict:
    return {"Chapter": {"name": name, "content": content, "number": None,
                        "sub_items": list(sub_items), "path": f"{name}.md",
                        "source_path": f"{name}.md", "parent_names": []}}


def run_preprocessor(book: dict, env: dict) -> subprocess.CompletedProcess:
    context = {"root": str(HERE), "config": {}, "renderer": "html", "mdbook_version": "0.5.3"}
    return subprocess.run([sys.executable, str(HERE / "svgbob.py")],
                          input=json.dumps([context, book]), capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)


class Draw(unittest.TestCase):
    def setUp(self):
        self.command = svgbob_command()  # fails, with the install command, without svgbob_cli

    def draw(self, markdown: str) -> str:
        return draw_blocks(markdown, "test.md", lambda: self.command)

    def test_a_bob_block_becomes_an_inline_svg_figure(self):
        out = self.draw(f"Before.\n\n```bob\n{BOX}```\n*Figure 1.1: a box.*\n")
        figure = re.search(r'<figure class="diagram"><svg .*?</svg></figure>', out)
        self.assertIsNotNone(figure, out)
        svg = figure.group(0)
        self.assertRegex(svg, r'viewBox="0 0 [1-9][\d.]* [1-9][\d.]*"')
        self.assertIn("var(--fg)", svg)  # follows the theme
        self.assertIn(">a<", svg)  # the label is text
        self.assertNotIn("```", out)
        # the figure is one HTML block (no blank line inside) and the caption stays a paragraph
        self.assertIn("</figure>\n\n*Figure 1.1: a box.*", out)
        self.assertTrue(out.startswith("Before.\n\n"))

    def test_quoted_text_at_the_edges_is_inside_the_picture(self):
        # svgbob sizes its picture without quoted text: the grid of the source counts too
        label = '"a label that ends the last line, longer than the box"'
        out = self.draw(f"```bob\n{BOX}{label}\n```\n")
        width, height = re.search(r'<svg viewBox="0 0 ([\d.]+) ([\d.]+)"', out).groups()
        self.assertGreaterEqual(float(width), (len(label) + 1) * 8)
        self.assertGreaterEqual(float(height), 5 * 16)
        self.assertIn(f'width="{float(width):g}" height="{float(height):g}"', out)

    def test_other_blocks_and_prose_are_left_alone(self):
        text = "```rust\nlet bob = 1;\n```\n\n~~~text\n```bob\n~~~\n\nbob is `bob`\n"
        self.assertEqual(self.draw(text), text)

    def test_longer_fences_and_tildes(self):
        out = self.draw(f"````bob\n{BOX}```\n````\n\n~~~ bob\n{BOX}~~~\n")
        self.assertEqual(out.count('<figure class="diagram">'), 2, out)
        self.assertNotIn("~~~", out)

    def test_an_unclosed_block_stays_as_it_was(self):
        text = f"```bob\n{BOX}"
        self.assertEqual(self.draw(text), text)

    def test_an_empty_diagram_is_an_error(self):
        with self.assertRaisesRegex(Exception, r"test\.md, line 1: .*empty"):
            self.draw("```bob\n```\n")


class Protocol(unittest.TestCase):
    def test_supports_every_renderer(self):
        for renderer in ["html", "linkcheck2", "xgettext"]:
            done = subprocess.run([sys.executable, str(HERE / "svgbob.py"), "supports", renderer],
                                  check=False)
            self.assertEqual(done.returncode, 0)

    def test_the_book_comes_back_with_diagrams_in_nested_chapters(self):
        book = {"items": [chapter("intro", "No diagram."),
                          chapter("ch1", "Text.", [chapter("ch1-1", f"```bob\n{BOX}```\n")])]}
        done = run_preprocessor(book, {})
        self.assertEqual(done.returncode, 0, done.stderr)
        out = json.loads(done.stdout)
        self.assertEqual(out["items"][0]["Chapter"]["content"], "No diagram.")
        nested = out["items"][1]["Chapter"]["sub_items"][0]["Chapter"]["content"]
        self.assertIn('<figure class="diagram"><svg', nested)

    def test_a_missing_svgbob_fails_the_build_and_says_how_to_install_it(self):
        # Even for a book without diagrams: a machine that builds the book must draw them.
        for book in [{"items": [chapter("ch1", f"```bob\n{BOX}```\n")]},
                     {"items": [chapter("ch1", "No diagram.")]}]:
            done = run_preprocessor(book, {"SVGBOB": "/nonexistent/svgbob_cli"})
            self.assertEqual(done.returncode, 1)
            self.assertEqual(done.stdout, "")
            self.assertIn("was not found", done.stderr)
            self.assertIn(INSTALL, done.stderr)
            self.assertIn("cargo install svgbob_cli --locked --version 0.7.6", INSTALL)

    def test_a_failing_svgbob_names_the_page_and_line(self):
        book = {"items": [chapter("ch1", f"Text.\n\n```bob\n{BOX}```\n")]}
        done = run_preprocessor(book, {"SVGBOB": "false"})
        self.assertEqual(done.returncode, 1)
        self.assertIn("ch1.md, line 3", done.stderr)


if __name__ == "__main__":
    unittest.main()
