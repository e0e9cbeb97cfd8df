#!/usr/bin/env python3
"""The notebooks' translations: gettext catalogues for the markdown cells, and the translated copies.

    python3 notebooks/i18n.py extract [LANG]   markdown of notebooks/0*.ipynb -> notebooks/po/messages.pot
                                               (generated, not committed), merged into
                                               notebooks/po/LANG.po (msgmerge; msginit if none)
    python3 notebooks/i18n.py coverage [LANG]  translated/total per notebook (from a fresh extraction,
                                               the PO file untouched); exits 1 on anything fuzzy or
                                               untranslated
    python3 notebooks/i18n.py build [LANG]     writes notebooks/LANG/0*.ipynb; refuses, naming them,
                                               when a message is untranslated or fuzzy
    python3 notebooks/i18n.py check [LANG]     coverage, then: the committed notebooks/LANG/ is exactly
                                               what build writes (CI runs this)

LANG defaults to zh-CN. Needs python3 (standard library) and GNU gettext (msgmerge, msginit,
msgfmt; Debian: apt-get install gettext).

One message per markdown block: the cell's text split at blank lines, so a paragraph, a heading,
a list item standing alone or a table is one message, and a code span, a link or an inline
formula is never cut. Fenced code blocks (```) inside a markdown cell are not messages (they are
copied as they are, like the code cells, which are never translated). The translated copy is the
English notebook with each markdown block replaced by its translation: same cells, same ids, same
code, same outputs. Only relative paths change, because the copy lives one folder deeper
(notebooks/LANG/): a markdown link `](../x)` becomes `](../../x)`, and a string literal "../x" in
a code cell (the `:dep` paths, fixture files) becomes "../../x", so the copy runs from its own
folder like the original (notebooks/run.sh LANG/01-device-management). Links between notebooks
(`](01-device-management.ipynb)`) stay as they are and so lead to the translated sibling.

The output is deterministic: the same sources and catalogue give the same bytes (JSON written as
nbformat writes it). Python's gettext module reads the catalogue (msgfmt compiles it first, which
also checks it); the PO reading and the markdown splitting are hand-written because no standard
module does either.
"""
import argparse
import gettext
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PO_DIR = NOTEBOOKS / "po"
FENCE = re.compile(r"^ {0,3}(```+|~~~+)")


def die(message):
    sys.exit(f"notebooks/i18n.py: {message}")


def sources():
    found = sorted(NOTEBOOKS.glob("0*.ipynb"))
    if not found:
        die(f"no notebooks/0*.ipynb under {NOTEBOOKS}")
    return found


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dumps(nb):
    """JSON as nbformat writes a notebook (so a copy differs from its source only where translated)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False, separators=(",", ": ")) + "\n"


def text_of(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def lines_of(text, like=None):
    """TEXT as a cell's source, stored as LIKE (the source it replaces) is: a string, or a list
    of lines each ending in \\n but the last (kept with an empty last item if LIKE has one)."""
    if isinstance(like, str):
        return text
    lines = text.splitlines(keepends=True)
    if like and like[-1] == "":
        lines.append("")
    return lines


def edges(text):
    """(leading blank lines, body, trailing whitespace) of a cell's text."""
    m = re.fullmatch(r"(\n*)(.*?)(\s*)", text, re.S)
    return m.group(1), m.group(2), m.group(3)


def blocks(text):
    """The cell's markdown as [(is_message, text)], in order; joined with blank lines it is TEXT.

    A block is a run of non-blank lines; a fenced code block (with any blank lines inside it) is a
    block of its own that is not a message. Returns None when TEXT does not split cleanly (a
    fence never closed, or spacing other than single blank lines), so that the caller refuses
    rather than writes a cell that differs from its source in more than its words.
    """
    out, current, lines = [], [], text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence and not current:
            marker = fence.group(1)
            end = i + 1
            while end < len(lines) and not lines[end].lstrip(" ").startswith(marker):
                end += 1
            if end == len(lines):
                return None
            out.append((False, "\n".join(lines[i : end + 1])))
            i = end + 1
            continue
        if line.strip():
            current.append(line)
        elif current:
            out.append((True, "\n".join(current)))
            current = []
        i += 1
    if current:
        out.append((True, "\n".join(current)))
    if "\n\n".join(b for _, b in out) != text:
        return None
    return out


def messages(paths):
    """[(msgid, [references])] in order of first appearance, over every markdown cell."""
    found = {}
    for path in paths:
        for k, cell in enumerate(load(path)["cells"], 1):
            if cell["cell_type"] != "markdown":
                continue
            split = blocks(edges(text_of(cell))[1])
            where = f"notebooks/{path.name}:{cell.get('id', k)}"
            if split is None:
                die(f"{where}: the markdown cell does not split into blocks (an unclosed ``` "
                    "fence, or two blank lines in a row); fix the cell")
            for is_message, block in split:
                if is_message:
                    found.setdefault(block, []).append(where)
    return list(found.items())


def po_quote(text):
    """A PO string (one line per source line, as msgmerge writes long ones)."""
    esc = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    parts = esc.split("\n")
    if len(parts) == 1:
        return f'"{parts[0]}"'
    pieces = [p + "\\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return '""\n' + "\n".join(f'"{p}"' for p in pieces)


def write_pot(path, found):
    out = io.StringIO()
    out.write('msgid ""\nmsgstr ""\n'
              '"Project-Id-Version: workbook notebooks\\n"\n'
              '"MIME-Version: 1.0\\n"\n'
              '"Content-Type: text/plain; charset=UTF-8\\n"\n'
              '"Content-Transfer-Encoding: 8bit\\n"\n')
    for msgid, refs in found:
        out.write("\n")
        for ref in refs:
            out.write(f"#: {ref}\n")
        out.write(f"msgid {po_quote(msgid)}\nmsgstr \"\"\n")
    write_atomically(path, out.getvalue())


def write_atomically(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a notebook is readable by all
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run(*args):
    try:
        done = subprocess.run(args, capture_output=True, text=True)
    except FileNotFoundError:
        die(f"{args[0]} is not installed (GNU gettext; Debian: apt-get install gettext)")
    if done.returncode != 0:
        die(f"{' '.join(map(str, args))} failed:\n{done.stderr.strip()}")
    return done


def merge(pot, po, lang, out):
    if po.exists():
        run("msgmerge", "--quiet", "--previous", f"--lang={lang}", f"--output-file={out}", po, pot)
    else:
        run("msginit", "--no-translator", f"--locale={lang}", f"--input={pot}",
            f"--output-file={out}")


def po_entries(path):
    """[(msgid, msgstr, fuzzy)] of the live (non-obsolete) messages of a PO file, header excluded."""
    entries, entry, key, fuzzy = [], {}, None, False

    def flush():
        if "msgid" in entry and entry["msgid"]:
            entries.append((entry["msgid"], entry.get("msgstr", ""), fuzzy))

    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line:
                flush()
                entry, key, fuzzy = {}, None, False
            elif line.startswith("#,"):
                fuzzy = fuzzy or "fuzzy" in line
            elif line.startswith("#"):
                continue
            elif line.startswith('"'):
                if key:
                    entry[key] += unquote(line[1:-1])
            else:
                key, _, rest = line.partition(" ")
                entry[key] = unquote(rest.strip()[1:-1])
    flush()
    return entries


def unquote(text):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def cmd_extract(lang):
    found = messages(sources())
    pot = PO_DIR / "messages.pot"
    write_pot(pot, found)
    po = PO_DIR / f"{lang}.po"
    with tempfile.TemporaryDirectory() as scratch:
        merged = pathlib.Path(scratch) / f"{lang}.po"
        merge(pot, po, lang, merged)
        write_atomically(po, merged.read_text(encoding="utf-8"))
    print(f"notebooks/po/messages.pot: {len(found)} messages; notebooks/po/{lang}.po merged")
    return cmd_coverage(lang, fail=False)


def cmd_coverage(lang, fail=True):
    po = PO_DIR / f"{lang}.po"
    paths = sources()
    found = messages(paths)
    with tempfile.TemporaryDirectory() as scratch:
        pot = pathlib.Path(scratch) / "messages.pot"
        merged = pathlib.Path(scratch) / f"{lang}.po"
        write_pot(pot, found)
        merge(pot, po, lang, merged)
        run("msgfmt", "--check", "--output-file=/dev/null", merged)
        state = {msgid: ("fuzzy" if fuzzy else "ok" if msgstr else "untranslated")
                 for msgid, msgstr, fuzzy in po_entries(merged)}
    done = sum(1 for m, _ in found if state.get(m) == "ok")
    fuzzy = sum(1 for m, _ in found if state.get(m) == "fuzzy")
    total = len(found)
    print(f"notebooks {lang}: {done}/{total} messages translated "
          f"({100 * done / total if total else 100:.1f}%), {fuzzy} fuzzy, "
          f"{total - done - fuzzy} untranslated")
    for path in paths:
        mine = [m for m, refs in found if any(r.startswith(f"notebooks/{path.name}:") for r in refs)]
        ok = sum(1 for m in mine if state.get(m) == "ok")
        fz = sum(1 for m in mine if state.get(m) == "fuzzy")
        print(f"  {path.name:40} {ok:4}/{len(mine):<4} translated, {fz} fuzzy")
    if fail and done < total:
        die(f"{lang} is not complete: translate the untranslated messages and review the fuzzy ones "
            f"in notebooks/po/{lang}.po (python3 notebooks/i18n.py extract {lang} merges the "
            "English changes in first)")
    return 0


def catalogue(lang):
    """The translations of LANG (msgfmt compiles and checks the PO file; fuzzy ones are left out)."""
    po = PO_DIR / f"{lang}.po"
    if not po.exists():
        die(f"notebooks/po/{lang}.po does not exist: run python3 notebooks/i18n.py extract {lang}")
    with tempfile.TemporaryDirectory() as scratch:
        mo = pathlib.Path(scratch) / f"{lang}.mo"
        run("msgfmt", "--check", f"--output-file={mo}", po)
        with open(mo, "rb") as f:
            translations = gettext.GNUTranslations(f)
    fuzzy = {msgid for msgid, _, is_fuzzy in po_entries(po) if is_fuzzy}
    return translations, fuzzy


PARENT_LINK = re.compile(r"\]\(\.\./")
PARENT_STRING = re.compile(r'"\.\./')


def translate_notebook(nb, translations, fuzzy, where):
    """A deep copy of NB with its markdown translated; (copy, [problems])."""
    nb = json.loads(json.dumps(nb))
    problems = []
    for k, cell in enumerate(nb["cells"], 1):
        ref = f"{where}:{cell.get('id', k)}"
        if cell["cell_type"] == "markdown":
            head, body, tail = edges(text_of(cell))
            split = blocks(body)
            if split is None:
                problems.append(f"{ref}: the markdown cell does not split into blocks")
                continue
            out = []
            for is_message, block in split:
                if not is_message:
                    out.append(block)
                    continue
                translated = translations._catalog.get(block)
                if translated is None:
                    state = "fuzzy" if block in fuzzy else "untranslated"
                    first = block.splitlines()[0]
                    problems.append(f"{ref}: {state}: {first[:70]!r}")
                    continue
                out.append(translated)
            text = head + "\n\n".join(out) + tail
            cell["source"] = lines_of(PARENT_LINK.sub("](../../", text), cell["source"])
        elif cell["cell_type"] == "code":
            text = PARENT_STRING.sub('"../../', text_of(cell))
            cell["source"] = lines_of(text, cell["source"])
    return nb, problems


def generated(lang):
    """{path: text} of every translated notebook; dies naming every missing or fuzzy message."""
    translations, fuzzy = catalogue(lang)
    out, problems = {}, []
    for path in sources():
        nb, found = translate_notebook(load(path), translations, fuzzy, f"notebooks/{path.name}")
        problems += found
        nb["metadata"]["workbook_translation"] = {
            "language": lang,
            "source": f"../{path.name}",
            "generated_by": f"python3 notebooks/i18n.py build {lang}: do not edit; edit the "
                            f"English notebook and notebooks/po/{lang}.po",
        }
        out[NOTEBOOKS / lang / path.name] = dumps(nb)
    if problems:
        listed = "\n  ".join(problems)
        die(f"{len(problems)} message(s) of notebooks/po/{lang}.po not usable, nothing written:\n"
            f"  {listed}\ntranslate them (and remove their '#, fuzzy' line), then build again")
    return out


def cmd_build(lang):
    out = generated(lang)
    for path, text in out.items():
        write_atomically(path, text)
    for stale in sorted((NOTEBOOKS / lang).glob("*.ipynb")):
        if stale not in out:
            stale.unlink()
            print(f"removed {stale.relative_to(ROOT)} (no English notebook of that name)")
    print(f"wrote {len(out)} notebook(s) to notebooks/{lang}/")
    return 0


def cmd_check(lang):
    cmd_coverage(lang)
    out = generated(lang)
    problems = []
    for path, text in out.items():
        rel = path.relative_to(ROOT)
        if not path.exists():
            problems.append(f"{rel} is missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{rel} is out of date")
    for extra in sorted((NOTEBOOKS / lang).glob("*.ipynb")):
        if extra not in out:
            problems.append(f"{extra.relative_to(ROOT)} has no English notebook")
    if problems:
        die("\n  ".join(["the translated notebooks are not what build writes:", *problems])
            + f"\nrun python3 notebooks/i18n.py build {lang} and commit notebooks/{lang}/")
    print(f"notebooks/{lang}/: {len(out)} notebook(s), up to date")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:13]))
    parser.add_argument("command", choices=["extract", "coverage", "build", "check"])
    parser.add_argument("lang", nargs="?", default="zh-CN")
    args = parser.parse_args()
    if args.lang == "en" or not re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z0-9]+)*", args.lang):
        die(f"'{args.lang}' is not a translation's language code (zh-CN, ja, ...)")
    return {"extract": cmd_extract, "coverage": cmd_coverage, "build": cmd_build,
            "check": cmd_check}[args.command](args.lang)


if __name__ == "__main__":
    sys.exit(main())
