//! Showing an error with its causes.

/// An error and its causes, `: `-separated (as anyhow's `{:#}` shows them), leaving out a
/// cause whose text the error's own text already ends with.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let c = cause.to_string();
        if !text.ends_with(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        next = cause.source();
    }
    text
}
