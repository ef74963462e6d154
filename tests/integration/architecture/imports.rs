//! Each crate's modules import each other without cycles: at every level of
//! the module tree, the modules under one parent (with everything below
//! them) form an acyclic graph of imports, so that a piece two modules
//! share lives below both. And no module imports from its ancestors: a
//! parent (`mod.rs`, `lib.rs`) declares and assembles its children, and a
//! toolkit its children share is a child of its own (`layout`, `context`,
//! `statement`), which the cycle check can then see. A parent's imports of
//! its descendants are its structure; test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::workspace_crates;

/// A module path, e.g. `["http", "agl0", "requests"]` (empty: the crate).
pub type Module = Vec<String>;

/// Returns every module of the crate whose source directory is `src` with
/// its source, test modules (`tests.rs`, `*_tests.rs`) left out.
pub fn modules(src: &Path) -> BTreeMap<Module, String> {
    fn walk(dir: &Path, prefix: &Module, out: &mut BTreeMap<Module, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut module = prefix.clone();
                module.push(name);
                walk(&path, &module, out);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") || name == "main" {
                continue;
            }
            let mut module = prefix.clone();
            if name != "mod" && name != "lib" {
                module.push(name);
            }
            if module
                .last()
                .is_some_and(|m| m.ends_with("_tests") || m == "tests")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(module, without_tests(&text));
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &Vec::new(), &mut out);
    out
}

/// Returns a module's code: its `#[cfg(test)]` module and its comment
/// lines (whose doc links name modules without importing them) dropped.
fn without_tests(text: &str) -> String {
    let code = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Returns the paths `text` names from `crate`, `super` or `self`, with
/// braced groups expanded (`crate::a::{b, c::d}` names `a::b` and
/// `a::c::d`), each as its segments.
fn named_paths(text: &str) -> Vec<Vec<String>> {
    fn expand(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        let mut rest = text.trim_start();
        loop {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if end > 0 {
                path.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
            if let Some(after) = rest.strip_prefix("::") {
                rest = after.trim_start();
                if let Some(group) = rest.strip_prefix('{') {
                    let mut depth = 1;
                    let close = group
                        .char_indices()
                        .find(|&(_, c)| {
                            depth += match c {
                                '{' => 1,
                                '}' => -1,
                                _ => 0,
                            };
                            depth == 0
                        })
                        .map_or(group.len(), |(at, _)| at);
                    let mut depth = 0;
                    let mut start = 0;
                    let inner = &group[..close];
                    for (at, c) in inner.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                expand(&inner[start..at], path.clone(), out);
                                start = at + 1;
                            }
                            _ => {}
                        }
                    }
                    expand(&inner[start..], path.clone(), out);
                    return;
                }
                continue;
            }
            out.push(path);
            return;
        }
    }
    let mut out = Vec::new();
    for (at, _) in text.match_indices("::") {
        let before = &text[..at];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let head = &text[start..];
        if !(head.starts_with("crate::")
            || head.starts_with("super::")
            || head.starts_with("self::"))
            || start + head.find("::").unwrap() != at
        {
            continue;
        }
        expand(head, Vec::new(), &mut out);
    }
    out
}

/// Resolves a path named in `from` to the deepest module it names.
fn resolve(from: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let (mut base, mut rest) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.clone(), &path[1..]),
        _ => (from.clone(), path),
    };
    while rest.first().is_some_and(|segment| segment == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    let mut found = base.clone();
    for segment in rest {
        base.push(segment.clone());
        if !modules.contains(&base) {
            break;
        }
        found = base.clone();
    }
    Some(found)
}

/// Returns a cycle among the nodes of `edges`, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

/// Returns the imports between a crate's modules, each as (importer,
/// imported), `imported` being the deepest module the path names.
fn imports(sources: &BTreeMap<Module, String>) -> Vec<(Module, Module)> {
    let names: BTreeSet<Module> = sources.keys().cloned().collect();
    let mut imports = Vec::new();
    for (module, text) in sources {
        for path in named_paths(text) {
            if let Some(target) = resolve(module, &path, &names) {
                imports.push((module.clone(), target));
            }
        }
    }
    imports
}

/// Returns a cycle among the children of some parent, each step with the
/// imports that make it, if there is one.
fn cycle_in(imports: &[(Module, Module)]) -> Option<String> {
    // Imports between modules, neither an ancestor of the other.
    let across: Vec<&(Module, Module)> = imports
        .iter()
        .filter(|(from, to)| !to.starts_with(from) && !from.starts_with(to))
        .collect();
    // At each parent: the children its modules' imports connect.
    let mut levels: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in &across {
        let shared = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        let parent = from[..shared].to_vec();
        levels
            .entry(parent)
            .or_default()
            .entry(from[shared].clone())
            .or_default()
            .insert(to[shared].clone());
    }
    for (parent, edges) in &levels {
        let Some(cycle) = cycle(edges) else {
            continue;
        };
        // Each step of the cycle, by the imports that make it.
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|step| {
                let (from, to) = (&step[0], &step[1]);
                let under = |module: &Module, child: &str| {
                    module.starts_with(parent)
                        && module.get(parent.len()).is_some_and(|c| c == child)
                };
                let made_by: BTreeSet<String> = across
                    .iter()
                    .filter(|(a, b)| under(a, from) && under(b, to))
                    .map(|(a, b)| format!("{} uses {}", a.join("::"), b.join("::")))
                    .collect();
                format!(
                    "{from} -> {to} ({})",
                    made_by.into_iter().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        let at: Vec<&str> = std::iter::once("crate")
            .chain(parent.iter().map(String::as_str))
            .collect();
        return Some(format!(
            "modules under {} import each other in a cycle:\n  {}",
            at.join("::"),
            steps.join("\n  ")
        ));
    }
    None
}

/// Returns the imports of a module from one of its ancestors.
fn from_ancestors(imports: &[(Module, Module)]) -> Vec<String> {
    imports
        .iter()
        .filter(|(from, to)| from.starts_with(to) && from != to)
        .map(|(from, to)| {
            let name = |m: &Module| {
                std::iter::once("crate")
                    .chain(m.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("::")
            };
            format!("{} uses {}", name(from), name(to))
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn the_modules_of_each_crate_import_each_other_without_cycles_or_from_their_ancestors() {
    let mut total = 0;
    let mut upward = Vec::new();
    for krate in workspace_crates() {
        let sources = modules(&krate.src);
        let imports = imports(&sources);
        total += imports.len();
        if let Some(cycle) = cycle_in(&imports) {
            panic!("{}: {cycle}", krate.name);
        }
        upward.extend(
            from_ancestors(&imports)
                .into_iter()
                .map(|import| format!("{}: {import}", krate.name)),
        );
    }
    assert!(
        upward.is_empty(),
        "modules import from their ancestors (move what they share into a module of its own):\n  {}",
        upward.join("\n  ")
    );
    assert!(total > 500, "{total} imports found");
}

#[test]
fn a_cycle_and_an_import_from_an_ancestor_are_found() {
    let module = |path: &str| -> Module { path.split("::").map(str::to_owned).collect() };
    let imports = [
        (module("a::x"), module("b::y")),
        (module("b::y"), module("a::z")),
    ];
    assert!(cycle_in(&imports).unwrap().contains("a -> b"));
    assert_eq!(cycle_in(&imports[..1]), None);
    let upward = [(module("a::x"), module("a")), (module("a"), module("a::x"))];
    assert_eq!(from_ancestors(&upward), ["crate::a::x uses crate::a"]);
}

#[test]
fn paths_are_read_through_groups_and_relative_to_their_module() {
    let paths = named_paths("use crate::a::{b, c::{d, e}};\nlet x = super::f::g(1);");
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c::e",
            "super::f::g"
        ]
    );
    let names: BTreeSet<Module> = [vec![], vec!["a".into()], vec!["a".into(), "b".into()]]
        .into_iter()
        .collect();
    let here = vec!["a".to_owned(), "b".to_owned()];
    assert_eq!(
        resolve(&here, &["super".into(), "x".into()], &names),
        Some(vec!["a".to_owned()])
    );
    assert_eq!(
        resolve(
            &here,
            &["crate".into(), "a".into(), "b".into(), "T".into()],
            &names
        ),
        Some(here.clone())
    );
    let mut edges = BTreeMap::new();
    edges.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    edges.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        cycle(&edges),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}
