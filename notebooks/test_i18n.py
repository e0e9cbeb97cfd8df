#!/usr/bin/env python3
"""Tests of notebooks/i18n.py: python3 notebooks/test_i18n.py (standard library; needs GNU gettext)."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import i18n  # noqa: E402

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {},
         "source": ["# Title\n", "\n", "See [the book](../book/src/x.md) and `f(x)`.\n", "\n",
                    "```python\n", "x = 1\n", "\n", "y = 2\n", "```\n", "\n",
                    "- one\n", "- two\n"]},
        {"cell_type": "code", "execution_count": 1, "id": "b", "metadata": {},
         "outputs": [{"name": "stdout", "output_type": "stream", "text": ["../crates out\n"]}],
         "source": [":dep workbook = { path = \"../crates/workbook\" }\n", "let s = \"a/../b\";"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "# Title"
msgstr "# 标题"

msgid "See [the book](../book/src/x.md) and `f(x)`."
msgstr "见[本书](../book/src/x.md)和 `f(x)`。"

{fuzzy}msgid ""
"- one\\n"
"- two"
msgstr ""
"- 一\\n"
"- 二"
"""


class Blocks(unittest.TestCase):
    def test_fenced_block_with_blank_line_is_one_block_and_not_a_message(self):
        text = i18n.text_of(NOTEBOOK["cells"][0]).rstrip("\n")
        split = i18n.blocks(text)
        self.assertEqual([m for m, _ in split], [True, True, False, True])
        self.assertEqual(split[2][1], "```python\nx = 1\n\ny = 2\n```")

    def test_unclosed_fence_or_double_blank_line_is_refused(self):
        self.assertIsNone(i18n.blocks("a\n\n```\nno end"))
        self.assertIsNone(i18n.blocks("a\n\n\nb"))

    def test_every_real_notebook_splits_and_round_trips(self):
        for path in i18n.sources():
            nb = i18n.load(path)
            self.assertEqual(i18n.dumps(nb), path.read_text(encoding="utf-8"), path)
            for cell in nb["cells"]:
                self.assertEqual(i18n.lines_of(i18n.text_of(cell), cell["source"]), cell["source"])
                if cell["cell_type"] == "markdown":
                    self.assertIsNotNone(i18n.blocks(i18n.edges(i18n.text_of(cell))[1]), path)


class Translate(unittest.TestCase):
    def catalogue(self, fuzzy):
        with tempfile.TemporaryDirectory() as d:
            po = pathlib.Path(d) / "zh-CN.po"
            po.write_text(PO.replace("{fuzzy}", "#, fuzzy\n" if fuzzy else ""), encoding="utf-8")
            old = i18n.PO_DIR
            i18n.PO_DIR = pathlib.Path(d)
            try:
                return i18n.catalogue("zh-CN")
            finally:
                i18n.PO_DIR = old

    def test_translated_copy_keeps_code_outputs_and_fences_and_fixes_relative_paths(self):
        translations, fuzzy = self.catalogue(fuzzy=False)
        nb, problems = i18n.translate_notebook(NOTEBOOK, translations, fuzzy, "t.ipynb")
        self.assertEqual(problems, [])
        md, code = nb["cells"]
        self.assertEqual("".join(md["source"]),
                         "# 标题\n\n见[本书](../../book/src/x.md)和 `f(x)`。\n\n"
                         "```python\nx = 1\n\ny = 2\n```\n\n- 一\n- 二\n")
        self.assertEqual("".join(code["source"]),
                         ':dep workbook = { path = "../../crates/workbook" }\nlet s = "a/../b";')
        self.assertEqual(code["outputs"], NOTEBOOK["cells"][1]["outputs"])
        self.assertEqual(md["id"], "a")
        self.assertEqual(NOTEBOOK["cells"][0]["source"][0], "# Title\n")  # input untouched

    def test_fuzzy_and_missing_messages_are_refused_by_name(self):
        translations, fuzzy = self.catalogue(fuzzy=True)
        nb = json.loads(json.dumps(NOTEBOOK))
        nb["cells"][0]["source"].append("\nNew paragraph.")
        _, problems = i18n.translate_notebook(nb, translations, fuzzy, "t.ipynb")
        self.assertEqual(problems, ["t.ipynb:a: fuzzy: '- one'",
                                    "t.ipynb:a: untranslated: 'New paragraph.'"])

    def test_build_refuses_and_writes_nothing_when_a_message_is_missing(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            (root / "notebooks" / "po").mkdir(parents=True)
            (root / "notebooks" / "00-t.ipynb").write_text(i18n.dumps(NOTEBOOK), encoding="utf-8")
            (root / "notebooks" / "po" / "zh-CN.po").write_text(
                PO.replace("{fuzzy}", "#, fuzzy\n"), encoding="utf-8")
            script = root / "notebooks" / "i18n.py"
            script.write_text((HERE / "i18n.py").read_text(encoding="utf-8"), encoding="utf-8")
            run = subprocess.run([sys.executable, "-B", str(script), "build"],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 1, run.stderr)
            self.assertIn("fuzzy: '- one'", run.stderr)
            self.assertIn("nothing written", run.stderr)
            self.assertFalse((root / "notebooks" / "zh-CN").exists())
            # Translated, it writes the copy; check then passes; a stale copy fails check.
            (root / "notebooks" / "po" / "zh-CN.po").write_text(
                PO.replace("{fuzzy}", ""), encoding="utf-8")
            for args in (["build"], ["check"]):
                run = subprocess.run([sys.executable, "-B", str(script), *args],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
            copy = root / "notebooks" / "zh-CN" / "00-t.ipynb"
            copy.write_text(copy.read_text(encoding="utf-8").replace("标题", "Title"),
                            encoding="utf-8")
            run = subprocess.run([sys.executable, "-B", str(script), "check"],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 1)
            self.assertIn("notebooks/zh-CN/00-t.ipynb is out of date", run.stderr)


if __name__ == "__main__":
    os.chdir(HERE.parent)
    unittest.main()
