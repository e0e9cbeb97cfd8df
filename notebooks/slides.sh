#!/usr/bin/env bash
# Turns every notebook into a reveal.js slide deck that runs from disk, with no network:
#   target/slides/NN-name.slides.html            (from notebooks/NN-name.ipynb)
#   target/slides/zh-CN/NN-name.slides.html      (from notebooks/zh-CN/, with --lang zh-CN or --all)
#   target/slides/reveal.js/                     (reveal.js, beside the decks)
#
#   notebooks/slides.sh            # the seven English decks
#   notebooks/slides.sh --all      # and the Chinese ones
#
# Jupyter's own conversion (`jupyter nbconvert --to slides`), with the template in
# notebooks/slides/ (nbconvert's reveal template without its CDN scripts), in the Python of
# notebooks/run.sh (target/notebook-venv, nbconvert added). The decks show the committed outputs
# and figures: nothing is executed, so run notebooks/run.sh first for fresh ones. Each markdown
# cell starts a slide, so every failure is a slide and its fix the next one (the cells' slide
# types: notebooks/slide_types.py). reveal.js comes from the npm registry, at the version pinned
# below, installed once into target/reveal-npm/; `--reveal-prefix reveal.js` makes the decks
# load it from the copy beside them. Needs: python3, npm (Node 18 or later), and the network
# the first time only.
# Theme: reveal.js's white, whose fonts are in the copy (nbconvert's default, simple, loads
# Google's fonts).
# Open a deck from disk (file://); press `s` for the presenter's view, `o` for the overview.
# Checked by notebooks/check_slides.py (headless Chromium, offline), which CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

REVEAL_VERSION=5.2.1
out=target/slides

langs=(en)
case "${1:-}" in
  "") ;;
  --all) langs=(en zh-CN) ;;
  *) echo "usage: notebooks/slides.sh [--all]" >&2; exit 2 ;;
esac

# Python with nbconvert: $NOTEBOOK_PYTHON, else the venv of notebooks/run.sh.
if [ -n "${NOTEBOOK_PYTHON:-}" ]; then
  py=$NOTEBOOK_PYTHON
else
  venv=target/notebook-venv
  py=$venv/bin/python
  if ! { [ -x "$py" ] && "$py" -c "import nbconvert" 2>/dev/null; }; then
    [ -x "$py" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q nbclient nbformat jupyter_client ipykernel nbconvert
  fi
fi

# reveal.js from the npm registry, the pinned version, into target/ (not committed).
npm_dir=target/reveal-npm
reveal=$npm_dir/node_modules/reveal.js
if ! grep -q "\"version\": \"$REVEAL_VERSION\"" "$reveal/package.json" 2>/dev/null; then
  command -v npm >/dev/null || { echo "notebooks/slides.sh: npm is needed (Node.js)" >&2; exit 1; }
  mkdir -p "$npm_dir"
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" "reveal.js@$REVEAL_VERSION"
fi

rm -rf "$out"
mkdir -p "$out/reveal.js"
# What the decks load: the script, its stylesheets and themes (with their fonts), the notes plugin.
cp -r "$reveal/dist" "$reveal/plugin" "$reveal/LICENSE" "$out/reveal.js/"

for lang in "${langs[@]}"; do
  if [ "$lang" = en ]; then
    src=notebooks dest=$out prefix=reveal.js
  else
    src=notebooks/$lang dest=$out/$lang prefix=../reveal.js
  fi
  mkdir -p "$dest"
  for nb in "$src"/0*.ipynb; do
    "$py" -m nbconvert --to slides --log-level WARN \
      --template "$(pwd)/notebooks/slides" \
      --reveal-prefix "$prefix" \
      --SlidesExporter.reveal_number=c/t \
      --SlidesExporter.reveal_theme=white \
      --output-dir "$dest" "$nb"
  done
  # A deck lies one folder deeper than its notebook (target/slides/ against notebooks/): its
  # links into the repository (the book's chapters, the exercises) get one more ../.
  sed -i -E 's#href="((\.\./)+)(book|exercises|notebooks|crates|docs|scripts)/#href="../\1\3/#g' \
    "$dest"/0*.slides.html
  # and a link to another notebook leads to its deck
  sed -i -E 's#href="(0[0-9][A-Za-z0-9_-]*)\.ipynb(\#[^"]*)?"#href="\1.slides.html\2"#g' "$dest"/0*.slides.html
done
echo "decks in $out/: $(cd "$out" && find . -name '*.slides.html' | sort | tr '\n' ' ')"
