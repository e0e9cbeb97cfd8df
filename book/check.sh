#!/usr/bin/env bash
# Builds the book and checks it, as CI does (.ci/run). Needs no network.
#   0. the tests of book/svgbob.py (book/test_svgbob.py), which draws the ```bob diagrams, and of
#      book/schedule.py (book/test_schedule.py), which computes the course schedule;
#   1. `mdbook build book` (HTML in book/build/), formulas rendered to HTML by mdbook-katex,
#      diagrams to inline SVG by book/svgbob.py (svgbob_cli; the build fails without it);
#      fails if mdbook logs an error or a warning (mdbook only logs a missing {{#include}} file
#      and carries on; mdbook-katex logs a formula KaTeX cannot parse);
#   2. links, offline (no web requests), with mdbook-linkcheck2 on the book as rendered: every
#      link between chapters, every image, and every link to notebooks/ and exercises/ (a link
#      to a folder needs the folder's README.md);
#   3. rendering: book/check_render.py opens every page from disk in headless Chromium with the
#      network off, and checks that nothing is requested from the network, that formulas are
#      rendered (no TeX source shows), that every diagram is drawn (an inline SVG of non-zero
#      size, no ```bob left), that output blocks wrap (chapter 1's named error is
#      readable without scrolling sideways), the sidebar, search, titles, figures and links on
#      disk, the speaker notes (hidden on every page; on one page the presenter's toggle shows
#      them by a click and hides them by the key n); it saves one screenshot per page, and two of
#      the notes hidden and shown.
# Usage: book/check.sh [SCREENSHOT_DIR]      (default: target/book-screenshots)
# Needs: mdbook 0.5.3, mdbook-katex 0.10.0, mdbook-linkcheck2 0.13.0, svgbob_cli 0.7.6 (the
# diagrams, drawn by book/svgbob.py), chromium, python3 (standard library only).
#
# A translation (book/README.md, "Translations"):
#   book/check.sh --lang zh-CN [SCREENSHOT_DIR]    (default: target/book-screenshots-zh-CN)
# checks the translated book instead: the tests of book/i18n_protect.py, the coverage (every
# message translated, none fuzzy: an English change left untranslated fails), both editions
# built (book/build/ and book/build-zh-CN/), the links of the translated one, and the same
# rendering checks on it, its titles compared with their translations (check_render.py --po).
# It also needs mdbook-i18n-helpers 0.4.0 and GNU gettext, and a CJK font for readable
# screenshots (Debian: fonts-wqy-microhei).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--lang" ]; then
  lang=${2:?book/check.sh: --lang needs a language code (zh-CN)}
  shots=${3:-target/book-screenshots-$lang}
  [ -f "book/po/$lang.po" ] || { echo "book/check.sh: no book/po/$lang.po" >&2; exit 1; }
  echo "--- $lang: tests of book/i18n_protect.py"
  python3 book/test_i18n_protect.py
  echo "--- $lang: coverage (fails on a fuzzy or untranslated message)"
  book/i18n.sh coverage "$lang"
  echo "--- $lang: build (English and $lang)"
  book/i18n.sh build "$lang"
  echo "--- $lang: links, offline"
  book/i18n.sh links "$lang"
  echo "--- $lang: rendering: headless Chromium"
  if ! fc-list :lang=zh 2>/dev/null | grep -q .; then
    echo "book/check.sh: note: no Chinese font installed; the screenshots will show boxes" \
      "(Debian: apt-get install fonts-wqy-microhei)" >&2
  fi
  python3 book/check_render.py --structure --book-dir "book/build-$lang" --po "book/po/$lang.po" \
    --screenshots "$shots"
  exit 0
fi
shots=${1:-target/book-screenshots}

missing=0
for tool in "mdbook 0.5.3" "mdbook-katex 0.10.0" "mdbook-linkcheck2 0.13.0" "svgbob_cli 0.7.6"; do
  read -r name version <<<"$tool"
  if ! command -v "$name" >/dev/null; then
    echo "book/check.sh: $name is not installed (cargo install $name --locked --version $version)" >&2
    missing=1
  fi
done
[ "$missing" = 0 ] || exit 1

echo "--- tests of book/svgbob.py (the diagrams' preprocessor)"
python3 book/test_svgbob.py
echo "--- tests of book/schedule.py (the course schedule's preprocessor)"
python3 book/test_schedule.py

echo "--- mdbook build book"
if ! log=$(mdbook build book 2>&1); then
  echo "$log"
  exit 1
fi
echo "$log"
# mdbook-katex always colours its log and stamps the time: strip the colours, then look for the
# level. Any warning fails the build, among them "Rendering failed, keeping the original
# content" for a formula KaTeX cannot parse, and mdbook-katex's "built against mdbook v0.5.3,
# but we are being called from ..." when mdbook is not the 0.5.3 it was built against.
plain=$(sed -E 's/\x1b\[[0-9;]*m//g' <<<"$log")
if grep -Eq '^([0-9T:.-]+Z)? *(ERROR|WARN)' <<<"$plain"; then
  echo "book/check.sh: mdbook or a preprocessor logged errors or warnings (above)" >&2
  exit 1
fi

echo "--- links: mdbook-linkcheck2, offline"
# The link checker's settings are given here, for this run only, and not as an [output.linkcheck2]
# table in book.toml: a second [output.*] table moves the HTML one level down, to
# book/build/html/, and the chapters' links to ../../notebooks/ and ../../exercises/ (relative to
# book/src/, where the link checker resolves them) would then miss the repository root when the
# built book is opened from disk. This run's own HTML goes to a scratch folder.
start=$SECONDS
MDBOOK_OUTPUT__LINKCHECK2='{"follow-web-links": false, "traverse-parent-directories": true, "latex-support": true, "warning-policy": "error"}' \
  NO_COLOR=1 RUST_BACKTRACE=0 mdbook build book --dest-dir target/book-linkcheck
echo "links ok ($((SECONDS - start)) s)"

echo "--- rendering: headless Chromium"
python3 book/check_render.py --structure --book-dir book/build --screenshots "$shots"
