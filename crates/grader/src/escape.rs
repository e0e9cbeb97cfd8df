//! Text that came out of a student's process, made safe to show: terminal escape sequences
//! (colours, cursor moves, window titles, OSC 52 clipboard writes) removed, other control
//! characters shown as `\x..`, and the length capped. Everything a report or the terminal shows
//! from a student goes through [`text`].
//!
//! ```
//! let shown = grader::escape::text("\x1b[31mred\x1b[0m\x07 \x1b]0;title\x07done\r", 100);
//! assert_eq!(shown, "red\\x07 done\\x0d");
//! assert_eq!(grader::escape::text("abcdef", 3), "abc… (3 more bytes)");
//! ```
//!
//! A string from a student (a file name, a folder name, an id, a test's output) is escaped for
//! where it goes, one function per sink: [`terminal`] (one line: newlines shown, not made),
//! [`markdown`] (inline text that no Markdown or HTML construct can be made of),
//! [`markdown_block`] (inside a fenced code block), [`html`], [`csv_cell`] (no formula: OWASP's
//! CSV injection rule) and [`json`].
//!
//! ```
//! use grader::escape;
//! let name = "a\n# You got full marks\n<div>\x1b]0;pwned\x07";
//! assert_eq!(escape::terminal(name), "a\\n# You got full marks\\n<div>");
//! assert!(!escape::markdown(name).contains('\n'));
//! assert_eq!(escape::csv_cell("+cmd|' /C calc'!A0"), "'+cmd|' /C calc'!A0");
//! assert_eq!(escape::html("<b>"), "&lt;b&gt;");
//! assert_eq!(escape::json("a\"b"), "\"a\\\"b\"");
//! ```

/// `raw` without escape sequences, with control characters other than newline and tab shown as
/// `\xNN`, cut after `max` bytes of the result (on a character boundary) with a note saying how
/// much was left out.
pub fn text(raw: &str, max: usize) -> String {
    let mut out = String::with_capacity(raw.len().min(max) + 16);
    let mut chars = raw.chars().peekable();
    let mut consumed = 0usize;
    while let Some(c) = chars.next() {
        if out.len() >= max {
            break;
        }
        consumed += c.len_utf8();
        match c {
            '\x1b' => consumed += skip_escape(&mut chars),
            // C1 control: CSI as one character
            '\u{9b}' => consumed += skip_csi(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            // bidirectional overrides can make text read differently from what it is
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    if out.len() > max {
        let mut cut = max;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    let left = raw.len().saturating_sub(consumed);
    if left > 0 {
        out.push_str(&format!("… ({left} more bytes)"));
    }
    out
}

/// The longest a name or a one-line text is shown (a file name is at most 255 bytes).
const LINE: usize = 512;

/// One line for the terminal: [`text`] with newline, carriage return and tab shown as `\n`,
/// `\r`, `\t` too, so that a name cannot start a line of its own (or overwrite one).
pub fn terminal(raw: &str) -> String {
    let mut one_line = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '\n' => one_line.push_str("\\n"),
            '\r' => one_line.push_str("\\r"),
            '\t' => one_line.push_str("\\t"),
            c => one_line.push(c),
        }
    }
    text(&one_line, LINE)
}

/// The characters that make Markdown anywhere in a line: emphasis, code spans, links and
/// images, raw HTML and entities, table cells, escapes, strike-through.
const MARKUP: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '<', '>', '#', '|', '!', '~', '&',
];

/// Inline Markdown text that shows `raw` as it is: one line ([`terminal`]), every character
/// that makes markup anywhere backslash-escaped (CommonMark allows it for any ASCII
/// punctuation), and the first one too when it would start a block (a list item `-`, `+`, `1.`,
/// a heading underline `=`), so that no heading, list, link, emphasis, code span, table cell or
/// raw HTML can be made of it. Commas, full stops and the like stay as they are.
pub fn markdown(raw: &str) -> String {
    let line = terminal(raw);
    let mut out = String::with_capacity(line.len() + 8);
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    for (i, c) in line.chars().enumerate() {
        let starts_block = (i == 0 && matches!(c, '-' | '+' | '='))
            || (i == digits && digits > 0 && matches!(c, '.' | ')'));
        if MARKUP.contains(&c) || starts_block {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text for the inside of a fenced code block opened with three backticks: [`text`]'s escapes
/// (cut after `max` bytes), and no run of three backticks or tildes that could close the fence.
pub fn markdown_block(raw: &str, max: usize) -> String {
    text(raw, max).replace("```", "'''").replace("~~~", "'''")
}

/// Text made safe inside HTML (an element's content or a quoted attribute), after [`text`].
pub fn html(raw: &str) -> String {
    text(raw, usize::MAX)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A CSV cell that a spreadsheet shows as text: one line ([`terminal`]), and a cell that starts
/// with a character a spreadsheet reads as a formula (`=`, `+`, `-`, `@`, tab, carriage return,
/// or the full-width forms of the first four) is prefixed with `'` (OWASP, "CSV Injection").
/// The CSV writer quotes the cell.
pub fn csv_cell(raw: &str) -> String {
    let formula = |c: char| {
        matches!(
            c,
            '=' | '+' | '-' | '@' | '\t' | '\r' | '\u{ff1d}' | '\u{ff0b}' | '\u{ff0d}' | '\u{ff20}'
        )
    };
    // A tab or carriage return at the start counts before terminal() spells it out.
    if raw.chars().next().is_some_and(formula) {
        return format!("'{}", terminal(raw));
    }
    terminal(raw)
}

/// A JSON string literal holding `raw` (quotes, backslashes and every control character
/// escaped, as `serde_json` writes them).
pub fn json(raw: &str) -> String {
    serde_json::to_string(raw).unwrap_or_else(|_| "\"\"".into())
}

/// After ESC: skips a CSI (`[ ... final`), an OSC/DCS/APC/PM/SOS string (up to BEL or ESC `\`),
/// or a two-character sequence. Returns the bytes skipped.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars>) -> usize {
    match chars.peek().copied() {
        Some('[') => {
            chars.next();
            1 + skip_csi(chars)
        }
        Some(']' | 'P' | '_' | '^' | 'X') => {
            let mut n = chars.next().map_or(0, char::len_utf8);
            while let Some(c) = chars.next() {
                n += c.len_utf8();
                if c == '\x07' {
                    break;
                }
                if c == '\x1b' && chars.peek() == Some(&'\\') {
                    chars.next();
                    n += 1;
                    break;
                }
            }
            n
        }
        Some(c) => {
            chars.next();
            c.len_utf8()
        }
        None => 0,
    }
}

/// Skips a CSI's parameters and its final byte (`@` to `~`).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars>) -> usize {
    let mut n = 0;
    for c in chars.by_ref() {
        n += c.len_utf8();
        if ('@'..='~').contains(&c) {
            break;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names a student can give a file or a folder.
    const HOSTILE: [&str; 6] = [
        "\x1b]0;pwned\x07\x1b[2J\x1b[1;1Hname.rs",
        "a.rs\n\n<div>raw</div>\n\n# You got full marks\n",
        "+cmd|' /C calc'!A0",
        "=HYPERLINK(\"http://x\")",
        "`code` *em* [link](http://x) | cell |",
        "\u{202e}sr.evil",
    ];

    #[test]
    fn terminal_names_stay_on_one_line_without_escapes() {
        for raw in HOSTILE {
            let shown = terminal(raw);
            assert!(
                !shown.contains('\x1b') && !shown.contains('\n'),
                "{shown:?}"
            );
            assert!(
                !shown.contains('\x07') && !shown.contains('\r'),
                "{shown:?}"
            );
            assert!(!shown.contains('\u{202e}'), "{shown:?}");
        }
        assert_eq!(terminal("a\nb\tc\r"), "a\\nb\\tc\\r");
        assert_eq!(terminal("\x1b]0;pwned\x07x"), "x");
    }

    #[test]
    fn markdown_makes_no_markup() {
        let md = markdown(HOSTILE[1]);
        assert!(!md.contains('\n') && md.contains("\\<div\\>"), "{md}");
        assert_eq!(markdown("# h"), "\\# h");
        assert_eq!(markdown("<b>`x`|"), "\\<b\\>\\`x\\`\\|");
        assert_eq!(markdown("- item"), "\\- item");
        assert_eq!(markdown("12. item"), "12\\. item");
        assert_eq!(markdown("a, b. c-d: (e)"), "a, b. c-d: (e)");
        for raw in HOSTILE {
            let md = markdown(raw);
            // every markup character is escaped: none is left bare
            let mut chars = md.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    assert!(
                        chars.next().is_some_and(|n| n.is_ascii_punctuation()),
                        "{md}"
                    );
                } else {
                    assert!(!MARKUP.contains(&c), "{md}");
                }
            }
        }
    }

    #[test]
    fn a_code_block_cannot_be_closed_from_inside() {
        let block = markdown_block("x\n```\n# title\n  ~~~~\n\x1b[2Jy", 1000);
        assert!(!block.contains("```") && !block.contains("~~~"), "{block}");
        assert!(block.ends_with('y') && !block.contains('\x1b'), "{block}");
    }

    #[test]
    fn html_and_json_escape_their_own_syntax() {
        assert_eq!(
            html("<a href='x'>&</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"
        );
        assert_eq!(html("\x1b[31mred"), "red");
        assert_eq!(json("a\n\"\x1b"), "\"a\\n\\\"\\u001b\"");
    }

    #[test]
    fn csv_cells_never_start_a_formula() {
        for raw in ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "\u{ff1d}1"] {
            assert!(
                csv_cell(raw).starts_with('\''),
                "{raw:?}: {}",
                csv_cell(raw)
            );
        }
        assert_eq!(csv_cell("alice"), "alice");
        assert_eq!(csv_cell("a\nb"), "a\\nb");
    }

    #[test]
    fn every_kind_of_escape_is_removed() {
        let raw = "a\x1b[2J\x1b[1;1Hb\x1b]52;c;ZXZpbA==\x07c\x1bPq#0\x1b\\d\u{9b}31me\x1bcf";
        assert_eq!(text(raw, 1000), "abcdef");
    }

    #[test]
    fn control_characters_and_bidi_overrides_are_visible() {
        assert_eq!(text("x\u{8}y\u{0}z", 100), "x\\x08y\\x00z");
        assert_eq!(text("a\u{202e}b", 100), "a\\u{202e}b");
        assert_eq!(text("line\nnext\tcol", 100), "line\nnext\tcol");
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let shown = text(&"é".repeat(10), 5);
        assert!(shown.starts_with("éé"));
        assert!(shown.ends_with("more bytes)"));
        assert_eq!(text("short", 10), "short");
    }
}
