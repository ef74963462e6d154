//! The architecture, kept by tests: each crate depends only on the layers
//! below it ([`layers`], from `cargo metadata`), ARCHITECTURE.md names every
//! crate and module ([`map`]), the modules of each crate import each other
//! without cycles and never from their ancestors ([`imports`]), and HTTP
//! routes join the port only through their declarations ([`routes`]).

mod imports;
mod layers;
mod map;
mod routes;

use std::path::{Path, PathBuf};

/// A package of the workspace: its name and its source directory.
pub struct Crate {
    pub name: String,
    pub src: PathBuf,
}

/// The repository's root (the root package's directory).
pub fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Returns the workspace's packages: the root package (`src/`) and every
/// crate under `crates/`, named as their manifests name them.
pub fn workspace_crates() -> Vec<Crate> {
    let mut crates = vec![Crate {
        name: "lightning-store".into(),
        src: repository().join("src"),
    }];
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repository().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .expect("a package name")
            .trim_matches('"')
            .to_owned();
        crates.push(Crate {
            name,
            src: dir.join("src"),
        });
    }
    assert!(crates.len() >= 6, "{} crates", crates.len());
    crates
}

/// Returns every `.rs` file under `dir`, with its text.
pub fn rust_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}
