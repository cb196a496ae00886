//! Blank runs in a call shown to an approver: a long one would push what follows out of
//! sight (a Slack message, a page's line), so such a call is never asked about.

/// The most blank characters in a row a call shown to an approver may hold: past it, what
/// follows the blank run scrolls out of a Slack message or a page's line.
pub(super) const MAX_SHOWN_BLANKS: usize = 32;

/// The longest run of blank characters in a call's JSON arguments: Unicode white space, and
/// the escapes `\n`, `\t` and `\r` each as one.
pub(super) fn longest_blank_run(arguments: &str) -> usize {
    let (mut longest, mut current) = (0usize, 0usize);
    let mut chars = arguments.chars().peekable();
    while let Some(c) = chars.next() {
        let blank = if c == '\\' {
            match chars.peek() {
                Some('n' | 't' | 'r') => {
                    chars.next();
                    true
                }
                _ => false,
            }
        } else {
            c.is_whitespace() || matches!(c, '\u{200b}' | '\u{2800}' | '\u{3164}' | '\u{115f}')
        };
        current = if blank { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}
