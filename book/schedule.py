#!/usr/bin/env python3
"""An mdbook preprocessor: the course schedule, generated from the pages' own minutes at build time.

Every page of the course carries its minutes, so that a schedule cannot drift from the pages:
  * reading: the `*Reading time: about N minutes.*` line under its title (which the page tests,
    crates/workbook/tests/book/pages.rs, keep within a minute or a fifth of its words / 180);
  * demo and exercises: an HTML comment right under that line,
        <!-- schedule: demo=8 exercise=01-1:15,01-2:20 -->
    `demo` is the live time (notebook cells, commands) in minutes; `exercise` lists every
    exercise the page links with a `> **Exercise N-k now:**` line, each with the minutes a
    student needs for it (estimated from its README: reading it, the TODOs, `cargo grade`), or
    `exercise=0` when the page links none. The ids must be exactly the page's exercise lines.
A page of the course without the comment, with a malformed one, or whose exercise ids differ
from its exercise lines fails the build, named. The teachers' pages (teachers.md,
teachers-*.md, teaching.md) and the glossary are not part of the course and carry none.

The page "Teaching this course" (teaching.md) places the tables with markers, each on a line of
its own (after `<!-- i18n:skip -->`, so that the marker is never a message of the catalogue):
    {{#schedule pages}}       every page: reading, demo, exercises, total
    {{#schedule chapters}}    per chapter: pages, minutes per segment, total; the course total
    {{#schedule one-day}}     whole chapters in course order while the day stays about 6 h
    {{#schedule three-days}}  the whole course in three days, cut between chapters so that the
                              longest day is as short as it can be
A unit of the plans is the introduction, the primer, or a chapter with its pages.

The minutes are read from the English sources on disk (book/src/, the same in every edition),
the page and chapter names from the book mdbook passes (translated in a translated edition);
the tables' own words follow the book's language (`book.language`: en, zh-CN). Registered in
book.toml after `links`; in a translated build (book/i18n.sh) it runs after gettext, so the
generated tables are never messages.

mdbook runs `python3 schedule.py supports <renderer>` (any renderer: exit 0), then
`python3 schedule.py` with `[context, book]` as JSON on stdin, and reads the book back on
stdout. Python's standard library only, as dedent.py and svgbob.py.
"""

import itertools
import json
import re
import sys
from pathlib import Path

READING = re.compile(r"^\*Reading time: about (\d+) minutes?\.\*\s*$")
COMMENT = re.compile(r"^<!--\s*schedule:(.*?)-->\s*$")
EXERCISE_LINE = re.compile(r"^>\s*\*\*Exercise (\d\d-\d+) now:\*\*", re.MULTILINE)
MARKER = re.compile(r"^\{\{#schedule(?:[ \t]+([a-z-]+))?[ \t]*\}\}[ \t]*$", re.MULTILINE)
# Pages that are not part of the course: the glossary, the teachers' pages and this one.
NOT_COURSE = re.compile(r"^(glossary|teachers|teachers-.*|teaching)\.md$")
# The one-day plan: contact time, in minutes, and how far over it "about" goes.
ONE_DAY, ONE_DAY_SLACK = 360, 36
DAYS = 3

WORDS = {
    "en": {
        "page": "Page", "chapter": "Chapter", "pages": "Pages", "reading": "Reading",
        "demo": "Demo", "exercises": "Exercises", "total": "Total", "course": "Whole course",
        "day": "Day {n}", "days": "Day", "units": "Chapters", "cumulative": "Ends at",
        "later": "Left for later (self-study, or a second day): {units}.",
        "none_later": "Nothing is left for later.",
        "one_day": "One day: {total} of contact time (the target is about 6 h).",
        "three_days": "Three days: {total} in all; the longest day {longest}.",
        "sep": ", ",
        "note": "Minutes; h:mm in the last column. Exercises: the minutes a student needs, "
                "as the page's metadata says.",
    },
    "zh-CN": {
        "page": "页面", "chapter": "章", "pages": "页数", "reading": "阅读", "demo": "演示",
        "exercises": "练习", "total": "合计", "course": "整门课程", "day": "第 {n} 天", "days": "天",
        "units": "章节", "cumulative": "结束于",
        "later": "留待以后（自学，或第二天）：{units}。",
        "none_later": "没有留待以后的内容。",
        "one_day": "一天：授课时间 {total}（目标约 6 小时）。",
        "three_days": "三天：共 {total}；最长的一天 {longest}。",
        "sep": "、",
        "note": "单位为分钟；最后一列为 时:分。练习：学生所需的分钟数，取自页面的元数据。",
    },
}


class ScheduleError(Exception):
    """A page without usable minutes, or a marker that cannot be filled: the message says which."""


def hm(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def page_minutes(name: str, text: str) -> dict:
    """{reading, demo, exercise, exercises: [(id, minutes)]} of one page's markdown."""
    lines = text.split("\n")
    at = next((i for i, line in enumerate(lines) if READING.match(line)), None)
    if at is None:
        raise ScheduleError(f"schedule.py: {name}: no `*Reading time: about N minutes.*` line")
    reading = int(READING.match(lines[at]).group(1))
    comment = COMMENT.match(lines[at + 1]) if at + 1 < len(lines) else None
    if comment is None:
        raise ScheduleError(
            f"schedule.py: {name}: no `<!-- schedule: demo=N exercise=... -->` line right under "
            "the reading time (book/schedule.py says what it holds)")
    fields = {}
    for item in comment.group(1).split():
        key, sep, value = item.partition("=")
        if not sep or key not in ("demo", "exercise") or key in fields:
            raise ScheduleError(f"schedule.py: {name}: `{item}` in the schedule comment: "
                                "expected demo=N and exercise=0 or exercise=ID:N,ID:N")
        fields[key] = value
    if set(fields) != {"demo", "exercise"} or not fields["demo"].isdigit():
        raise ScheduleError(f"schedule.py: {name}: the schedule comment needs demo=N and "
                            f"exercise=..., got `{comment.group(1).strip()}`")
    exercises = []
    if fields["exercise"] != "0":
        for item in fields["exercise"].split(","):
            match = re.fullmatch(r"(\d\d-\d+):(\d+)", item)
            if not match or int(match.group(2)) == 0:
                raise ScheduleError(f"schedule.py: {name}: `{item}` in exercise=: expected "
                                    "ID:MINUTES, e.g. 01-2:20")
            exercises.append((match.group(1), int(match.group(2))))
    linked = EXERCISE_LINE.findall(text)
    if sorted(linked) != sorted(e for e, _ in exercises):
        raise ScheduleError(
            f"schedule.py: {name}: the schedule comment times the exercises "
            f"{sorted(e for e, _ in exercises) or 'none'}, but the page's `> **Exercise N-k "
            f"now:**` lines link {sorted(linked) or 'none'}")
    return {"reading": reading, "demo": int(fields["demo"]),
            "exercise": sum(m for _, m in exercises), "exercises": exercises}


def course_units(book: dict, src: Path) -> list:
    """[(unit name, [(page name, path, minutes)])]: the introduction, the primer and each chapter
    (a top-level item with its sub-pages), in the book's order, teachers' pages left out."""
    units = []

    def chapters(items):
        return [item["Chapter"] for item in items
                if isinstance(item, dict) and isinstance(item.get("Chapter"), dict)]

    def pages(chapter):
        out = []
        path = chapter.get("source_path") or chapter.get("path")
        if path and not NOT_COURSE.match(Path(path).name):
            text = (src / path).read_text(encoding="utf-8")
            out.append((chapter["name"], path, page_minutes(path, text)))
        for sub in chapters(chapter.get("sub_items", [])):
            out.extend(pages(sub))
        return out

    for chapter in chapters(book.get("items", book.get("sections", []))):
        found = pages(chapter)
        if found:
            units.append((chapter["name"], found))
    return units


def totals(pages) -> dict:
    return {k: sum(p[2][k] for p in pages) for k in ("reading", "demo", "exercise")}


def unit_total(pages) -> int:
    return sum(totals(pages).values())


def table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_pages(units, w) -> str:
    rows = []
    for _, pages in units:
        for name, path, m in pages:
            ex = w["sep"].join(f"{e} ({n})" for e, n in m["exercises"])
            total = m["reading"] + m["demo"] + m["exercise"]
            rows.append([f"[{cell(name)}]({path})", m["reading"], m["demo"],
                         f"{m['exercise']}" + (f": {ex}" if ex else ""), hm(total)])
    return table([w["page"], w["reading"], w["demo"], w["exercises"], w["total"]], rows)


def render_chapters(units, w) -> str:
    rows, course = [], {"reading": 0, "demo": 0, "exercise": 0}
    for name, pages in units:
        t = totals(pages)
        for k in course:
            course[k] += t[k]
        rows.append([link(name, pages), len(pages), t["reading"], t["demo"],
                     t["exercise"], hm(sum(t.values()))])
    rows.append([f"**{w['course']}**", sum(len(p) for _, p in units), course["reading"],
                 course["demo"], course["exercise"], f"**{hm(sum(course.values()))}**"])
    return (table([w["chapter"], w["pages"], w["reading"], w["demo"], w["exercises"],
                   w["total"]], rows) + "\n\n" + w["note"])


def one_day(units):
    """The units of the one-day plan: whole units in course order while the day stays within
    ONE_DAY + ONE_DAY_SLACK minutes; the rest is left for later."""
    day, minutes = [], 0
    for name, pages in units:
        if minutes + unit_total(pages) > ONE_DAY + ONE_DAY_SLACK:
            break
        day.append((name, pages))
        minutes += unit_total(pages)
    return day, units[len(day):]


def three_days(units):
    """The units cut into DAYS consecutive days, the longest day as short as it can be (then the
    days as even as they can be)."""
    sizes = [unit_total(p) for _, p in units]
    if len(units) < DAYS:
        raise ScheduleError(f"schedule.py: {len(units)} units cannot fill {DAYS} days")
    best = None
    for cuts in itertools.combinations(range(1, len(units)), DAYS - 1):
        bounds = (0, *cuts, len(units))
        days = [sum(sizes[a:b]) for a, b in zip(bounds, bounds[1:])]
        key = (max(days), max(days) - min(days))
        if best is None or key < best[0]:
            best = (key, bounds)
    bounds = best[1]
    return [units[a:b] for a, b in zip(bounds, bounds[1:])]


def sum_units(units) -> dict:
    t = {"reading": 0, "demo": 0, "exercise": 0}
    for _, pages in units:
        for k, v in totals(pages).items():
            t[k] += v
    return t


def link(name, pages) -> str:
    return f"[{cell(name)}]({pages[0][1]})"


def cell(text: str) -> str:
    """TEXT inside a table cell: a `|` would end the cell."""
    return text.replace("|", "\\|")


def render_one_day(units, w) -> str:
    day, later = one_day(units)
    if not day:
        raise ScheduleError("schedule.py: the first unit alone is longer than the one-day plan")
    rows, running = [], 0
    for name, pages in day:
        t = totals(pages)
        running += sum(t.values())
        rows.append([link(name, pages), t["reading"], t["demo"], t["exercise"],
                     hm(sum(t.values())), hm(running)])
    text = table([w["units"], w["reading"], w["demo"], w["exercises"], w["total"],
                  w["cumulative"]], rows)
    rest = (w["later"].format(units=w["sep"].join(link(n, p) for n, p in later))
            if later else w["none_later"])
    return f"{text}\n\n{w['one_day'].format(total=hm(running))} {rest}"


def render_three_days(units, w) -> str:
    rows, lengths = [], []
    for n, day in enumerate(three_days(units), 1):
        t = sum_units(day)
        lengths.append(sum(t.values()))
        rows.append([w["day"].format(n=n), w["sep"].join(link(name, p) for name, p in day),
                     t["reading"], t["demo"], t["exercise"], hm(sum(t.values()))])
    return (table([w["days"], w["units"], w["reading"], w["demo"], w["exercises"], w["total"]],
                  rows)
            + "\n\n" + w["three_days"].format(total=hm(sum(lengths)), longest=hm(max(lengths))))


RENDER = {"pages": render_pages, "chapters": render_chapters, "one-day": render_one_day,
          "three-days": render_three_days}


def fill(content: str, where: str, units, w) -> str:
    def replace(match):
        kind = match.group(1) or "chapters"
        if kind not in RENDER:
            raise ScheduleError(f"schedule.py: {where}: unknown table `{{{{#schedule {kind}}}}}`"
                                f" (known: {', '.join(RENDER)})")
        return RENDER[kind](units, w)
    return MARKER.sub(replace, content)


def process(context: dict, book: dict) -> dict:
    config = context.get("config", {})
    src = Path(context["root"]) / config.get("book", {}).get("src", "src")
    language = config.get("book", {}).get("language") or "en"
    w = WORDS.get(language, WORDS["en"])
    units = course_units(book, src)  # every course page is checked, marker or not

    def visit(item):
        if isinstance(item, dict):
            chapter = item.get("Chapter")
            if isinstance(chapter, dict) and isinstance(chapter.get("content"), str):
                where = chapter.get("source_path") or chapter.get("name")
                chapter["content"] = fill(chapter["content"], str(where), units, w)
            for value in item.values():
                visit(value)
        elif isinstance(item, list):
            for value in item:
                visit(value)

    visit(book)
    return book


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        sys.exit(0)
    context, book = json.load(sys.stdin)
    try:
        book = process(context, book)
    except (ScheduleError, OSError) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    json.dump(book, sys.stdout)


if __name__ == "__main__":
    main()
