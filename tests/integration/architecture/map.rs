//! ARCHITECTURE.md names every crate and every module: a section per crate,
//! headed by the crate's name in backticks, lists each of its source files
//! by its path under the crate's `src/` (`engine/rollouts.rs`; a folder's
//! `mod.rs` as `engine/`) with a sentence on what it holds. A module added
//! without its line fails here, so the map cannot fall behind the code.

use std::path::Path;

use super::{repository, rust_files, workspace_crates};

/// Returns the text of the section of `page` whose `###` heading names
/// `name` in backticks, up to the next heading of that level or above.
fn section<'a>(page: &'a str, name: &str) -> Option<&'a str> {
    let heading = format!("`{name}`");
    let mut parts = page.split("\n### ");
    parts.next();
    parts
        .find(|part| part.lines().next().is_some_and(|h| h.contains(&heading)))
        .map(|part| part.split("\n## ").next().unwrap_or(part))
}

/// Returns how ARCHITECTURE.md names the module in `file` of the crate whose
/// sources are in `src`: its path under `src/`, a folder's `mod.rs` as the
/// folder (`None` for the crate's root, which the section itself is).
fn name_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let text = relative.to_string_lossy().replace('\\', "/");
    match text.as_str() {
        "lib.rs" | "main.rs" => None,
        _ => Some(match text.strip_suffix("mod.rs") {
            Some(folder) => folder.to_owned(),
            None => text,
        }),
    }
}

#[test]
fn architecture_md_names_every_crate_and_module() {
    let page = std::fs::read_to_string(repository().join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut named = 0;
    for krate in workspace_crates() {
        let Some(section) = section(&page, &krate.name) else {
            missing.push(format!(
                "the crate {} (a `### ` heading naming it)",
                krate.name
            ));
            continue;
        };
        for (file, _) in rust_files(&krate.src) {
            let stem = file.file_stem().unwrap().to_string_lossy();
            if stem == "tests" || stem.ends_with("_tests") {
                continue;
            }
            let Some(name) = name_of(&krate.src, &file) else {
                continue;
            };
            if section.contains(&format!("`{name}`")) {
                named += 1;
            } else {
                missing.push(format!("{}: `{name}`", krate.name));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name:\n  {}",
        missing.join("\n  ")
    );
    assert!(named > 150, "{named} modules named");
}

#[test]
fn modules_are_named_by_their_path_under_src() {
    let src = Path::new("/r/crates/core/src");
    assert_eq!(name_of(src, &src.join("lib.rs")), None);
    assert_eq!(
        name_of(src, &src.join("engine/mod.rs")).as_deref(),
        Some("engine/")
    );
    assert_eq!(
        name_of(src, &src.join("engine/rollouts.rs")).as_deref(),
        Some("engine/rollouts.rs")
    );
    let page = "# A\n\n### `one` crate\n- `x.rs`\n\n### `two`\n- `y.rs`\n## B\n- `z.rs`";
    assert!(section(page, "one").unwrap().contains("`x.rs`"));
    assert!(!section(page, "two").unwrap().contains("`z.rs`"));
    assert!(section(page, "three").is_none());
}
