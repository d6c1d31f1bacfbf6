//! Embeds what `xdst plugin new` and `xdst plugin build` need: each language's template
//! (`guest-sdk/<lang>/template/`, with the SDK of `guest-sdk/<lang>/sdk/` as `sdk/`), its build
//! recipe (`guest-sdk/<lang>/build.sh`) with the files the recipe reads beside itself
//! (`guest-sdk/<lang>/bindings/`: C's generated bindings), the incremental template where there
//! is one (`guest-sdk/<lang>/template-incremental/`), and the WIT contracts (`proto/wit`), so
//! the binary works outside the repository.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if matches!(name.as_str(), "target" | "build" | "node_modules" | "__pycache__")
            || (name.starts_with('.') && name != ".gitignore")
        {
            continue;
        }
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// `&[(path, include_bytes!(..)), ..]` for the files under each (directory, prefix).
fn embed(dirs: &[(PathBuf, &str)]) -> String {
    let mut list = String::from("&[\n");
    for (from, under) in dirs {
        let mut found = Vec::new();
        files(from, &mut found);
        for f in found {
            let rel = format!("{under}{}", f.strip_prefix(from).unwrap().to_string_lossy());
            println!("cargo:rerun-if-changed={}", f.display());
            list.push_str(&format!("        ({rel:?}, include_bytes!({:?})),\n", f.canonicalize().unwrap()));
        }
    }
    list + "    ]"
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let sdk = root.join("guest-sdk");
    let mut code = String::from(
        "/// A template's files: (path in the template, contents).\npub type Files = &'static [(&'static str, &'static [u8])];\n\
         /// (language, recipe, template, the recipe's own files, the incremental template: empty when the\n\
         /// language has none)\npub static LANGUAGES: &[(&str, &str, Files, Files, Files)] = &[\n",
    );
    for lang in ["rust", "c", "js", "python", "assemblyscript", "go", "zig"] {
        let dir = sdk.join(lang);
        println!("cargo:rerun-if-changed={}", dir.display());
        let recipe = dir.join("build.sh");
        if !recipe.exists() {
            continue;
        }
        let template = dir.join("template");
        // (file, its path in a new plugin): the template, and the SDK package as `sdk/` (one
        // copy in the repository, a copy in every plugin made from the template).
        let template = embed(&[(template, ""), (dir.join("sdk"), "sdk/")]);
        code.push_str(&format!("    ({lang:?}, include_str!({:?}), {template}, ", recipe.canonicalize().unwrap()));
        // Written beside the recipe when it runs.
        let beside = embed(&[(dir.join("bindings"), "bindings/")]);
        // The incremental form (contract 0.4.0), where the language has one.
        let incremental = embed(&[(dir.join("template-incremental"), "")]);
        code.push_str(&format!("{beside}, {incremental}),\n"));
    }
    code.push_str("];\n");
    let wit = root.join("proto/wit/xdst-plugin-0.1.0/plugin.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    code.push_str(&format!(
        "/// The WIT contract.\npub static WIT: &str = include_str!({:?});\n",
        wit.canonicalize().unwrap()
    ));
    let wit4 = root.join("proto/wit/xdst-plugin-0.4.0/plugin.wit");
    println!("cargo:rerun-if-changed={}", wit4.display());
    code.push_str(&format!(
        "/// The WIT contract of incremental plugins (0.4.0).\npub static WIT_INCREMENTAL: &str = include_str!({:?});\n",
        wit4.canonicalize().unwrap()
    ));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("languages.rs");
    std::fs::write(out, code).unwrap();
}
