#!/usr/bin/env python3
"""Tests of i18n_protect.py (`python3 book/test_i18n_protect.py`; standard library only)."""
import re
import unittest

from i18n_protect import protect, restore


class Protect(unittest.TestCase):
    def test_formulas_become_code_spans_and_come_back(self):
        text = "a \\\\( x_i \\\\) b\n\n\\\\[ \\{i\\}\\, \\alpha\n= 1 \\\\]\n"
        protected = protect(text)
        self.assertIn("`\\\\( x_i \\\\)`", protected)
        self.assertIn("`\\\\[ \\{i\\}\\, \\alpha\n= 1 \\\\]`", protected)
        self.assertEqual(restore(protected), text)

    def test_code_blocks_are_marked_skipped_and_left_alone(self):
        text = "Text.\n\n```python\n{{#include a.py:x}}\n\\\\( not math \\\\)\n```\n"
        protected = protect(text)
        self.assertIn("<!-- i18n:skip -->\n\n```python", protected)
        self.assertNotIn("`\\\\( not math", protected)  # no formula inside code
        # the same markdown, but for blank lines (the marker's)
        self.assertEqual(re.sub(r"\n+", "\n", restore(protected)), re.sub(r"\n+", "\n", text))

    def test_a_translated_formula_is_restored(self):
        # gettext may write the span with other padding or more backticks
        self.assertEqual(restore("其中 `` \\\\( s_k \\\\) `` 个"), "其中 \\\\( s_k \\\\) 个")

    def test_emphasis_is_written_with_stars(self):
        # gettext writes `_` emphasis, which CommonMark ignores between CJK characters
        self.assertEqual(restore("触发一个_设备端断言_（"), "触发一个*设备端断言*（")
        self.assertEqual(restore("see _errors_ here"), "see *errors* here")

    def test_literal_underscores_stay(self):
        for text in ["torch_geometric 2.8.1", "`x_y` and `_vars`", "[a](notebooks/01_a.ipynb)",
                     '<a href="a_b">', "\\_literal"]:
            self.assertEqual(restore(text), text)

    def test_a_collapsed_blocks_label_becomes_a_message(self):
        # "Answer" alone in an HTML line is never extracted; between blank lines it is a paragraph
        text = "1. Why?\n\n   <details><summary>Answer</summary>\n\n   Because.\n\n   </details>\n"
        protected = protect(text)
        self.assertIn("   <details><summary>\n\n   Answer\n\n   </summary>\n", protected)
        self.assertEqual(protect("<summary>Checked against (sources)</summary>"),
                         "<summary>\n\nChecked against (sources)\n\n</summary>")
        # inside a code block it is left alone
        code = "```text\n<summary>Answer</summary>\n```"
        self.assertIn("\n<summary>Answer</summary>\n", protect(code))

    def test_explicit_heading_ids_stay(self):
        # Issue 43: a heading that other pages link to carries an explicit id, `{#id}`, so that
        # both editions share it; mdbook-gettext keeps it (heading attributes), and so must we.
        text = "### placement {#placement}\n\nWhere a tensor lives.\n"
        self.assertEqual(protect(text), text)
        self.assertEqual(restore("### 放置位置（placement） {#placement}"),
                         "### 放置位置（placement） {#placement}")


if __name__ == "__main__":
    unittest.main()
