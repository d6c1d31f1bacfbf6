//! How deep YAML flow collections (`[...]`, `{...}`) nest, counted before the YAML parser runs.
//!
//! The YAML scanner spends time quadratic in the nesting of flow collections: 100,000 `[`
//! took 44 s (debug build) to refuse, and an 8 MiB file would take hours, all before any value
//! reaches the depth check of [`crate::documents`]. So the nesting is counted first, in one
//! pass, and a text that nests deeper than the limit is refused without being parsed.
//!
//! The count must never fall short of what the parser would see, or a crafted text would slip
//! through: where a character could be read two ways, the reading that counts more wins.
//! Brackets inside quoted scalars do not count when the quote certainly starts a scalar (after
//! an indicator); a quote at the start of a line in block context may instead continue a plain
//! scalar, so inside it opening brackets still count.

/// Where nesting first goes past `limit`: the 1-based line.
pub fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut s = Scan { depth: 0, line: 1, prev: Prev::LineStart };
    let mut chars = text.chars().peekable();
    // Whether the previous character was whitespace (or there was none): `#` starts a comment
    // only then.
    let mut after_space = true;
    while let Some(c) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|n| n.is_whitespace());
        let was_after_space = std::mem::replace(&mut after_space, c.is_whitespace());
        match c {
            '\n' => {
                s.line += 1;
                if s.depth == 0 {
                    s.prev = Prev::LineStart;
                }
            }
            c if c.is_whitespace() => {}
            '#' if was_after_space => {
                // A comment runs to the end of the line.
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            '\'' | '"' if s.token_start() => {
                let uncertain = s.depth == 0 && s.prev == Prev::LineStart;
                if s.quoted(c, uncertain, &mut chars, limit) {
                    return Some(s.line);
                }
                s.prev = Prev::Closed;
            }
            '[' | '{' if s.depth > 0 || s.token_start() => {
                s.depth += 1;
                if s.depth > limit {
                    return Some(s.line);
                }
                s.prev = Prev::Indicator;
            }
            ']' | '}' if s.depth > 0 => {
                s.depth -= 1;
                s.prev = if s.depth == 0 { Prev::Plain } else { Prev::Closed };
            }
            ',' if s.depth > 0 => s.prev = Prev::Indicator,
            ':' | '?' if next_is_space => s.prev = Prev::Indicator,
            // Adjacent `:` after a quoted key or a collection (JSON-like): `{"a":"b"}`.
            ':' if s.prev == Prev::Closed => s.prev = Prev::Indicator,
            '-' if s.depth == 0 && next_is_space => s.prev = Prev::Indicator,
            '&' | '!' if s.token_start() => {
                // A property (anchor or tag): what follows it may still start a token.
                while chars.peek().is_some_and(|n| !n.is_whitespace() && !matches!(n, ',' | '[' | ']' | '{' | '}')) {
                    chars.next();
                }
            }
            _ => s.prev = Prev::Plain,
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// The start of a line in block context.
    LineStart,
    /// An indicator after which a node starts: `[`, `{`, `,`, `: `, `? `, `- `.
    Indicator,
    /// The end of a quoted scalar or a flow collection.
    Closed,
    /// Anything else: inside a plain scalar.
    Plain,
}

struct Scan {
    depth: usize,
    line: usize,
    prev: Prev,
}

impl Scan {
    fn token_start(&self) -> bool {
        matches!(self.prev, Prev::LineStart | Prev::Indicator)
    }

    /// Skips a quoted scalar opened by `quote`; true if, being `uncertain`, the opening brackets
    /// inside took the nesting past `limit`.
    fn quoted(
        &mut self,
        quote: char,
        uncertain: bool,
        chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
        limit: usize,
    ) -> bool {
        while let Some(c) = chars.next() {
            match c {
                '\n' => self.line += 1,
                // An escape: the next character is taken as it is.
                '\\' if quote == '"' => self.line += usize::from(chars.next() == Some('\n')),
                '\'' if quote == '\'' && chars.peek() == Some(&'\'') => {
                    chars.next();
                }
                c if c == quote => return false,
                '[' | '{' if uncertain => {
                    self.depth += 1;
                    if self.depth > limit {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::too_deep;

    #[test]
    fn real_nesting_is_counted() {
        assert_eq!(too_deep("a: [[[]]]", 2), Some(1));
        assert_eq!(too_deep("a: [[]]", 2), None);
        assert_eq!(too_deep("- {a: [{b: [1]}]}", 3), Some(1));
        assert_eq!(too_deep("a:\n  - [\n [\n  [\n]]]", 2), Some(4));
        assert_eq!(too_deep(&format!("x: {}{}", "[".repeat(100_000), "]".repeat(100_000)), 100), Some(1));
    }

    #[test]
    fn brackets_in_scalars_and_comments_do_not_count() {
        let regexes = "routes:\n".to_owned() + &"  - {path: \"^/[a-z]+[\", x: '[[[']'}\n".repeat(200);
        assert_eq!(too_deep(&regexes, 100), None);
        assert_eq!(too_deep(&"note: see [1 and [2\n".repeat(200), 100), None);
        assert_eq!(too_deep(&"# [[[[[\n".repeat(200), 100), None);
        assert_eq!(too_deep(&format!("k: {}", "a [".repeat(200)), 100), None);
        assert_eq!(too_deep("a: 1 # [[[[\n", 2), None);
    }

    #[test]
    fn crafted_quotes_do_not_hide_nesting() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        // A quote inside a plain scalar is not a quote.
        assert!(too_deep(&format!("[a 'b, {deep}]"), 100).is_some());
        assert!(too_deep(&format!("[a:'b, {deep}]"), 100).is_some());
        // `#` inside a plain scalar is not a comment.
        assert!(too_deep(&format!("[a#b, {deep}]"), 100).is_some());
        // A closer inside a string does not close.
        assert!(too_deep(&format!("x: {}", "[ \"]\" ".repeat(200)), 100).is_some());
        assert!(too_deep(&format!("x: {}", "[ &a \"]\" ".repeat(200)), 100).is_some());
        assert!(too_deep(&format!("x: {}", "[ !t ']' ".repeat(200)), 100).is_some());
        // A quote that may continue a plain scalar still counts what it holds.
        assert!(too_deep(&format!("note: see\n  'x\ny: {deep}\n"), 100).is_some());
    }
}
