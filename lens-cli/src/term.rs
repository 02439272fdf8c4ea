//! Text for a terminal: names, hosts and paths come from the input and may
//! hold control characters (an escape sequence can clear the screen, set
//! the window title or hide what follows). Everything the text output
//! prints from the input goes through [`printable`].

use std::borrow::Cow;
use std::path::Path;

/// Whether `c` is shown as an escape: control characters (C0, DEL, C1),
/// and the invisible characters that change what the rest of a line looks
/// like (zero-width characters, bidirectional overrides and isolates, line
/// and paragraph separators, the byte order mark).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        )
}

/// `s` with each control or invisible formatting character written as
/// `\u{…}` (its code point in hex); borrowed when there is none.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            o.extend(c.escape_unicode());
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

/// A path for a message: lossy UTF-8, then [`printable`].
pub(crate) fn path(p: &Path) -> String {
    printable(&p.to_string_lossy()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(printable("train.step"), "train.step");
        assert!(matches!(printable("héllo wörld ✓"), Cow::Borrowed(_)));
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("t\ta\nb\u{7f}"), "t\\u{9}a\\u{a}b\\u{7f}");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }
}
