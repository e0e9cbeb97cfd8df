#!/usr/bin/env bash
# The book's translations: gettext, with mdbook-i18n-helpers 0.4.0 (book/README.md, "Translations").
#
#   book/i18n.sh extract [LANG]   extract the English text into book/po/messages.pot (generated,
#                                 not committed) and merge it into book/po/LANG.po (msgmerge: new
#                                 messages come in untranslated, changed ones fuzzy, removed ones
#                                 obsolete); creates LANG.po if there is none
#   book/i18n.sh build [LANG]     build the English book (book/build/) and the LANG one
#                                 (book/build-LANG/); fails on a PO file msgfmt rejects, and on any
#                                 error or warning from mdbook or a preprocessor, as check.sh does
#   book/i18n.sh links [LANG]     check the LANG book's links offline (mdbook-linkcheck2, the
#                                 settings of book/check.sh)
#   book/i18n.sh coverage [LANG]  extract afresh (into a scratch folder: the PO file is not
#                                 touched), merge, and print messages translated / total, fuzzy
#                                 and untranslated, overall and per chapter; exits 1 unless every
#                                 message is translated and none is fuzzy, so an English change
#                                 left untranslated fails
#   book/i18n.sh serve [LANG]     mdbook serve the LANG book (http://localhost:3000), rebuilt when
#                                 the chapters or the PO file change
# LANG defaults to zh-CN. Needs: what book/check.sh needs, mdbook-i18n-helpers 0.4.0
# (`cargo install mdbook-i18n-helpers --locked --version 0.4.0`) and GNU gettext (msgmerge,
# msgfmt, msginit, msgattrib; Debian: `apt-get install gettext`). No network.
#
# How a translated book is built (none of this is in book.toml, so the English book needs none of
# these tools): mdbook's `links` preprocessor expands the includes, `i18n-protect`
# (book/i18n_protect.py) turns each formula into a code span and marks every fenced code block to
# be skipped, `gettext` replaces each paragraph, heading, list item and table cell by its
# translation from po/LANG.po, `i18n-restore` turns the formulas back, and then katex, dedent and
# svgbob (the diagrams) and schedule (the course's tables, in the book's language, from the
# English pages' minutes) run as for the English book. Extraction runs the same first two steps
# before mdbook-xgettext, so the catalogue holds prose only: no listing, output, command, diagram
# or formula source is a message (they are the same in every edition). The translated book goes to book/build-LANG/, at the same
# depth as book/build/, so the chapters' relative links to ../../notebooks/ and ../../exercises/
# reach the checkout from both; theme/head.hbs links each page to the other edition's.
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")"

cmd=${1:-}
lang=${2:-zh-CN}
po="po/$lang.po"

die() { echo "book/i18n.sh: $*" >&2; exit 1; }

case "$lang" in
  en) die "English is the source language: it has no PO file" ;;
  *[!A-Za-z0-9-]* | "") die "'$lang' is not a language code (zh-CN, ja, ...)" ;;
esac

# The translated book's title (book.toml's title is English; gettext translates chapters only).
title_for() {
  case "$1" in
    zh-CN) echo "在真实设备上运行 GNN：避开那些经典错误" ;;
    *) sed -n 's/^title = "\(.*\)"$/\1/p' book.toml ;;
  esac
}

need() {
  local missing=0 tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      case "$tool" in
        mdbook-gettext | mdbook-xgettext)
          echo "book/i18n.sh: $tool is not installed (cargo install mdbook-i18n-helpers --locked --version 0.4.0)" >&2 ;;
        msg*) echo "book/i18n.sh: $tool is not installed (GNU gettext; Debian: apt-get install gettext)" >&2 ;;
        *) echo "book/i18n.sh: $tool is not installed (see book/README.md)" >&2 ;;
      esac
      missing=1
    fi
  done
  [ "$missing" = 0 ] || exit 1
}

# The preprocessors of a translated build, as mdbook configuration from the environment.
protect_env() {
  export MDBOOK_PREPROCESSOR__I18N_PROTECT='{"command": "python3 i18n_protect.py protect", "after": ["links"]}'
}
translate_env() {
  protect_env
  export MDBOOK_BOOK__LANGUAGE="$lang"
  export MDBOOK_BOOK__TITLE
  MDBOOK_BOOK__TITLE=$(title_for "$lang")
  export MDBOOK_PREPROCESSOR__GETTEXT='{"after": ["i18n-protect"], "po-dir": "po"}'
  export MDBOOK_PREPROCESSOR__I18N_RESTORE='{"command": "python3 i18n_protect.py restore", "after": ["gettext"], "before": ["katex", "dedent", "svgbob", "schedule"]}'
}

# extract_pot DIR: writes DIR/messages.pot.
extract_pot() {
  need mdbook mdbook-xgettext
  local log
  # Only the xgettext renderer (MDBOOK_OUTPUT replaces book.toml's [output] tables); katex and
  # dedent are limited to the HTML renderer so that the formulas reach the catalogue as written;
  # svgbob too (a diagram is a code block, never a message), so extracting needs no svgbob_cli;
  # schedule too (its tables are generated in the book's language; the markers are skipped).
  if ! log=$(protect_env
      MDBOOK_OUTPUT='{"xgettext": {"pot-file": "messages.pot", "granularity": 0}}' \
      MDBOOK_PREPROCESSOR__KATEX__RENDERERS='["html"]' \
      MDBOOK_PREPROCESSOR__DEDENT__RENDERERS='["html"]' \
      MDBOOK_PREPROCESSOR__SVGBOB__RENDERERS='["html"]' \
      MDBOOK_PREPROCESSOR__SCHEDULE__RENDERERS='["html"]' \
      NO_COLOR=1 mdbook build --dest-dir "$1" 2>&1); then
    echo "$log" >&2
    die "extraction failed"
  fi
  check_log "$log"
}

# merged POT OUT: the PO file merged with the template POT, written to OUT.
merged() {
  need msgmerge msginit
  if [ -f "$po" ]; then
    msgmerge --quiet --previous --lang="$lang" --output-file="$2" "$po" "$1"
  else
    msginit --no-translator --locale="$lang" --input="$1" --output-file="$2" >/dev/null 2>&1
  fi
}

# check_log LOG: fails on an error or a warning, as book/check.sh does.
check_log() {
  local plain
  plain=$(sed -E 's/\x1b\[[0-9;]*m//g' <<<"$1")
  if grep -Eq '^([0-9T:.-]+Z)? *(ERROR|WARN)|^Warning' <<<"$plain"; then
    echo "$1" >&2
    die "mdbook or a preprocessor logged errors or warnings (above)"
  fi
}

build_one() {
  local dest=$1 log
  echo "--- mdbook build: ${lang} -> book/$dest/"
  if ! log=$(translate_env; mdbook build --dest-dir "$dest" 2>&1); then
    echo "$log" >&2
    die "the $lang build failed"
  fi
  echo "$log"
  check_log "$log"
}

case "$cmd" in
  extract)
    mkdir -p po
    extract_pot po
    tmp=$(mktemp "po/.$lang.XXXXXX")
    trap 'rm -f "$tmp"' EXIT
    merged po/messages.pot "$tmp"
    mv "$tmp" "$po"  # atomic: the PO file is never half written
    echo "po/messages.pot extracted; $po merged"
    "$self" coverage "$lang" --no-fail || true
    ;;

  build)
    need mdbook mdbook-gettext msgfmt
    [ -f "$po" ] || die "$po does not exist: run book/i18n.sh extract $lang"
    msgfmt --check --output-file=/dev/null "$po"
    echo "--- mdbook build: en -> book/build/"
    if ! log=$(mdbook build 2>&1); then echo "$log" >&2; die "the English build failed"; fi
    echo "$log"
    check_log "$log"
    build_one "build-$lang"
    ;;

  links)
    need mdbook mdbook-gettext mdbook-linkcheck2
    start=$SECONDS
    (translate_env
     MDBOOK_OUTPUT__LINKCHECK2='{"follow-web-links": false, "traverse-parent-directories": true, "latex-support": true, "warning-policy": "error"}' \
       NO_COLOR=1 RUST_BACKTRACE=0 mdbook build --dest-dir "../target/book-linkcheck-$lang")
    echo "links ok: $lang ($((SECONDS - start)) s)"
    ;;

  coverage)
    need msgfmt msgattrib msgmerge
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    extract_pot "$scratch"
    merged "$scratch/messages.pot" "$scratch/$lang.po"
    msgfmt --check --output-file=/dev/null "$scratch/$lang.po"
    # msgfmt's statistics: "N translated messages, M fuzzy translations, K untranslated messages."
    # (a part is left out when its count is 0).
    stats=$(LC_ALL=C msgfmt --statistics --output-file=/dev/null "$scratch/$lang.po" 2>&1)
    stat() { grep -oE "[0-9]+ $1" <<<"$stats" | grep -oE '^[0-9]+' || echo 0; }
    done_=$(stat translated)
    fuzzy=$(stat fuzzy)
    untranslated=$(stat untranslated)
    total=$((done_ + fuzzy + untranslated))
    awk -v l="$lang" -v d="$done_" -v t="$total" -v f="$fuzzy" -v u="$untranslated" 'BEGIN {
      printf "%s: %d/%d messages translated (%.1f%%), %d fuzzy, %d untranslated\n", l, d, t, (t ? 100 * d / t : 100), f, u }'
    # Per chapter: a message counts for every chapter it appears in (#: lines).
    msgattrib --no-obsolete "$scratch/$lang.po" | awk '
      /^#: / { for (i = 2; i <= NF; i++) files[$i] = 1; next }
      /^#, .*fuzzy/ { fuzzy = 1; next }
      /^msgid / { inid = 1; instr = 0; next }
      /^msgstr / { inid = 0; instr = 1; str = substr($0, 8); next }
      /^"/ { if (instr) str = str substr($0, 1); next }
      /^$/ { flush(); next }
      END { flush()
            for (f in all) printf "  %-40s %4d/%-4d translated, %d fuzzy\n", f, ok[f] + 0, all[f], fz[f] + 0 }
      function flush() {
        if (instr) {
          for (f in files) { all[f]++; if (fuzzy) fz[f]++; else if (str != "\"\"") ok[f]++ }
        }
        delete files; fuzzy = 0; instr = 0; str = ""
      }' | sort
    if [ "${3:-}" != "--no-fail" ] && { [ "$fuzzy" -gt 0 ] || [ "$untranslated" -gt 0 ]; }; then
      echo "book/i18n.sh: $lang is not complete: translate the untranslated messages and review the fuzzy ones in book/$po (book/i18n.sh extract $lang merges the English changes in first)" >&2
      exit 1
    fi
    ;;

  serve)
    need mdbook mdbook-gettext
    translate_env
    exec mdbook serve --dest-dir "build-$lang"
    ;;

  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
