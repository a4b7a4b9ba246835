//! Embeds `fixtures/home` into the binary for `cairn demo`, so the demo
//! works from an installed binary on a machine with no agent history.

use std::path::{Path, PathBuf};

fn main() {
    // Read at run time, not baked in with env!(): a build-script binary
    // reused from a target folder that moved must still find this
    // checkout's fixtures.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../fixtures/home");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    // An empty demo would run and find nothing: refuse to build one.
    assert!(
        !files.is_empty(),
        "no demo fixtures under {}",
        root.display()
    );
    let mut out = String::from(
        "/// Fixture files: (path relative to the fixture home, contents).\npub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        out.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            f.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("demo_fixtures.rs");
    std::fs::write(dest, out).expect("write demo_fixtures.rs");
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}
