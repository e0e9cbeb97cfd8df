#!/usr/bin/env bash
# Builds the book and checks it, as CI does (.ci/run):
#   1. `mdbook build book` (HTML in book/build/); fails if mdbook logs an error or a warning
#      (mdbook only logs a missing {{#include}} file and carries on);
#   2. links, offline (no web requests), with mdbook-linkcheck2 on the book as rendered: every
#      link between chapters, every image, and every link to notebooks/ and exercises/ (a link
#      to a folder needs the folder's README.md);
#   3. rendering: book/check_render.py opens every page in headless Chromium, checks its title,
#      its figures and its links on disk, and saves one screenshot per page.
# Usage: book/check.sh [SCREENSHOT_DIR]      (default: target/book-screenshots)
# Needs: mdbook 0.5.4, mdbook-linkcheck2 0.13.0, chromium, python3 (standard library only).
set -euo pipefail
cd "$(dirname "$0")/.."
shots=${1:-target/book-screenshots}

echo "--- mdbook build book"
if ! log=$(mdbook build book 2>&1); then
  echo "$log"
  exit 1
fi
echo "$log"
if grep -Eq '^ *(ERROR|WARN)' <<<"$log"; then
  echo "book/check.sh: mdbook logged errors or warnings (above)" >&2
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
python3 book/check_render.py --book-dir book/build --screenshots "$shots"
