#!/usr/bin/env python3
r"""Open every chapter of the built book in headless Chromium, offline, and check that it renders.

Usage: python3 book/check_render.py --screenshots DIR [--book-dir book/build] [--chromium chromium]
                                    [--po book/po/zh-CN.po] [--structure]

With --po (a translated book, built by book/i18n.sh), the titles checked below are the English
titles' translations from that PO file; a title with no translation there is a failure.

The network is off for every page: host names do not resolve (--host-resolver-rules) and the
DevTools network emulation is offline. For each page listed in book/src/SUMMARY.md, opened from
disk (file://):
  * nothing is requested from the network (only file:, data: and blob: URLs), and every file the
    page asks for (scripts, stylesheets, fonts, images, the search index) loads;
  * the page's heading (<main> h1) and <title> carry the chapter's title (the first `# ` line of
    its markdown, or its translation with --po);
  * formulas are rendered: every display formula of the chapter's markdown (`\\[ ... \\]`) is a
    KaTeX display on the page, KaTeX's stylesheet applies, no font failed to load, no KaTeX error,
    and the page's text outside code shows no TeX source (`\[`, `\(`, `$$`, `\frac`, `^{`...);
  * output blocks (```text: errors, ledgers, tables) do not scroll sideways (scrollWidth <=
    clientWidth); on chapter 1, the first line of generated/ch01_mismatch.txt (the named error,
    its culprit and its fix) lies inside its block and inside the viewport;
  * listings (```rust, ```python) keep their lines but do not scroll sideways either (they are
    at most 80 columns once dedented);
  * the sidebar is on screen and links every page of SUMMARY.md, the current one marked active;
  * every <img> on the page loaded (complete, naturalWidth > 0), and every figure the chapter's
    markdown shows (`![...](figures/...)`) is among them;
  * diagrams are drawn: every ```bob block of the chapter's markdown (a diagram, drawn at build
    time by book/svgbob.py) is a <figure class="diagram"> holding an inline <svg> with a
    non-zero size on the page, with lines and text in it, no wider than the text column and
    drawn in the theme's text colour; no ```bob block is left as code or as text;
  * every relative link in the chapter's text resolves to a file or folder on disk (links to
    notebooks/ and exercises/ included; a linked folder must hold a README.md), and a link with a
    #fragment into the built book (`#x` on the same page, `page.html#x` on another) reaches an
    element with that id in the built page: a heading's slug (in a translated edition, the
    translated heading's), an explicit `{#id}` or an HTML id;
  * with --structure (issue 43's page structure; crates/workbook/tests/book/pages.rs checks the
    markdown, this the page a learner sees), every page but the glossary shows under its title a
    reading-time line (an <em> paragraph with a number; in English "Reading time: about N
    minutes."), then a "Before you start" heading (its translation with --po) followed by a list
    with three bold labels ("Builds on:", "Rust you will meet:", "Afterwards you can:" in
    English), a "Key ideas" heading with 4 to 6 bullets and a "Check your understanding" heading
    with 3 to 5 questions, each answer in a <details> that starts closed;
  * a full-page PNG screenshot is saved as DIR/<page>.png.
  * speaker notes (issue 48): every page but the glossary has one block of them
    (<div class="speaker-notes">), last on the page and hidden.
Once per run, the presenter's toggle works on NOTES_PAGE: the notes are hidden on opening; a
click on the menu bar's button (its title in the edition's language) shows them, with their
label in that language; print media hides them; a reload keeps them shown (localStorage); the
`n` key hides them again. Screenshots: DIR/speaker-notes-hidden.png and
DIR/speaker-notes-shown.png, the end of the page without and with its notes.
Once per run, search works offline: the first page opened with `?search=WORD` loads the search
index from disk and lists results that lead to pages on disk, among them the page expected for
WORD (screenshot DIR/search.png).

Every failure is reported with its page (and image, link, block or request); the exit status is
1 if any check failed. Standard library only: Chromium is driven over the DevTools protocol on a
pipe (--remote-debugging-pipe), so neither chromedriver nor selenium is needed.
"""
import argparse
import base64
import fcntl
import html
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH, HEIGHT, MAX_HEIGHT = 1280, 900, 16000

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host name resolves
    "--no-proxy-server",
    f"--window-size={WIDTH},{HEIGHT}",
    "--remote-debugging-pipe",
]

# Waits for every image and font to finish (load or error), then reports what the page shows.
PAGE_REPORT_JS = r"""
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null
      : new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  await document.fonts.ready;
  const main = document.querySelector('main');
  const h1 = main && main.querySelector('h1');

  // The text a reader sees outside code, diagrams and KaTeX's own markup: TeX source there
  // means a formula was not rendered.
  const prose = [];
  if (main) {
    const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {
      acceptNode: n => n.parentElement.closest('pre, code, .katex, figure.diagram')
          ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    while (walker.nextNode()) prose.push(walker.currentNode.nodeValue);
  }

  const katex = main ? Array.from(main.querySelectorAll('.katex')) : [];
  const sidebar = document.querySelector('#mdbook-sidebar, #sidebar');
  const sidebarBox = sidebar ? sidebar.getBoundingClientRect() : null;
  const sidebarLinks = sidebar ? Array.from(sidebar.querySelectorAll('a[href]')) : [];
  return JSON.stringify({
    title: document.title,
    h1: h1 ? h1.textContent.trim() : null,
    text_length: main ? main.innerText.length : 0,
    images: imgs.map(i => ({src: i.getAttribute('src'), url: i.currentSrc || i.src,
                            complete: i.complete, width: i.naturalWidth})),
    links: main ? Array.from(main.querySelectorAll('a[href]')).map(
        a => ({href: a.getAttribute('href'), url: a.href})) : [],
    prose: prose.join(' '),
    katex_displays: main ? main.querySelectorAll('.katex-display').length : 0,
    katex_errors: main ? Array.from(main.querySelectorAll('.katex-error')).map(
        e => e.getAttribute('title') || e.textContent) : [],
    katex_font: katex.length ? getComputedStyle(katex[0]).fontFamily : null,
    fonts_failed: Array.from(document.fonts).filter(f => f.status === 'error').map(
        f => `${f.family} ${f.style} ${f.weight}`),
    fonts_loaded: Array.from(document.fonts).filter(f => f.status === 'loaded').map(f => f.family),
    output_blocks: Array.from(document.querySelectorAll('main pre > code.language-text')).map(
        c => ({start: c.textContent.slice(0, 70),
               code: [c.scrollWidth, c.clientWidth], pre: [c.parentElement.scrollWidth,
               c.parentElement.clientWidth]})),
    listing_blocks: Array.from(document.querySelectorAll(
        'main pre > code.language-rust, main pre > code.language-python')).map(
        c => ({start: c.textContent.slice(0, 70),
               code: [c.scrollWidth, c.clientWidth], pre: [c.parentElement.scrollWidth,
               c.parentElement.clientWidth]})),
    diagrams: main ? Array.from(main.querySelectorAll('figure.diagram')).map(f => {
      const svg = f.querySelector(':scope > svg');
      const box = svg ? svg.getBoundingClientRect() : null;
      const text = svg ? svg.querySelector('text') : null;
      return {svg: !!svg, width: box ? box.width : 0, height: box ? box.height : 0,
              column: f.parentElement.getBoundingClientRect().width,
              marks: svg ? svg.querySelectorAll('line, path, polyline, polygon, rect:not(.backdrop), circle').length : 0,
              texts: svg ? svg.querySelectorAll('text').length : 0,
              text_fill: text ? getComputedStyle(text).fill : null,
              start: svg ? Array.from(svg.querySelectorAll('text')).slice(0, 6)
                  .map(t => t.textContent).join(' ').slice(0, 40) : ''};
    }) : [],
    speaker_notes: main ? Array.from(main.querySelectorAll('.speaker-notes')).map(
        n => ({display: getComputedStyle(n).display, height: n.getBoundingClientRect().height,
               last: !n.nextElementSibling})) : [],
    page_fg: main ? getComputedStyle(main).color : null,
    bob_code: Array.from(document.querySelectorAll('main code.language-bob')).length,
    bob_text: main ? main.innerText.includes('```bob') : false,
    page_width: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
    sidebar: sidebarBox && {left: sidebarBox.left, right: sidebarBox.right,
                            width: sidebarBox.width, height: sidebarBox.height},
    sidebar_links: sidebarLinks.map(a => ({url: a.href, text: a.textContent.trim(),
                                           active: a.classList.contains('active')})),
    // What a learner sees of the page's structure (issue 43): the line under the title, the
    // second-level headings with what follows each up to the next one.
    after_title: h1 && h1.nextElementSibling ? {
        tag: h1.nextElementSibling.tagName,
        only_em: h1.nextElementSibling.children.length === 1
            && h1.nextElementSibling.children[0].tagName === 'EM'
            && h1.nextElementSibling.textContent.trim()
               === h1.nextElementSibling.children[0].textContent.trim(),
        text: h1.nextElementSibling.textContent.trim()} : null,
    sections: main ? Array.from(main.querySelectorAll('h2')).map(h => {
      const body = [];
      for (let e = h.nextElementSibling; e && e.tagName !== 'H2'; e = e.nextElementSibling) {
        body.push(e);
      }
      const lists = body.filter(e => e.tagName === 'UL' || e.tagName === 'OL');
      const items = lists.length ? Array.from(lists[0].querySelectorAll(':scope > li')) : [];
      return {
        heading: h.textContent.trim(),
        bullets: items.length,
        bold_labels: items.map(li => {
          const s = li.querySelector('strong');
          return s ? s.textContent.trim() : null;
        }),
        questions: body.filter(e => e.tagName === 'OL').reduce(
            (n, ol) => n + ol.querySelectorAll(':scope > li').length, 0),
        details: body.filter(e => e.tagName === 'DETAILS').length
            + body.reduce((n, e) => n + e.querySelectorAll('details').length, 0),
        details_open: body.filter(e => e.tagName === 'DETAILS' && e.open).length
            + body.reduce((n, e) => n + e.querySelectorAll('details[open]').length, 0),
      };
    }) : [],
  });
})()
"""

# Finds NEEDLE in an output block, scrolls it into view and reports the boxes its text occupies,
# the block's box and the viewport: the needle is readable if every box lies inside both.
VISIBLE_TEXT_JS = r"""
((needle) => {
  const blocks = Array.from(document.querySelectorAll('main pre > code'));
  const code = blocks.find(c => c.textContent.includes(needle));
  if (!code) return JSON.stringify({found: false});
  code.scrollIntoView({block: 'center', inline: 'nearest'});
  // The needle may span several text nodes (highlighting): map its offsets onto them.
  const start = code.textContent.indexOf(needle), end = start + needle.length;
  const range = document.createRange();
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  let offset = 0;
  while (walker.nextNode()) {
    const node = walker.currentNode, len = node.nodeValue.length;
    if (offset <= start && start <= offset + len) range.setStart(node, start - offset);
    if (offset <= end && end <= offset + len) { range.setEnd(node, end - offset); break; }
    offset += len;
  }
  const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  return JSON.stringify({
    found: true,
    rects: Array.from(range.getClientRects()).filter(r => r.width > 0).map(box),
    block: box(code.parentElement.getBoundingClientRect()),
    viewport: {left: 0, top: 0, right: document.documentElement.clientWidth,
               bottom: window.innerHeight},
    scroll: [code.parentElement.scrollWidth, code.parentElement.clientWidth,
             code.scrollWidth, code.clientWidth],
  });
})
"""

# The speaker notes and their toggle (issue 48; theme/speaker-notes.js): whether the notes show,
# the menu bar's button (its centre, to click it), the notes' label and what localStorage keeps.
NOTES_STATE_JS = r"""
((scrollToEnd) => {
  const notes = Array.from(document.querySelectorAll('main .speaker-notes'));
  const button = document.querySelector('#speaker-notes-toggle');
  const label = notes.length ? notes[0].querySelector('.speaker-notes-label') : null;
  let stored = null;
  try { stored = window.localStorage.getItem('gnn-workbook.speaker-notes'); } catch (e) {}
  // The end of the page, where the notes are (they come last); or the top, where the menu bar
  // shows for sure (mdbook hides it while scrolling down).
  window.scrollTo(0, scrollToEnd ? document.documentElement.scrollHeight : 0);
  const box = button ? button.getBoundingClientRect() : null;
  return JSON.stringify({
    lang: document.documentElement.lang,
    count: notes.length,
    shown: notes.filter(n => getComputedStyle(n).display !== 'none'
                             && n.getBoundingClientRect().height > 0).length,
    text: notes.length ? notes[0].innerText.trim().slice(0, 80) : '',
    label: label ? label.textContent.trim() : null,
    button: box && {x: box.left + box.width / 2, y: box.top + box.height / 2,
                    width: box.width, height: box.height, title: button.title,
                    pressed: button.getAttribute('aria-pressed'),
                    in_menu_bar: !!button.closest('#mdbook-menu-bar, .menu-bar')},
    stored: stored,
  });
})
"""

# After `?search=WORD`: waits (up to 10 s) for mdbook's search to load its index and list results.
SEARCH_RESULTS_JS = r"""
(async () => {
  const list = () => document.querySelector('#mdbook-searchresults, #searchresults');
  for (let i = 0; i < 100; i++) {
    const ul = list();
    if (ul && ul.querySelectorAll('li a[href]').length > 0) break;
    await new Promise(r => setTimeout(r, 100));
  }
  const ul = list();
  const header = document.querySelector('#mdbook-searchresults-header, #searchresults-header');
  return JSON.stringify({
    list: !!ul,
    header: header ? header.textContent.trim() : null,
    results: ul ? Array.from(ul.querySelectorAll('li a[href]')).map(a => a.href) : [],
    index_scripts: Array.from(document.scripts).map(s => s.src).filter(
        u => /searchindex/.test(u)),
  });
})()
"""


class Chromium:
    """A headless Chromium driven over the DevTools protocol on fds 3 and 4."""

    def __init__(self, binary, timeout):
        self.timeout = timeout
        self.next_id = 0
        self.buffer = b""
        self.events = []
        self.profile = tempfile.mkdtemp(prefix="check-render-profile-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Move the child's ends above 10 so that dup2 onto 3 and 4 cannot clobber them.
        child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def child_fds():
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            preexec_fn=child_fds,
            close_fds=False,
        )
        os.close(child_r)
        os.close(child_w)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        # Every request the page makes is recorded (Network.* events; check_page fails on any
        # that leaves the disk) and the network is off. Should a later Chromium drop this
        # emulation command, no host name resolves anyway (--host-resolver-rules).
        self.call("Network.enable", session=True)
        try:
            self.call(
                "Network.emulateNetworkConditions",
                {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
                session=True,
            )
        except RuntimeError as e:
            print(f"check_render: note: offline emulation unavailable ({e}); host names still "
                  "do not resolve")

    def chromium_log(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self.from_chrome], [], [], left)
            if ready:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium exited:\n" + self.chromium_log())
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for_event(self, method):
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, url):
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        self.events.clear()
        result = self.call("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise RuntimeError(f"cannot open {url}: {result['errorText']}")
        self.wait_for_event("Page.loadEventFired")

    def drain_events(self, quiet=0.3):
        """Reads events until none has come for QUIET seconds; returns and forgets them all."""
        while True:
            try:
                self.events.append(self._read_message(time.monotonic() + quiet))
            except TimeoutError:
                break
        events, self.events = self.events, []
        return events

    def evaluate(self, expression):
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"]["value"]

    def screenshot(self, path):
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        height = min(MAX_HEIGHT, max(HEIGHT, int(size["height"]) + 1))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        png = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def screenshot_viewport(self, path):
        """What the window shows now (WIDTH x HEIGHT), not the whole page."""
        png = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def click(self, x, y):
        """A left click at (x, y), in CSS pixels of the viewport, as a mouse makes it."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1},
                      session=True)

    def press(self, key, code, key_code):
        """A key typed on the page (keyDown with its text, then keyUp), as a keyboard makes it."""
        self.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "code": code,
                                             "text": key, "windowsVirtualKeyCode": key_code},
                  session=True)
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                             "windowsVirtualKeyCode": key_code}, session=True)

    def media(self, kind):
        """Emulates a CSS media type ("print"; "" for the screen again)."""
        self.call("Emulation.setEmulatedMedia", {"media": kind}, session=True)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)


# TeX source as it would show if a formula were not rendered: display or inline delimiters, a
# TeX command (a backslash and a word), or a sub- or superscript group.
TEX_SOURCE = re.compile(r"\\\[|\\\]|\\\(|\\\)|\$\$|\\[A-Za-z]{2,}|[_^]\{")

# The named error of chapter 1 (its first line: the culprit and the fix) must be readable without
# scrolling sideways, on the page that shows it (1.1).
CHAPTER1_PAGE = "01-1-device-mismatch.html"
CHAPTER1_ERROR = os.path.join("generated", "ch01_mismatch.txt")

# Search: this word must find this page (the transfer ledger is taught on page 2.1; its listings
# name it in both editions).
SEARCH_WORD, SEARCH_PAGE = "ledger", "02-1-copies-and-moves.html"

# URL schemes a page may load from without a network.
OFFLINE_SCHEMES = {"file", "data", "blob", "about"}


# A ```bob block (a diagram): its opening fence, in the chapter's markdown.
BOB_FENCE = re.compile(r"^ {0,3}(?:```+|~~~+)[ \t]*bob\b", re.MULTILINE)


def chapters(src):
    """(markdown file, title, figures, display formulas, diagrams) for each page in SUMMARY.md."""
    with open(os.path.join(src, "SUMMARY.md")) as f:
        files = re.findall(r"\]\(([^)]+\.md)\)", f.read())
    out = []
    for name in files:
        with open(os.path.join(src, name)) as f:
            text = f.read()
        title = next(line[2:].strip() for line in text.splitlines() if line.startswith("# "))
        figures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
        # Display math is written \\[ ... \\] (book.toml, [preprocessor.katex]).
        formulas = text.count("\\\\[")
        diagrams = len(BOB_FENCE.findall(text))
        out.append((name, title, figures, formulas, diagrams))
    return out


def po_unquote(text):
    """The string a PO file's quoted string stands for (C escapes)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b",
               "f": "\f", "v": "\v"}
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(escapes.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_po(path):
    """{msgid: msgstr} of the translated, non-fuzzy, non-obsolete messages of a PO file.

    Hand-written (the standard library reads only compiled .mo files): PO files written by
    msgmerge are simple, one keyword per line followed by quoted continuation lines.
    """
    catalogue = {}
    entry, key, fuzzy = {}, None, False

    def flush():
        if not fuzzy and entry.get("msgstr") and "msgid" in entry:
            catalogue[entry["msgid"]] = entry["msgstr"]

    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                flush()
                entry, key, fuzzy = {}, None, False
            elif line.startswith("#~"):
                continue  # obsolete
            elif line.startswith("#,"):
                fuzzy = fuzzy or "fuzzy" in line
            elif line.startswith("#"):
                continue
            elif line.startswith('"'):
                if key:
                    entry[key] += po_unquote(line[1:-1])
            else:
                key, _, rest = line.partition(" ")
                entry[key] = po_unquote(rest.strip()[1:-1])
    flush()
    return catalogue


def translate_titles(chapter_list, po):
    """CHAPTER_LIST with each title replaced by its translation from the PO file PO."""
    catalogue = read_po(po)
    out = []
    for name, title, figures, formulas, diagrams in chapter_list:
        if title not in catalogue:
            sys.exit(f"check_render: the title {title!r} of {name} has no translation in {po} "
                     "(book/i18n.sh coverage lists what is missing)")
        out.append((name, catalogue[title], figures, formulas, diagrams))
    return out


def local_path(url):
    """The file a file:// URL points to, without query or fragment; None for other schemes."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return urllib.request.url2pathname(parts.path)


def file_url(path):
    return "file://" + urllib.request.pathname2url(os.path.abspath(path))


def request_problems(page, events):
    """Every request that went to the network and every file that failed to load."""
    problems = []
    urls = {}
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            scheme = urllib.parse.urlsplit(url).scheme
            if scheme not in OFFLINE_SCHEMES:
                problems.append(f"{page}: requests {url[:120]} from the network")
        elif method == "Network.loadingFailed":
            url = urls.get(params["requestId"], "?")
            if urllib.parse.urlsplit(url).scheme in OFFLINE_SCHEMES:
                problems.append(f"{page}: {url} did not load ({params.get('errorText')})")
    return problems, len(urls)


def visible_problems(browser, page, needle, what):
    """NEEDLE, in an output block, lies inside its block and the viewport (no sideways scroll)."""
    report = json.loads(browser.evaluate(f"{VISIBLE_TEXT_JS}({json.dumps(needle)})"))
    if not report["found"]:
        return [f"{page}: {what} is not on the page ({needle[:60]!r}...)"]
    problems = []
    block, view = report["block"], report["viewport"]
    if not report["rects"]:
        problems.append(f"{page}: {what} takes no space on the page")
    for r in report["rects"]:
        inside_block = r["left"] >= block["left"] - 1 and r["right"] <= block["right"] + 1
        inside_view = (r["left"] >= view["left"] - 1 and r["right"] <= view["right"] + 1
                       and r["top"] >= view["top"] - 1 and r["bottom"] <= view["bottom"] + 1)
        if not (inside_block and inside_view):
            problems.append(
                f"{page}: {what} runs outside {'its block' if not inside_block else 'the window'}"
                f" (text box {r['left']:.0f}..{r['right']:.0f} px, block {block['left']:.0f}.."
                f"{block['right']:.0f} px, window 0..{view['right']:.0f} px): the reader must "
                "scroll sideways to read it"
            )
            break
    pre_sw, pre_cw, code_sw, code_cw = report["scroll"]
    if pre_sw > pre_cw + 1 or code_sw > code_cw + 1:
        wide, narrow = max(pre_sw, code_sw), min(pre_cw, code_cw)
        problems.append(f"{page}: the block with {what} scrolls sideways "
                        f"(scrollWidth {wide} > clientWidth {narrow})")
    return problems


# Issue 43's page structure (BOOK-CONVENTIONS), English texts; a translated edition compares the
# headings with their translations and counts the labels.
BEFORE, KEY_IDEAS, CHECK = "Before you start", "Key ideas", "Check your understanding"
LABELS = ["Builds on:", "Rust you will meet:", "Afterwards you can:"]
READING_TIME = re.compile(r"^Reading time: about \d+ minutes?\.$")
NO_STRUCTURE = {"glossary.md"}


def structure_problems(page, report, words):
    """The structure a learner sees (--structure); WORDS maps the English headings to this
    edition's."""
    problems = []
    first = report["after_title"]
    if not first or first["tag"] != "P" or not first["only_em"] or not re.search(r"\d", first["text"]):
        problems.append(f"{page}: no reading-time line (an emphasised paragraph with a number) "
                        f"right under the title (found {first})")
    elif words[BEFORE] == BEFORE and not READING_TIME.match(first["text"]):
        problems.append(f"{page}: the line under the title is {first['text']!r}, not "
                        "'Reading time: about N minutes.'")
    sections = report["sections"]
    heads = [s["heading"] for s in sections]
    if not heads or heads[0] != words[BEFORE]:
        problems.append(f"{page}: the first section is not {words[BEFORE]!r} (sections: {heads})")
    else:
        labels = [label for label in sections[0]["bold_labels"] if label]
        if len(labels) < 3 or (words[BEFORE] == BEFORE and labels[:3] != LABELS):
            problems.append(f"{page}: {words[BEFORE]!r} does not list the three bold labels "
                            f"{LABELS} (found {labels})")
    by_name = {s["heading"]: s for s in sections}
    key = by_name.get(words[KEY_IDEAS])
    if not key:
        problems.append(f"{page}: no {words[KEY_IDEAS]!r} section")
    elif not 4 <= key["bullets"] <= 6:
        problems.append(f"{page}: {words[KEY_IDEAS]!r} has {key['bullets']} bullet(s), not 4 to 6")
    check = by_name.get(words[CHECK])
    if not check:
        problems.append(f"{page}: no {words[CHECK]!r} section")
    else:
        if not 3 <= check["questions"] <= 5:
            problems.append(f"{page}: {words[CHECK]!r} has {check['questions']} question(s), "
                            "not 3 to 5")
        if check["details"] < check["questions"]:
            problems.append(f"{page}: {words[CHECK]!r} has {check['details']} collapsed answer(s) "
                            f"for {check['questions']} question(s)")
        if check["details_open"]:
            problems.append(f"{page}: {check['details_open']} answer(s) start open")
    return problems


ID_ATTRIBUTE = re.compile(r"""\bid=["']([^"']+)["']""")
_ids = {}


def ids_of(path):
    """The ids of the elements of a built page (cached)."""
    if path not in _ids:
        with open(path, encoding="utf-8") as f:
            _ids[path] = {html.unescape(i) for i in ID_ATTRIBUTE.findall(f.read())}
    return _ids[path]


def anchor_problems(page, path, book_dir, links):
    """Every #fragment link into the built book reaches an element with that id."""
    problems, checked = [], 0
    root = os.path.abspath(book_dir)
    for link in links:
        href = link["href"]
        if "#" not in href:
            continue
        fragment = urllib.parse.unquote(href.split("#", 1)[1])
        target = os.path.abspath(path) if href.startswith("#") else local_path(link["url"])
        if not fragment or target is None or not target.endswith(".html"):
            continue
        if not target.startswith(root + os.sep) or not os.path.isfile(target):
            continue  # outside the book, or a broken link (reported with the links)
        checked += 1
        if fragment not in ids_of(target):
            problems.append(f"{page}: link {href!r} names no element of "
                            f"{os.path.relpath(target, root)} (no id {fragment!r})")
    return problems, checked


def diagram_problems(page, name, expected, report):
    """What is wrong with the page's diagrams (```bob blocks drawn by book/svgbob.py)."""
    problems = []
    drawn = report["diagrams"]
    if len(drawn) < expected:
        problems.append(f"{page}: {expected} diagram(s) (```bob) in {name}, {len(drawn)} drawn "
                        "as <figure class=\"diagram\"> on the page")
    if report["bob_code"] or report["bob_text"]:
        problems.append(f"{page}: a ```bob block was not drawn: it shows as code or text "
                        "(is the svgbob preprocessor in book.toml, and did it run?)")
    for k, d in enumerate(drawn, 1):
        what = f"{page}: diagram {k} ({d['start']!r})"
        if not d["svg"]:
            problems.append(f"{what}: no inline <svg> in its figure")
        elif d["width"] < 1 or d["height"] < 1:
            problems.append(f"{what}: its <svg> has zero size ({d['width']} x {d['height']} px)")
        elif d["marks"] == 0 or d["texts"] == 0:
            problems.append(f"{what}: its <svg> is empty ({d['marks']} line(s) or shape(s), "
                            f"{d['texts']} text(s))")
        elif d["width"] > d["column"] + 1:
            problems.append(f"{what}: {d['width']:.0f} px wide, wider than the text column "
                            f"({d['column']:.0f} px)")
        elif d["text_fill"] != report["page_fg"]:
            problems.append(f"{what}: its text is drawn in {d['text_fill']}, not in the "
                            f"theme's text colour {report['page_fg']} (var(--fg))")
    return problems


def check_page(browser, book_dir, src, chapter, pages, screenshots, structure=None):
    name, title, figures, formulas, diagrams = chapter
    page = name[:-3] + ".html"
    path = os.path.join(book_dir, page)
    if not os.path.isfile(path):
        return [f"{page}: not in the built book ({path}); run mdbook build book"]
    browser.open(file_url(path))
    report = json.loads(browser.evaluate(PAGE_REPORT_JS))
    problems = []
    # A title's code span (`.pt`) shows as plain text in the heading and in <title>.
    title = title.replace("`", "")
    if report["h1"] != title:
        problems.append(f"{page}: heading is {report['h1']!r}, expected {title!r}")
    if title not in report["title"]:
        problems.append(f"{page}: <title> is {report['title']!r}, expected it to contain {title!r}")
    if report["text_length"] < 200:
        problems.append(f"{page}: the page body is almost empty ({report['text_length']} characters)")

    # Formulas: rendered by KaTeX at build time, styled by the vendored stylesheet and fonts.
    tex = list(TEX_SOURCE.finditer(report["prose"]))
    if tex:
        around = report["prose"][max(0, tex[0].start() - 30) : tex[0].end() + 40]
        around = " ".join(around.split())
        problems.append(f"{page}: TeX source shows in the text ({len(tex)} place(s)), "
                        f"first: ...{around}...")
    if report["katex_displays"] < formulas:
        problems.append(f"{page}: {formulas} display formula(s) in {name}, "
                        f"{report['katex_displays']} rendered by KaTeX")
    for error in report["katex_errors"]:
        problems.append(f"{page}: KaTeX error: {error}")
    if report["katex_font"] is not None and "KaTeX_Main" not in report["katex_font"]:
        problems.append(f"{page}: KaTeX's stylesheet does not apply to the formulas "
                        f"(font-family {report['katex_font']!r}; is katex/katex.min.css there?)")
    if formulas and not any(f.startswith("KaTeX_") for f in report["fonts_loaded"]):
        problems.append(f"{page}: no KaTeX font loaded")
    for font in report["fonts_failed"]:
        problems.append(f"{page}: font {font} failed to load")

    # Output blocks wrap: none scrolls sideways, nor does the page.
    for block in report["output_blocks"]:
        (code_sw, code_cw), (pre_sw, pre_cw) = block["code"], block["pre"]
        if code_sw > code_cw + 1 or pre_sw > pre_cw + 1:
            wide, narrow = max(code_sw, pre_sw), min(code_cw, pre_cw)
            problems.append(f"{page}: output block {block['start']!r}... scrolls sideways "
                            f"(scrollWidth {wide} > clientWidth {narrow})")
    # Listings keep their lines (they do not wrap) but fit the code column: at most 80 columns
    # once dedented (crates/workbook/tests/book/main.rs checks the source), so nothing, least of
    # all the comment that maps a line to PyTorch, hides past the right edge.
    for block in report["listing_blocks"]:
        (code_sw, code_cw), (pre_sw, pre_cw) = block["code"], block["pre"]
        if code_sw > code_cw + 1 or pre_sw > pre_cw + 1:
            wide, narrow = max(code_sw, pre_sw), min(code_cw, pre_cw)
            problems.append(f"{page}: listing {block['start']!r}... scrolls sideways "
                            f"(scrollWidth {wide} > clientWidth {narrow})")
    doc_sw, doc_cw = report["page_width"]
    if doc_sw > doc_cw + 1:
        problems.append(f"{page}: the page scrolls sideways ({doc_sw} px wide, window {doc_cw} px)")

    # The sidebar is on screen and leads to every page, this one marked active.
    box = report["sidebar"]
    if not box or box["width"] < 100 or box["height"] < 100 or box["left"] < -1:
        problems.append(f"{page}: the sidebar is not on screen ({box})")
    linked = {local_path(a["url"]) for a in report["sidebar_links"]}
    for other in pages:
        if os.path.abspath(os.path.join(book_dir, other)) not in linked:
            problems.append(f"{page}: the sidebar has no link to {other}")
    active = [a["text"] for a in report["sidebar_links"] if a["active"]]
    if not any(local_path(a["url"]) == os.path.abspath(path)
               for a in report["sidebar_links"] if a["active"]):
        problems.append(f"{page}: the sidebar does not mark this page active (active: {active})")

    for img in report["images"]:
        if not img["complete"] or img["width"] == 0:
            problems.append(f"{page}: image {img['src']!r} did not load ({img['url']})")
    shown = {img["src"] for img in report["images"]}
    for fig in figures:
        if fig not in shown:
            problems.append(f"{page}: figure {fig!r} from {name} is not on the page")
    problems += diagram_problems(page, name, diagrams, report)
    links = 0
    for link in report["links"]:
        target = local_path(link["url"])
        if target is None or link["href"].startswith("#"):
            continue
        links += 1
        if not os.path.exists(target):
            problems.append(f"{page}: link {link['href']!r} is broken (no {target})")
        elif os.path.isdir(target) and not os.path.isfile(os.path.join(target, "README.md")):
            problems.append(f"{page}: link {link['href']!r} is a folder without README.md ({target})")

    # Speaker notes (issue 48): one block on every page but the glossary, last in the page, and
    # hidden from a reader who has not turned them on.
    notes = report["speaker_notes"]
    if name not in NO_STRUCTURE:
        if len(notes) != 1:
            problems.append(f"{page}: {len(notes)} block(s) of speaker notes "
                            "(<div class=\"speaker-notes\">), expected one")
        for block in notes:
            if block["display"] != "none" or block["height"] > 0:
                problems.append(f"{page}: the speaker notes show before the presenter turns "
                                f"them on (display {block['display']!r}, "
                                f"{block['height']:.0f} px high)")
            if not block["last"]:
                problems.append(f"{page}: the speaker notes are not the last thing on the page")

    found, anchors = anchor_problems(page, path, book_dir, report["links"])
    problems += found
    checks_structure = structure is not None and name not in NO_STRUCTURE
    if checks_structure:
        problems += structure_problems(page, report, structure)

    extra = ""
    if page == CHAPTER1_PAGE:
        with open(os.path.join(src, CHAPTER1_ERROR)) as f:
            error = f.readline().strip()
        found = visible_problems(browser, page, error, f"the named error of {CHAPTER1_ERROR}")
        problems += found
        extra = ", named error on screen" if not found else ""

    shot = os.path.join(screenshots, page[:-5] + ".png")
    browser.screenshot(shot)
    found, requests = request_problems(page, browser.drain_events())
    problems += found
    loaded = sum(1 for img in report["images"] if img["complete"] and img["width"] > 0)
    print(
        f"{'ok  ' if not problems else 'FAIL'} {page}: {report['h1']!r}, "
        f"{requests} request(s), all from disk; {report['katex_displays']} formula(s) "
        f"({formulas} expected); {len(report['output_blocks'])} output block(s){extra}; "
        f"{loaded}/{len(report['images'])} image(s) loaded ({len(figures)} figure(s) expected); "
        f"{len(report['diagrams'])} diagram(s) ({diagrams} expected); "
        f"{links} local link(s) and {anchors} anchor(s) checked"
        f"{'; structure checked' if checks_structure else ''}; screenshot {shot}"
    )
    return problems


# The toggle is checked on this page (notes hidden, shown by a click on the menu bar's button,
# remembered on reload, hidden again by the `n` key, never printed), with two screenshots.
NOTES_PAGE = "01-1-device-mismatch.html"
# The notes' label and the button's title start with these words in each edition
# (theme/speaker-notes.js); an edition missing here must at least not show the English words.
NOTES_LABEL = {"en": "Speaker notes", "zh-CN": "讲师备注"}


def check_notes(browser, book_dir, screenshots):
    """The presenter's toggle on NOTES_PAGE, driven as a presenter would: a click, a reload, a key."""
    page = NOTES_PAGE
    url = file_url(os.path.join(book_dir, page))
    problems = []

    def state(when, end=True):
        st = json.loads(browser.evaluate(f"{NOTES_STATE_JS}({'true' if end else 'false'})"))
        st["when"] = when
        return st

    browser.open(url)
    # A fresh profile: nothing remembered, the notes hidden.
    browser.evaluate("(() => { try { localStorage.removeItem('gnn-workbook.speaker-notes'); }"
                     " catch (e) {} return true; })()")
    browser.open(url)
    before = state("on opening the page")
    hidden_shot = os.path.join(screenshots, "speaker-notes-hidden.png")
    browser.screenshot_viewport(hidden_shot)
    if before["count"] != 1:
        problems.append(f"{page}: {before['count']} block(s) of speaker notes, expected one")
    if before["shown"]:
        problems.append(f"{page}: the speaker notes show {before['when']}, before any toggle")
    button = before["button"]
    if not button:
        problems.append(f"{page}: no speaker-notes button (#speaker-notes-toggle) in the menu bar")
        return problems
    if not button["in_menu_bar"] or button["width"] < 1 or button["height"] < 1:
        problems.append(f"{page}: the speaker-notes button is not on screen in the menu bar "
                        f"({button})")
    expected = NOTES_LABEL.get(before["lang"])
    if expected and not button["title"].startswith(expected):
        problems.append(f"{page}: the button's title is {button['title']!r}, expected it to "
                        f"start with {expected!r} (lang {before['lang']!r})")
    if not expected and button["title"].startswith(NOTES_LABEL["en"]):
        problems.append(f"{page}: the button's title is English ({button['title']!r}) in an "
                        f"edition in {before['lang']!r}: add its words to speaker-notes.js")

    # A click on the button, as a presenter makes it, from the top of the page.
    button = state("at the top of the page", end=False)["button"]
    time.sleep(0.3)  # let mdbook's menu bar settle after the scroll
    browser.click(button["x"], button["y"])
    shown = state("after a click on the button")
    if shown["shown"] != 1:
        problems.append(f"{page}: the speaker notes do not show {shown['when']}")
    if shown["button"] and shown["button"]["pressed"] != "true":
        problems.append(f"{page}: the button is not marked pressed (aria-pressed) "
                        f"{shown['when']}")
    if expected and not (shown["label"] or "").startswith(expected):
        problems.append(f"{page}: the notes' label is {shown['label']!r}, expected it to start "
                        f"with {expected!r}")
    shown_shot = os.path.join(screenshots, "speaker-notes-shown.png")
    browser.screenshot_viewport(shown_shot)
    # Never in a printed book, even with the notes on.
    browser.media("print")
    printed = state("in print")
    browser.media("")
    if printed["shown"]:
        problems.append(f"{page}: the speaker notes would be printed (print media shows them)")

    # Remembered: the next page load (the next page a presenter opens) shows them too.
    browser.open(url)
    again = state("after reloading the page")
    if again["shown"] != 1 or again["stored"] != "shown":
        problems.append(f"{page}: the toggle is not remembered: {again['when']}, notes shown "
                        f"{again['shown']}, localStorage {again['stored']!r}")

    # The keyboard: `n` hides them again (and forgets).
    browser.press("n", "KeyN", 78)
    off = state("after the key n")
    if off["shown"] or off["stored"] is not None:
        problems.append(f"{page}: the key n does not hide the speaker notes (shown "
                        f"{off['shown']}, localStorage {off['stored']!r})")
    found, requests = request_problems(page, browser.drain_events())
    problems += found
    print(
        f"{'ok  ' if not problems else 'FAIL'} speaker notes on {page}: hidden on opening, shown "
        f"by a click on {button['title']!r}, label {shown['label']!r}, not printed, remembered "
        f"on reload, hidden by n; {requests} request(s); screenshots {hidden_shot}, {shown_shot}"
    )
    return problems


def check_search(browser, book_dir, first_page, screenshots):
    """`?search=WORD` on the first page finds SEARCH_PAGE, offline, from the index on disk."""
    page = f"{first_page}?search={SEARCH_WORD}"
    browser.open(file_url(os.path.join(book_dir, first_page)) + f"?search={SEARCH_WORD}")
    report = json.loads(browser.evaluate(SEARCH_RESULTS_JS))
    shot = os.path.join(screenshots, "search.png")
    browser.screenshot(shot)
    problems, requests = request_problems(page, browser.drain_events())
    if not report["list"]:
        problems.append(f"{page}: the page has no search (mdbook's search is off?)")
    if not report["index_scripts"]:
        problems.append(f"{page}: the search index (searchindex.js) was not loaded")
    results = [local_path(url) for url in report["results"]]
    if not results:
        problems.append(f"{page}: searching {SEARCH_WORD!r} found nothing ({report['header']!r})")
    for url, target in zip(report["results"], results):
        if target is None or not os.path.isfile(target):
            problems.append(f"{page}: search result {url} leads to no file on disk")
    expected = os.path.abspath(os.path.join(book_dir, SEARCH_PAGE))
    if results and expected not in results:
        problems.append(f"{page}: searching {SEARCH_WORD!r} does not find {SEARCH_PAGE}")
    index = [os.path.basename(u) for u in report["index_scripts"]]
    print(
        f"{'ok  ' if not problems else 'FAIL'} search {SEARCH_WORD!r}: {report['header']!r}, "
        f"{len(results)} result(s) on disk, index {index}, "
        f"{requests} request(s), all from disk; screenshot {shot}"
    )
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book-dir", default=os.path.join(HERE, "build"), help="the built HTML")
    parser.add_argument("--src", default=os.path.join(HERE, "src"), help="the book's sources")
    parser.add_argument("--screenshots", required=True, help="folder for one PNG per page")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "chromium"))
    parser.add_argument("--timeout", type=float, default=60, help="seconds per browser command")
    parser.add_argument("--po", help="a translated book: compare the titles with their "
                        "translations in this PO file (book/po/zh-CN.po)")
    parser.add_argument("--structure", action="store_true", help="also check issue 43's page "
                        "structure (reading time, Before you start, Key ideas, questions)")
    args = parser.parse_args()

    binary = shutil.which(args.chromium)
    if not binary:
        sys.exit(f"check_render: {args.chromium} not found (Debian: apt-get install -y chromium)")
    os.makedirs(args.screenshots, exist_ok=True)
    chapter_list = chapters(args.src)
    structure = None
    if args.structure:
        catalogue = read_po(args.po) if args.po else {}
        structure = {w: catalogue.get(w, w) for w in (BEFORE, KEY_IDEAS, CHECK)}
    if args.po:
        chapter_list = translate_titles(chapter_list, args.po)
    pages = [name[:-3] + ".html" for name, *_ in chapter_list]
    start = time.monotonic()
    browser = Chromium(binary, args.timeout)
    problems = []
    try:
        for chapter in chapter_list:
            try:
                found = check_page(
                    browser, args.book_dir, args.src, chapter, pages, args.screenshots, structure
                )
            except (RuntimeError, TimeoutError) as e:
                found = [f"{chapter[0][:-3]}.html: {e}"]
                print(f"FAIL {chapter[0][:-3]}.html: {e}")
            problems += found
        try:
            problems += check_notes(browser, args.book_dir, args.screenshots)
        except (RuntimeError, TimeoutError) as e:
            problems.append(f"speaker notes: {e}")
            print(f"FAIL speaker notes: {e}")
        try:
            problems += check_search(browser, args.book_dir, pages[0], args.screenshots)
        except (RuntimeError, TimeoutError) as e:
            problems.append(f"search: {e}")
            print(f"FAIL search: {e}")
    finally:
        browser.close()
    print(f"{len(pages)} page(s) and search checked, offline, in {time.monotonic() - start:.1f} s")
    problems = list(dict.fromkeys(problems))  # mdbook renders each image twice (zoom)
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
