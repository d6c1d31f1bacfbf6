//! Regular expressions as Envoy compiles them: with RE2 (Debian's libre2, through the shim in
//! `re2/program_size.cc`), which refuses what Rust's `regex` may accept, and whose program
//! size Envoy bounds.

use std::ffi::{c_char, c_int};

unsafe extern "C" {
    fn xdst_re2_program_size(pattern: *const c_char, len: usize, error: *mut c_char, error_len: usize) -> c_int;
}

/// The size of `pattern`'s RE2 program, or RE2's reason for refusing it.
pub fn program_size(pattern: &str) -> Result<u32, String> {
    let mut error = [0u8; 512];
    // SAFETY: the shim reads `pattern.len()` bytes from `pattern` and writes at most
    // `error.len()` bytes, NUL-terminated, into `error`; it keeps neither pointer.
    let size = unsafe {
        xdst_re2_program_size(pattern.as_ptr().cast(), pattern.len(), error.as_mut_ptr().cast(), error.len())
    };
    if size < 0 {
        let end = error.iter().position(|&b| b == 0).unwrap_or(error.len());
        return Err(String::from_utf8_lossy(&error[..end]).into_owned());
    }
    Ok(size as u32)
}

/// Whether Envoy would take `pattern` as a `safe_regex` whose program may be `max` large.
pub fn check(pattern: &str, max: u32) -> Result<(), String> {
    match program_size(pattern) {
        Err(why) => Err(format!("invalid regex {pattern:?}: {why}")),
        Ok(size) if size > max => {
            Err(format!("regex {pattern:?}: RE2 program size of {size} > max program size of {max}"))
        }
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of issue 35 that Envoy refused, for the reasons it gave.
    #[test]
    fn re2_refuses_what_envoy_refused() {
        let e = check(r"/\p{Bogus}", 100).unwrap_err();
        assert!(e.contains("invalid character class range"), "{e}");
        let e = check("/a{1001}", 100).unwrap_err();
        assert!(e.contains("invalid repetition size"), "{e}");
        let uuid = "^/(users|orders|items|carts|payments|invoices)/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
        let e = check(uuid, 100).unwrap_err();
        assert!(e.contains("RE2 program size of") && e.contains("> max program size of 100"), "{e}");
        assert!(check(uuid, 1000).is_ok());
        assert!(check("^/api/v[0-9]+/.*", 100).is_ok());
        assert!(program_size("a").unwrap() < 10);
    }
}
