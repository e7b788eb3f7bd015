//! The module graph of `core/src` has no cycle (DESIGN.md §2, "No upward imports").
//!
//! Read from the sources: every `crate::…`, `super::…` and `self::…` path (in `use` lines and inline, braces
//! expanded) is an edge from the module it is written in to the deepest module it names; re-exports (`pub use`,
//! `pub(crate) use`) are followed to where the item lives. A module may use its ancestors' items and its own
//! descendants; among the children of each module the edges must form no cycle. Test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// The module a file under `src/` defines: `lib.rs` → root, `a/mod.rs` and `a.rs` → `a`, `a/b.rs` → `a::b`.
fn module_of(rel: &str) -> Module {
    let rel = rel.strip_suffix(".rs").expect("a .rs file");
    let mut parts: Module = rel.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

/// The source without comments and without its trailing `#[cfg(test)] mod …`.
fn code_of(source: &str) -> String {
    let source = source.find("#[cfg(test)]\nmod ").map_or(source, |i| &source[..i]);
    source.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// The paths of a use tree at `s`, braces expanded: `a::{b, c::d}` → `a::b`, `a::c::d`.
fn use_tree(s: &str) -> (Vec<Module>, usize) {
    let bytes = s.as_bytes();
    let mut prefix = Module::new();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            prefix.push(s[start..i].to_string());
        }
        if s[i..].starts_with("::{") {
            i += 3;
            let mut paths = Vec::new();
            loop {
                while s[i..].starts_with([' ', '\n', ',']) {
                    i += 1;
                }
                if s[i..].starts_with('}') {
                    return (paths, i + 1);
                }
                let (subs, used) = use_tree(&s[i..]);
                paths.extend(subs.into_iter().map(|p| [prefix.clone(), p].concat()));
                i += used.max(1);
            }
        }
        if s[i..].starts_with("::") && s[i + 2..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

struct Graph {
    modules: BTreeSet<Module>,
    /// Per module: the paths it names, absolute but not yet resolved to modules.
    refs: BTreeMap<Module, Vec<Module>>,
    /// Per module: item name → where it is re-exported from.
    reexports: BTreeMap<Module, BTreeMap<String, Module>>,
}

/// `path` as written in `module` made absolute; `None` for a path into another crate.
fn absolute(module: &Module, path: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    let mut base = module.clone();
    let mut rest = &path[..];
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // A 2018 path that starts at a child module of this one.
        Some(first) if modules.contains(&[module.clone(), vec![first.to_string()]].concat()) => {}
        _ => return None,
    }
    Some([base, rest.to_vec()].concat())
}

impl Graph {
    fn read(files: &[(String, String)]) -> Graph {
        let modules: BTreeSet<Module> = files.iter().map(|(rel, _)| module_of(rel)).collect();
        let mut graph = Graph { modules, refs: BTreeMap::new(), reexports: BTreeMap::new() };
        for (rel, source) in files {
            let module = module_of(rel);
            let code = code_of(source);
            let mut refs = Vec::new();
            for (at, _) in code.match_indices(|c: char| c.is_ascii_alphabetic()) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let tail = &code[at..];
                let is_pub_use =
                    ["pub use ", "pub(crate) use ", "pub(super) use "].iter().find(|p| tail.starts_with(*p));
                if let Some(p) = is_pub_use {
                    let (paths, _) = use_tree(&tail[p.len()..]);
                    for path in paths.iter().filter_map(|p| absolute(&module, p, &graph.modules)) {
                        let item = path.last().cloned().unwrap_or_default();
                        graph.reexports.entry(module.clone()).or_default().insert(item, path.clone());
                        refs.push(path);
                    }
                } else if ["crate::", "super::", "self::"].iter().any(|p| tail.starts_with(p)) {
                    let (paths, _) = use_tree(tail);
                    refs.extend(paths.iter().filter_map(|p| absolute(&module, p, &graph.modules)));
                }
            }
            graph.refs.insert(module, refs);
        }
        graph
    }

    /// The module an absolute path lands in, following re-exports.
    fn target(&self, path: &Module, depth: usize) -> Module {
        let len = (0..=path.len()).rev().find(|&n| self.modules.contains(&path[..n])).unwrap_or(0);
        let module = path[..len].to_vec();
        if let Some(item) = path.get(len)
            && let Some(source) = self.reexports.get(&module).and_then(|r| r.get(item))
            && source != path
            && depth < 16
        {
            return self.target(&[source.clone(), path[len + 1..].to_vec()].concat(), depth + 1);
        }
        module
    }

    /// For each module, the edges among its children: `(parent, from child, to child)`.
    fn sibling_edges(&self) -> BTreeSet<(Module, String, String)> {
        let mut edges = BTreeSet::new();
        for (from, refs) in &self.refs {
            for path in refs {
                let to = self.target(path, 0);
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                // An ancestor's items, or a descendant: the module tree itself, not an edge between siblings.
                if common == from.len() || common == to.len() {
                    continue;
                }
                edges.insert((from[..common].to_vec(), from[common].clone(), to[common].clone()));
            }
        }
        edges
    }

    /// The first cycle found among the children of some module, as `a -> b -> a` under that module.
    fn cycle(&self) -> Option<String> {
        let mut by_parent: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (parent, a, b) in self.sibling_edges() {
            by_parent.entry(parent).or_default().entry(a).or_default().insert(b);
        }
        for (parent, edges) in &by_parent {
            let mut done = BTreeSet::new();
            for start in edges.keys() {
                let mut stack = vec![start.clone()];
                if let Some(cycle) = find_cycle(edges, &mut stack, &mut done) {
                    let under = if parent.is_empty() { "crate".to_string() } else { parent.join("::") };
                    return Some(format!("under {under}: {}", cycle.join(" -> ")));
                }
            }
        }
        None
    }
}

/// Depth-first search from the top of `stack`; the cycle, if one closes on the stack.
fn find_cycle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    stack: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    let node = stack.last().cloned()?;
    if done.contains(&node) {
        return None;
    }
    for next in edges.get(&node).into_iter().flatten() {
        if let Some(i) = stack.iter().position(|n| n == next) {
            return Some([&stack[i..], std::slice::from_ref(next)].concat());
        }
        stack.push(next.clone());
        if let Some(cycle) = find_cycle(edges, stack, done) {
            return Some(cycle);
        }
        stack.pop();
    }
    done.insert(node);
    None
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src").to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&path).expect("readable source")));
        }
    }
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(p, s)| (p.to_string(), s.to_string())).collect()
}

#[test]
fn core_has_no_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    sources(&root, &root, &mut found);
    let graph = Graph::read(&found);
    assert!(graph.modules.len() > 20, "read {} modules", graph.modules.len());
    // The check sees real edges: the client uses the backends' trait, Redlock the single-Redis backend.
    let edges = graph.sibling_edges();
    let edge = |under: &[&str], a: &str, b: &str| {
        edges.contains(&(under.iter().map(|s| s.to_string()).collect(), a.to_string(), b.to_string()))
    };
    assert!(edge(&[], "client", "backend") && edge(&["backend"], "redlock", "redis"), "{edges:?}");
    if let Some(cycle) = graph.cycle() {
        panic!("core/src has an import cycle {cycle}");
    }
}

#[test]
fn a_known_cycle_is_caught() {
    // The shape of the cycle this test guards against: a backend using a lease helper, the lease the backend.
    let bad = files(&[
        ("lib.rs", "mod backend;\nmod lease;\npub use lease::Lease;"),
        ("backend/mod.rs", "mod redlock;\npub(crate) struct Grant;"),
        ("backend/redlock.rs", "use super::Grant;\nuse crate::{error::Result, lease::drift};"),
        ("lease.rs", "use crate::backend::Grant;\npub(crate) fn drift() {}"),
        ("error.rs", "pub type Result = ();"),
    ]);
    let cycle = Graph::read(&bad).cycle().expect("the cycle is found");
    assert_eq!(cycle, "under crate: backend -> lease -> backend");
}

#[test]
fn re_exports_and_siblings_count() {
    // Through a root re-export, and between two backends (`super::`), both still edges.
    let through_reexport = files(&[
        ("lib.rs", "mod client;\nmod fence;\npub use client::Client;"),
        ("client.rs", "use crate::fence::Fence;"),
        ("fence.rs", "fn f(c: crate::Client) {}"),
    ]);
    assert_eq!(Graph::read(&through_reexport).cycle().as_deref(), Some("under crate: client -> fence -> client"));
    let siblings = files(&[
        ("lib.rs", "mod backend;"),
        ("backend/mod.rs", "mod a;\nmod b;"),
        ("backend/a.rs", "use super::b::X;"),
        ("backend/b/mod.rs", "mod c;"),
        ("backend/b/c.rs", "use super::super::a::Y;\n#[cfg(test)]\nmod tests { use crate::backend::b::c::*; }"),
    ]);
    assert_eq!(Graph::read(&siblings).cycle().as_deref(), Some("under backend: a -> b -> a"));
    // Children using their parent's items and parents using children: no cycle.
    let tree = files(&[
        ("lib.rs", "mod backend;\nuse backend::open;"),
        ("backend/mod.rs", "mod redis;\npub(crate) fn open() { redis::connect() }\npub(crate) trait Backend {}"),
        ("backend/redis.rs", "use super::Backend;\nuse crate::backend::open;"),
    ]);
    assert_eq!(Graph::read(&tree).cycle(), None);
}
