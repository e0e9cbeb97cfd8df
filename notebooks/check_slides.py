#!/usr/bin/env python3
"""Opens every slide deck of notebooks/slides.sh in headless Chromium, offline, and checks it.

Usage: python3 notebooks/check_slides.py [--slides-dir target/slides] [--screenshots DIR]
                                         [--chromium chromium] [--lang zh-CN]

For each notebook (notebooks/0*.ipynb, or notebooks/LANG/ with --lang), its deck
(SLIDES_DIR/NAME.slides.html, or SLIDES_DIR/LANG/) is opened from disk with the network off
(host names do not resolve, DevTools' network emulation is offline: book/check_render.py's
Chromium, reused here), and:
  * nothing is requested from the network (only file:, data:, blob: URLs) and every file the
    deck asks for (reveal.js, its themes and fonts, the notes plugin) loads; no script error;
  * reveal.js started, and the deck has exactly one slide per cell whose slide type opens one
    (`slide` or `subslide`, notebooks/slide_types.py): every failure on a slide of its own;
  * the title slide shows the notebook's title (its first `# ` line);
  * every figure of the notebook (an output with an <svg>) is in the deck (an inline <svg>, or
    an <img>), and, moved to (and scrolled to, on a slide taller than the window), its slide
    shows it: drawn, of non-zero size, inside the window;
  * every relative link of the deck reaches a file on disk (slides.sh points the notebooks'
    links at the repository);
  * a screenshot of the title slide and of each figure's slide: DIR/NAME-title.png,
    DIR/NAME-figure-K.png.
The exit status is 1 if any check failed, each failure naming its deck. Standard library only.
"""
import argparse
import json
import os
import shutil
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "book"))
from check_render import Chromium, file_url, local_path, request_problems  # noqa: E402

# A figure of a notebook in its deck: an inline <svg> output (text/html), or an <img> (nbconvert
# writes an image/svg+xml output as an <img> with a data: URL).
FIGURES_JS = r"""
window.deckFigures = () => Array.from(document.querySelectorAll(
    '.reveal .slides .jp-OutputArea-output svg, .reveal .slides .jp-OutputArea-output img'))
  .filter(e => !e.parentElement.closest('svg'));
"""

# Waits (up to 15 s) for reveal.js to be ready, then reports the deck.
DECK_JS = FIGURES_JS + r"""
(async () => {
  for (let i = 0; i < 150 && !(window.Reveal && Reveal.isReady && Reveal.isReady()); i++) {
    await new Promise(r => setTimeout(r, 100));
  }
  if (!(window.Reveal && Reveal.isReady && Reveal.isReady())) {
    return JSON.stringify({ready: false, reveal: !!window.Reveal});
  }
  await document.fonts.ready;
  const slides = Reveal.getSlides();
  const figures = deckFigures();
  return JSON.stringify({
    ready: true,
    total: Reveal.getTotalSlides(),
    slides: slides.length,
    title: (slides[0] && slides[0].querySelector('h1')) ? slides[0].querySelector('h1').textContent.trim() : null,
    figures: figures.map(e => Reveal.getIndices(e.closest('section'))),
    links: Array.from(document.querySelectorAll('.reveal a[href]')).map(a => a.href),
    fonts_failed: Array.from(document.fonts).filter(f => f.status === 'error').map(f => f.family),
  });
})()
"""

# Moves to the slide at (h, v) and reports the K-th figure's box and the window.
FIGURE_JS = FIGURES_JS + r"""
(async (h, v, k) => {
  Reveal.slide(h, v);
  await new Promise(r => setTimeout(r, 1200));  // the transition
  const figure = deckFigures()[k];
  // A slide taller than the window scrolls (notebooks/slides/index.html.j2): the presenter
  // scrolls down to the figure.
  figure.scrollIntoView({block: 'nearest'});
  await new Promise(r => setTimeout(r, 200));
  const box = figure.getBoundingClientRect();
  return JSON.stringify({
    present: figure.closest('section').classList.contains('present'),
    box: {left: box.left, top: box.top, width: box.width, height: box.height},
    // what it draws: an inline SVG's marks, or an image's decoded width
    marks: figure.tagName === 'IMG' ? (figure.complete ? figure.naturalWidth : 0)
        : figure.querySelectorAll('line, path, polyline, polygon, rect, circle, text').length,
    window: [window.innerWidth, window.innerHeight],
    visibility: getComputedStyle(figure).visibility,
  });
})
"""


def notebook_facts(path):
    """(title, slides expected, figures) of a notebook."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    title, slides, figures = None, 0, 0
    for cell in nb["cells"]:
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        slides += kind in ("slide", "subslide")
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if title is None and cell["cell_type"] == "markdown":
            title = next((line[2:].strip() for line in source.splitlines()
                          if line.startswith("# ")), None)
        for out in cell.get("outputs", []):
            if any("<svg" in str(v) for v in out.get("data", {}).values()):
                figures += 1
    return title, slides, figures


def exceptions(events):
    return [e["params"]["exceptionDetails"].get("exception", {}).get("description")
            or e["params"]["exceptionDetails"].get("text")
            for e in events if e.get("method") == "Runtime.exceptionThrown"]


def check_deck(browser, notebook, deck, screenshots):
    name = os.path.basename(deck)
    problems = []
    if not os.path.isfile(deck):
        return [f"{deck}: no deck (run notebooks/slides.sh)"]
    title, expected, figures = notebook_facts(notebook)
    if expected == 0:
        problems.append(f"{notebook}: no cell opens a slide (run notebooks/slide_types.py)")
    browser.open(file_url(deck))
    report = json.loads(browser.evaluate(DECK_JS))
    events = browser.drain_events()
    found, requests = request_problems(name, events)
    problems += found
    problems += [f"{name}: script error: {e}" for e in exceptions(events)]
    if not report["ready"]:
        return problems + [f"{name}: reveal.js did not start (loaded: {report['reveal']})"]
    if report["total"] != expected:
        problems.append(f"{name}: {report['total']} slides, but the notebook's slide types open "
                        f"{expected}")
    shown_title = (report["title"] or "").rstrip("¶").strip()  # nbconvert's anchor link
    if title and shown_title != title:
        problems.append(f"{name}: the first slide's title is {shown_title!r}, not {title!r}")
    problems += [f"{name}: font {f} failed to load" for f in report["fonts_failed"]]
    for url in report["links"]:
        path = local_path(url)
        if path is not None and not os.path.exists(path):
            problems.append(f"{name}: the link {url} leads to nothing on disk")
    stem = name.removesuffix(".slides.html")
    browser.screenshot(os.path.join(screenshots, f"{stem}-title.png"))
    if len(report["figures"]) != figures or figures == 0:
        problems.append(f"{name}: {len(report['figures'])} figure(s) in the deck, "
                        f"{figures} in the notebook (each notebook draws at least one)")
    for k, at in enumerate(report["figures"]):
        shown = json.loads(browser.evaluate(f"{FIGURE_JS}({at['h']}, {at.get('v') or 0}, {k})"))
        box, (width, height) = shown["box"], shown["window"]
        inside = (box["width"] > 50 and box["height"] > 50 and box["left"] >= -1
                  and box["left"] + box["width"] <= width + 1
                  and box["top"] >= -1 and box["top"] + min(box["height"], height) <= height + 1)
        if not shown["present"] or not inside or shown["marks"] == 0 \
                or shown["visibility"] != "visible":
            problems.append(f"{name}: figure {k + 1} is not shown on its slide "
                            f"({at['h']}/{at.get('v') or 0}): {shown}")
        browser.screenshot(os.path.join(screenshots, f"{stem}-figure-{k + 1}.png"))
    found, _ = request_problems(name, browser.drain_events())
    problems += found
    print(f"{name}: {report['total']} slides, {len(report['figures'])} figure(s) shown, "
          f"{requests} file(s) loaded, none from the network"
          + ("" if not problems else f"; {len(problems)} problem(s)"), flush=True)
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides-dir", default=os.path.join(ROOT, "target", "slides"))
    parser.add_argument("--screenshots", default=os.path.join(ROOT, "target", "slides-screenshots"))
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--lang", default=None, help="check the decks of notebooks/LANG/")
    args = parser.parse_args()
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    if not chromium:
        sys.exit("check_slides: no Chromium found (--chromium PATH)")
    source = os.path.join(HERE, args.lang) if args.lang else HERE
    decks = os.path.join(args.slides_dir, args.lang) if args.lang else args.slides_dir
    screenshots = os.path.join(args.screenshots, args.lang) if args.lang else args.screenshots
    os.makedirs(screenshots, exist_ok=True)
    notebooks = sorted(n for n in os.listdir(source) if n.startswith("0") and n.endswith(".ipynb"))
    if not notebooks:
        sys.exit(f"check_slides: no notebooks in {source}")
    browser = Chromium(chromium, timeout=60)
    problems = []
    start = time.monotonic()
    try:
        for nb in notebooks:
            deck = os.path.join(decks, nb.removesuffix(".ipynb") + ".slides.html")
            problems += check_deck(browser, os.path.join(source, nb), deck, screenshots)
    finally:
        browser.close()
    if problems:
        print("\nFAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"{len(notebooks)} deck(s) render offline ({time.monotonic() - start:.0f} s); "
          f"screenshots in {screenshots}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
