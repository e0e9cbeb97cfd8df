#!/usr/bin/env python3
"""Open every chapter of the built book in headless Chromium and check that it renders.

Usage: python3 book/check_render.py --screenshots DIR [--book-dir book/build] [--chromium chromium]

For each page listed in book/src/SUMMARY.md, opened from disk (file://):
  * the page's heading (<main> h1) and <title> carry the chapter's title (the first `# ` line of
    its markdown);
  * every <img> on the page loaded (complete, naturalWidth > 0), and every figure the chapter's
    markdown shows (`![...](figures/...)`) is among them;
  * every relative link in the chapter's text resolves to a file or folder on disk (links to
    notebooks/ and exercises/ included; a linked folder must hold a README.md);
  * a full-page PNG screenshot is saved as DIR/<page>.png.

Every failure is reported with its page (and image or link); the exit status is 1 if any check
failed. Standard library only: Chromium is driven over the DevTools protocol on a pipe
(--remote-debugging-pipe), so neither chromedriver nor selenium is needed. No network: every
host name fails to resolve (--host-resolver-rules), so an offline machine behaves the same.
"""
import argparse
import base64
import fcntl
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
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: external scripts (MathJax) fail at once
    f"--window-size={WIDTH},{HEIGHT}",
    "--remote-debugging-pipe",
]

# Waits for every image to finish (load or error), then reports what the page shows.
PAGE_REPORT_JS = """
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null
      : new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  const main = document.querySelector('main');
  const h1 = main && main.querySelector('h1');
  return JSON.stringify({
    title: document.title,
    h1: h1 ? h1.textContent.trim() : null,
    text_length: main ? main.innerText.length : 0,
    images: imgs.map(i => ({src: i.getAttribute('src'), url: i.currentSrc || i.src,
                            complete: i.complete, width: i.naturalWidth})),
    links: main ? Array.from(main.querySelectorAll('a[href]')).map(
        a => ({href: a.getAttribute('href'), url: a.href})) : [],
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


def chapters(src):
    """(markdown file, expected title, expected figures) for each page in SUMMARY.md."""
    with open(os.path.join(src, "SUMMARY.md")) as f:
        files = re.findall(r"\]\(([^)]+\.md)\)", f.read())
    out = []
    for name in files:
        with open(os.path.join(src, name)) as f:
            text = f.read()
        title = next(line[2:].strip() for line in text.splitlines() if line.startswith("# "))
        figures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
        out.append((name, title, figures))
    return out


def local_path(url):
    """The file a file:// URL points to, without query or fragment; None for other schemes."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return urllib.request.url2pathname(parts.path)


def check_page(browser, book_dir, name, title, figures, screenshots):
    page = name[:-3] + ".html"
    path = os.path.join(book_dir, page)
    if not os.path.isfile(path):
        return [f"{page}: not in the built book ({path}); run mdbook build book"], page
    browser.open("file://" + urllib.request.pathname2url(os.path.abspath(path)))
    report = json.loads(browser.evaluate(PAGE_REPORT_JS))
    problems = []
    if report["h1"] != title:
        problems.append(f"{page}: heading is {report['h1']!r}, expected {title!r}")
    if title not in report["title"]:
        problems.append(f"{page}: <title> is {report['title']!r}, expected it to contain {title!r}")
    if report["text_length"] < 200:
        problems.append(f"{page}: the page body is almost empty ({report['text_length']} characters)")
    for img in report["images"]:
        if not img["complete"] or img["width"] == 0:
            problems.append(f"{page}: image {img['src']!r} did not load ({img['url']})")
    shown = {img["src"] for img in report["images"]}
    for fig in figures:
        if fig not in shown:
            problems.append(f"{page}: figure {fig!r} from {name} is not on the page")
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
    shot = os.path.join(screenshots, page[:-5] + ".png")
    browser.screenshot(shot)
    loaded = sum(1 for img in report["images"] if img["complete"] and img["width"] > 0)
    print(
        f"{'ok  ' if not problems else 'FAIL'} {page}: {report['h1']!r}, "
        f"{loaded}/{len(report['images'])} image(s) loaded ({len(figures)} figure(s) expected), "
        f"{links} local link(s) checked, screenshot {shot}"
    )
    return problems, page


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book-dir", default=os.path.join(HERE, "build"), help="the built HTML")
    parser.add_argument("--src", default=os.path.join(HERE, "src"), help="the book's sources")
    parser.add_argument("--screenshots", required=True, help="folder for one PNG per page")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "chromium"))
    parser.add_argument("--timeout", type=float, default=60, help="seconds per browser command")
    args = parser.parse_args()

    binary = shutil.which(args.chromium)
    if not binary:
        sys.exit(f"check_render: {args.chromium} not found (Debian: apt-get install -y chromium)")
    os.makedirs(args.screenshots, exist_ok=True)
    pages = chapters(args.src)
    start = time.monotonic()
    browser = Chromium(binary, args.timeout)
    problems = []
    try:
        for name, title, figures in pages:
            try:
                found, _ = check_page(browser, args.book_dir, name, title, figures, args.screenshots)
            except (RuntimeError, TimeoutError) as e:
                found = [f"{name[:-3]}.html: {e}"]
                print(f"FAIL {name[:-3]}.html: {e}")
            problems += found
    finally:
        browser.close()
    print(f"{len(pages)} page(s) checked in {time.monotonic() - start:.1f} s")
    problems = list(dict.fromkeys(problems))  # mdbook renders each image twice (zoom)
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
