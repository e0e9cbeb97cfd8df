#!/usr/bin/env bash
# Vendors KaTeX's stylesheet and fonts into book/src/katex/, so the book renders its formulas
# offline. mdbook-katex renders every formula to HTML at build time with the KaTeX it bundles
# (mdbook-katex 0.10.0 -> katex crate 0.4.6 -> KaTeX 0.16.4); the HTML needs the stylesheet and
# fonts of that same KaTeX version. They come from the npm registry (package `katex`, MIT).
# Only the woff2 fonts are kept (every browser that runs mdbook's own scripts reads woff2), and
# the stylesheet's @font-face rules are rewritten to name only them, so it refers to no file that
# is missing.
# Usage: book/update-katex.sh [VERSION]      (default 0.16.4); needs npm and tar.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-0.16.4}
out=book/src/katex
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "katex@$version" >/dev/null && tar xzf "katex-$version.tgz")
rm -rf "$out"
mkdir -p "$out/fonts"
cp "$tmp/package/LICENSE" "$out/LICENSE"
cp "$tmp"/package/dist/fonts/*.woff2 "$out/fonts/"
sed -E 's/,url\(fonts\/[A-Za-z0-9_-]+\.woff\) format\("woff"\),url\(fonts\/[A-Za-z0-9_-]+\.ttf\) format\("truetype"\)//g' \
  "$tmp/package/dist/katex.min.css" >"$out/katex.min.css"
if grep -Eq '\.(woff|ttf)\)' "$out/katex.min.css"; then
  echo "update-katex.sh: katex.min.css still names a .woff or .ttf font; the rewrite no longer matches" >&2
  exit 1
fi
# Every font the stylesheet names is vendored.
for font in $(grep -o 'fonts/[A-Za-z0-9_-]*\.woff2' "$out/katex.min.css" | sort -u); do
  test -s "$out/$font" || { echo "update-katex.sh: $out/$font is missing" >&2; exit 1; }
done
echo "KaTeX $version: $(ls "$out/fonts" | wc -l) fonts, $(du -sh "$out" | cut -f1) in $out"
