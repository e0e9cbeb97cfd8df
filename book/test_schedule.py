#!/usr/bin/env python3
"""Tests of schedule.py (`python3 book/test_schedule.py`; standard library only).

The preprocessor runs as mdbook runs it, over its JSON protocol, on small books written to a
scratch folder, and its page reader on every page of the real book.
"""
import json
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from schedule import NOT_COURSE, ONE_DAY, ONE_DAY_SLACK, ScheduleError, page_minutes

HERE = Path(__file__).resolve().parent


def page(title, reading, comment, body=""):
    line = f"<!-- schedule: {comment} -->\n" if comment is not None else ""
    return f"# {title}\n\n*Reading time: about {reading} minutes.*\n{line}\n{body}"


def chapter(name, path, content="", sub_items=()):
    return {"Chapter": {"name": name, "content": content, "number": None, "path": path,
                        "source_path": path, "sub_items": list(sub_items), "parent_names": []}}


MARKERS = ("{{#schedule pages}}\n\n{{#schedule chapters}}\n\n{{#schedule one-day}}\n\n"
           "{{#schedule three-days}}\n")


class Book:
    """A small course on disk: an introduction, three chapters (one with a sub-page), the
    teaching page with every marker, and a teachers' page without minutes."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.src = Path(self.dir.name) / "src"
        self.src.mkdir()
        self.files = {
            "introduction.md": page("Introduction", 10, "demo=5 exercise=0"),
            "01-one.md": page("1. One", 20, "demo=10 exercise=01-1:30",
                              "> **Exercise 01-1 now:** [01-1](x)\n"),
            "01-1-sub.md": page("1.1 Sub", 15, "demo=5 exercise=0"),
            "02-two.md": page("2. Two", 60, "demo=20 exercise=02-1:100,02-2:50",
                              "> **Exercise 02-1 now:** [a](x)\n\n"
                              "> **Exercise 02-2 now:** [b](x)\n"),
            "03-three.md": page("3. Three", 30, "demo=10 exercise=0"),
            "teaching.md": "# Teaching\n\n*Reading time: about 1 minutes.*\n\n" + MARKERS,
            "teachers.md": "# For teachers\n\n*Reading time: about 2 minutes.*\n",
        }

    def write(self):
        for name, text in self.files.items():
            (self.src / name).write_text(text, encoding="utf-8")

    def book(self):
        return {"items": [
            chapter("Introduction", "introduction.md"),
            chapter("1. One", "01-one.md", sub_items=[chapter("1.1 Sub", "01-1-sub.md")]),
            chapter("2. Two", "02-two.md"),
            chapter("3. Three", "03-three.md"),
            chapter("Teaching", "teaching.md", self.files["teaching.md"]),
            chapter("For teachers", "teachers.md"),
        ]}

    def run(self, language="en"):
        self.write()
        context = {"root": self.dir.name, "renderer": "html", "mdbook_version": "0.5.3",
                   "config": {"book": {"src": "src", "language": language}}}
        return subprocess.run([sys.executable, str(HERE / "schedule.py")],
                              input=json.dumps([context, self.book()]), capture_output=True,
                              text=True, check=False)

    def teaching(self, language="en"):
        done = self.run(language)
        if done.returncode != 0:
            raise AssertionError(done.stderr)
        return json.loads(done.stdout)["items"][4]["Chapter"]["content"]


def row(text, label, width=6):
    """The cells of the first table row of WIDTH cells whose first cell holds LABEL (the pages'
    table has 5 columns, the chapters' and the plans' 6)."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and label in cells[0] and len(cells) == width:
            return cells
    raise AssertionError(f"no row {label!r} in:\n{text}")


class Tables(unittest.TestCase):
    def setUp(self):
        self.book = Book()

    def tearDown(self):
        self.book.dir.cleanup()

    def test_the_tables_sum_the_pages(self):
        out = self.book.teaching()
        self.assertNotIn("{{#schedule", out)
        self.assertEqual(row(out, "[1.1 Sub]", 5)[1:], ["15", "5", "0", "0:20"])
        # chapter 1: its landing page and its sub-page
        self.assertEqual(row(out, "[1. One](01-one.md)")[1:], ["2", "35", "15", "30", "1:20"])
        self.assertEqual(row(out, "Whole course")[1:], ["5", "135", "50", "180", "**6:05**"])
        self.assertIn("01-1 (30)", out)
        self.assertNotIn("For teachers", out)  # not part of the course

    def test_changing_a_page_s_minutes_changes_the_totals(self):
        before = self.book.teaching()
        self.book.files["01-1-sub.md"] = page("1.1 Sub", 15, "demo=25 exercise=0")
        after = self.book.teaching()
        self.assertEqual(row(after, "[1. One](01-one.md)")[1:], ["2", "35", "35", "30", "1:40"])
        self.assertEqual(row(after, "Whole course")[-1], "**6:25**")
        self.assertNotEqual(before, after)
        # and an exercise's minutes, and the reading time
        self.book.files["01-one.md"] = page("1. One", 25, "demo=10 exercise=01-1:45",
                                            "> **Exercise 01-1 now:** [01-1](x)\n")
        again = self.book.teaching()
        self.assertEqual(row(again, "[1. One](01-one.md)")[1:], ["2", "40", "35", "45", "2:00"])
        self.assertEqual(row(again, "Whole course")[-1], "**6:45**")

    def test_the_plans_follow_the_minutes(self):
        out = self.book.teaching()
        # one day: whole chapters while the day stays within about 6 h (introduction 15, one
        # 80, two 230 = 5:25; three makes it 6:05, still about 6 h: 365 <= 396)
        self.assertIn("| [3. Three](03-three.md) | 30 | 10 | 0 | 0:40 | 6:05 |", out)
        self.assertIn("One day: 6:05 of contact time", out)
        self.assertIn("Nothing is left for later.", out)
        # three days: the longest day as short as it can be (15+80 | 230 | 40)
        self.assertEqual(row(out, "Day 2")[1:], ["[2. Two](02-two.md)", "60", "20", "150",
                                                  "3:50"])
        self.assertIn("the longest day 3:50", out)
        # a longer chapter two pushes chapter three out of the day
        self.book.files["02-two.md"] = page("2. Two", 60, "demo=80 exercise=02-1:100,02-2:50",
                                            "> **Exercise 02-1 now:** [a](x)\n\n"
                                            "> **Exercise 02-2 now:** [b](x)\n")
        out = self.book.teaching()
        self.assertIn("One day: 6:25 of contact time", out)
        self.assertIn("Left for later (self-study, or a second day): [3. Three](03-three.md)",
                      out)
        self.assertLessEqual(6 * 60 + 25, ONE_DAY + ONE_DAY_SLACK)
        self.assertGreater(6 * 60 + 25 + 40, ONE_DAY + ONE_DAY_SLACK)

    def test_the_tables_speak_the_book_s_language(self):
        out = self.book.teaching("zh-CN")
        self.assertIn("| 章 | 页数 | 阅读 | 演示 | 练习 | 合计 |", out)
        self.assertIn("整门课程", out)
        self.assertIn("第 2 天", out)
        self.assertNotIn("Whole course", out)

    def test_a_page_without_minutes_fails_the_build_by_name(self):
        self.book.files["01-1-sub.md"] = page("1.1 Sub", 15, None)
        done = self.book.run()
        self.assertEqual(done.returncode, 1)
        self.assertEqual(done.stdout, "")
        self.assertIn("01-1-sub.md: no `<!-- schedule:", done.stderr)

    def test_exercises_must_be_the_page_s_exercise_lines(self):
        self.book.files["01-one.md"] = page("1. One", 20, "demo=10 exercise=0",
                                            "> **Exercise 01-1 now:** [01-1](x)\n")
        done = self.book.run()
        self.assertEqual(done.returncode, 1)
        self.assertIn("01-one.md: the schedule comment times the exercises none, but the "
                      "page's `> **Exercise N-k now:**` lines link ['01-1']", done.stderr)

    def test_a_malformed_comment_is_named(self):
        for comment in ["demo=x exercise=0", "demo=5", "demo=5 exercise=01-1",
                        "demo=5 exercise=0 extra=1", "demo=5 exercise=01-1:0"]:
            with self.subTest(comment=comment):
                with self.assertRaisesRegex(ScheduleError, r"^schedule\.py: p\.md: "):
                    page_minutes("p.md", page("P", 1, comment,
                                              "> **Exercise 01-1 now:** [a](x)\n"))

    def test_an_unknown_table_is_an_error(self):
        self.book.files["teaching.md"] = "# Teaching\n\n{{#schedule weeks}}\n"
        done = self.book.run()
        self.assertEqual(done.returncode, 1)
        self.assertIn("teaching.md: unknown table `{{#schedule weeks}}`", done.stderr)

    def test_supports_every_renderer(self):
        for renderer in ["html", "linkcheck2", "xgettext"]:
            done = subprocess.run([sys.executable, str(HERE / "schedule.py"), "supports",
                                   renderer], check=False)
            self.assertEqual(done.returncode, 0)


class RealBook(unittest.TestCase):
    def test_every_page_of_the_course_has_its_minutes(self):
        summary = (HERE / "src" / "SUMMARY.md").read_text(encoding="utf-8")
        files = re.findall(r"\]\(([^)]+\.md)\)", summary)
        course = [f for f in files if not NOT_COURSE.match(f)]
        self.assertGreater(len(course), 20)
        for name in course:
            with self.subTest(page=name):
                minutes = page_minutes(name, (HERE / "src" / name).read_text(encoding="utf-8"))
                self.assertGreater(minutes["reading"], 0)
        self.assertIn("teaching.md", files)


if __name__ == "__main__":
    unittest.main()
