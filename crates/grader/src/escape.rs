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
    use super::text;

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
