//! Compiles the RE2 shim (`re2/program_size.cc`) and links Debian's libre2 (package
//! `libre2-dev`; a C++ compiler, package `g++`): `src/re2.rs` measures regular expressions
//! with the same library Envoy uses.

fn main() {
    println!("cargo:rerun-if-changed=re2/program_size.cc");
    cc::Build::new().cpp(true).std("c++17").file("re2/program_size.cc").compile("xdst_re2");
    println!("cargo:rustc-link-lib=re2");
}
