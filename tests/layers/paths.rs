//! The paths a file names (`use` trees, `crate::`, `$crate::`, `super::`)
//! and where they lead, for the layer guard (`tests/layers.rs`).

use std::collections::{BTreeSet, HashMap};

use crate::lex::{is_ident, Tok};

/// A path written in a file: `segs` as written (a use tree's leaf
/// flattened), in the module `module` (the file's plus inline modules).
#[derive(Clone, Debug)]
pub struct PathRef {
    /// The segments as written (`crate`, `super`, names).
    pub segs: Vec<String>,
    /// The line of the path's last segment in a `use`, else of its first.
    pub line: usize,
    /// The module it is written in (`["batch", "bind"]`).
    pub module: Vec<String>,
    /// For a `use` leaf: the name it binds (`None` for a path in code).
    pub binds: Option<String>,
}

/// Every path in `toks` (test code already dropped) that may name a module.
pub fn scan(toks: &[Tok], file_module: &[String]) -> Vec<PathRef> {
    let mut refs = Vec::new();
    // One entry per open `{`: the name of the inline module it opens.
    let mut blocks: Vec<Option<String>> = Vec::new();
    let word = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut k = 0;
    while k < toks.len() {
        let module = || {
            let inline = blocks.iter().flatten().cloned();
            file_module
                .iter()
                .cloned()
                .chain(inline)
                .collect::<Vec<_>>()
        };
        match word(k) {
            "{" => {
                let inline = (k >= 2 && word(k - 2) == "mod").then(|| word(k - 1).to_string());
                blocks.push(inline);
                k += 1;
            }
            "}" => {
                blocks.pop();
                k += 1;
            }
            "use" => {
                k += 1;
                use_tree(toks, &mut k, &[], &module(), &mut refs);
            }
            s @ ("crate" | "$crate" | "super" | "self") if word(k + 1) == "::" => {
                let (line, mut segs) = (toks[k].line, vec![s.to_string()]);
                k += 1;
                while word(k) == "::" && is_ident(word(k + 1)) {
                    segs.push(word(k + 1).to_string());
                    k += 2;
                }
                refs.push(PathRef {
                    segs,
                    line,
                    module: module(),
                    binds: None,
                });
            }
            _ => k += 1,
        }
    }
    refs
}

/// Parses the use tree at `*k` (`a::b`, `a::{b, c::{self, d}}`, `a::*`,
/// `a as b`), pushing one `PathRef` per leaf under `prefix`.
fn use_tree(
    toks: &[Tok],
    k: &mut usize,
    prefix: &[String],
    module: &[String],
    out: &mut Vec<PathRef>,
) {
    let mut segs = prefix.to_vec();
    while let Some(t) = toks.get(*k) {
        match t.text.as_str() {
            "::" => *k += 1,
            "{" => {
                *k += 1;
                while let Some(t) = toks.get(*k) {
                    match t.text.as_str() {
                        "}" => {
                            *k += 1;
                            return;
                        }
                        "," => *k += 1,
                        _ => {
                            let before = *k;
                            use_tree(toks, k, &segs, module, out);
                            if *k == before {
                                return; // not a use tree: stop here
                            }
                        }
                    }
                }
                return;
            }
            "*" => {
                segs.push("*".into());
                let binds = Some("*".into());
                out.push(PathRef {
                    segs,
                    line: t.line,
                    module: module.to_vec(),
                    binds,
                });
                *k += 1;
                return;
            }
            w if is_ident(w) => {
                segs.push(w.to_string());
                *k += 1;
                if toks.get(*k).is_some_and(|t| t.text == "::") {
                    continue;
                }
                let mut binds = if w == "self" {
                    segs.len().checked_sub(2).map(|i| &segs[i])
                } else {
                    Some(&segs[segs.len() - 1])
                }
                .cloned();
                if toks.get(*k).is_some_and(|t| t.text == "as") {
                    binds = toks.get(*k + 1).map(|t| t.text.clone());
                    *k += 2;
                }
                out.push(PathRef {
                    segs,
                    line: t.line,
                    module: module.to_vec(),
                    binds,
                });
                return;
            }
            _ => return,
        }
    }
}

/// The absolute path (below `crate`) of an anchored path, `None` for one
/// that starts elsewhere (an external crate, a name in scope).
pub fn absolute(segs: &[String], module: &[String]) -> Option<Vec<String>> {
    let supers = segs.iter().take_while(|s| *s == "super").count();
    let mut abs: Vec<String> = match segs.first()?.as_str() {
        "crate" | "$crate" => segs[1..].to_vec(),
        "self" => module.iter().chain(&segs[1..]).cloned().collect(),
        "super" if supers <= module.len() => module[..module.len() - supers]
            .iter()
            .chain(&segs[supers..])
            .cloned()
            .collect(),
        _ => return None,
    };
    if abs.last().is_some_and(|s| s == "self") {
        abs.pop();
    }
    Some(abs)
}

/// What the check knows of the crate's names.
pub struct Names {
    /// Top-level modules on disk.
    pub modules: BTreeSet<String>,
    /// Per module path: the names its `use` items bind, with their targets.
    pub uses: HashMap<Vec<String>, HashMap<String, Vec<String>>>,
    /// `#[macro_export]` macros (named at the crate root) and their module.
    pub macros: HashMap<String, String>,
    /// Whether `lib.rs` re-exports a glob (then a root name may be unknown).
    pub root_glob: bool,
}

/// What an absolute path leads to.
pub enum Target {
    /// A top-level module of the crate.
    Module(String),
    /// No module: the root itself, or an item outside the crate.
    Nothing,
    /// Nothing the check can tell (a glob), with the reason.
    Unknown(&'static str),
}

impl Names {
    /// Follows `use` items from the front of `abs` to where the item is
    /// defined (`crate::Device` -> `device::Device`).
    fn defined_at(&self, abs: Vec<String>, hops: usize) -> Vec<String> {
        for i in 0..abs.len() {
            let target = self.uses.get(&abs[..i]).and_then(|m| m.get(&abs[i]));
            if let Some(t) = target.filter(|_| hops < 16) {
                let next = t.iter().chain(&abs[i + 1..]).cloned().collect();
                return self.defined_at(next, hops + 1);
            }
        }
        abs
    }

    /// The top-level module an absolute path names.
    pub fn target(&self, abs: &[String]) -> Target {
        let Some(first) = abs.first() else {
            return Target::Nothing;
        };
        if self.modules.contains(first) {
            return Target::Module(first.clone());
        }
        if first == "*" {
            return Target::Unknown("a glob import of the crate root");
        }
        let defined = self.defined_at(abs.to_vec(), 0);
        match defined.first() {
            Some(m) if self.modules.contains(m) => Target::Module(m.clone()),
            _ => match self.macros.get(first) {
                Some(m) => Target::Module(m.clone()),
                None if self.root_glob => Target::Unknown("lib.rs re-exports a glob"),
                None => Target::Nothing,
            },
        }
    }
}
