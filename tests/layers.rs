//! The crate's layers stay one-way: a GPU-free guard over `src/`.
//!
//! `src/ARCHITECTURE.md` holds the layer table (the rows after its
//! `<!-- layers: ... -->` marker), the single source of truth: every
//! top-level module of `src/` (a file `src/x.rs` with its folder `src/x/`)
//! sits at one layer. A module imports only from lower layers and from
//! modules listed before it in its own row; capabilities (the last row)
//! never import each other; `lib.rs` is the root, not a layer.
//!
//! The check lexes every `.rs` file under `src/` by hand (comments, string
//! and char literals dropped), drops `#[cfg(test)]` items, and collects
//! every path that names a module: `use` trees (nested ones flattened) and
//! `crate::`, `$crate::` and `super::` paths anywhere in code. A path to an
//! item re-exported at the crate root (`crate::Device`) is followed through
//! the `use` items of `lib.rs`, and of the modules those point into, to the
//! module that defines the item. Each edge is checked against the table,
//! and circles in the module graph are reported on their own.

#[path = "layers/circles.rs"]
mod circles;
#[path = "layers/lex.rs"]
mod lex;
#[path = "layers/paths.rs"]
mod paths;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use circles::circles;
use lex::{lex, strip_test_code};
use paths::{absolute, scan, Names, PathRef, Target};

/// Which rule a finding breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    /// The table, the module list or a file is wrong or unreadable.
    Table,
    /// A module imports from a higher layer.
    Upward,
    /// A module imports from its own row, from a module listed after it.
    SameRowLater,
    /// A capability imports another capability.
    Capabilities,
    /// A root path the check cannot map to a module (a glob).
    Unresolved,
    /// Modules that import each other, directly or around a loop.
    Circle,
}

/// One finding; `text` is the line printed for it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    line: usize,
    rule: Rule,
    /// The imported top-level module, empty where there is none.
    to: String,
    text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A finding that belongs to no file line (table errors, circles).
fn general(rule: Rule, text: String) -> Violation {
    let (file, line, to) = (String::new(), 0, String::new());
    Violation {
        file,
        line,
        rule,
        to,
        text,
    }
}

// ------------------------------------------------------------- the table

/// One row of the layer table.
struct Row {
    layer: usize,
    name: String,
    modules: Vec<String>,
}

/// The rows after the `<!-- layers:` marker: `| N | name | `m`, ... | ... |`.
fn parse_table(md: &str) -> Result<Vec<Row>, String> {
    let after = md
        .split_once("<!-- layers:")
        .ok_or("src/ARCHITECTURE.md has no `<!-- layers:` marker")?
        .1;
    let mut rows: Vec<Row> = Vec::new();
    let lines = after
        .lines()
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with('|'));
    for l in lines.take_while(|l| l.trim_start().starts_with('|')) {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.get(1).map(|c| c.parse::<usize>()) else {
            continue; // the header and the `---` line
        };
        let modules = cells.get(3).unwrap_or(&"").split('`').skip(1).step_by(2);
        let name = cells.get(2).unwrap_or(&"").to_string();
        if rows.last().is_some_and(|r| r.layer >= layer) {
            return Err(format!(
                "layer table: layer {layer} comes after layer {}",
                rows[rows.len() - 1].layer
            ));
        }
        rows.push(Row {
            layer,
            name,
            modules: modules.map(String::from).collect(),
        });
    }
    if rows.is_empty() {
        return Err("layer table: no rows after the `<!-- layers:` marker".into());
    }
    Ok(rows)
}

// ------------------------------------------------------------- the check

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// Checks the source tree at `root` (holding `src/`) against its layer
/// table; returns every violation, sorted, empty when the layers hold.
fn check(root: &Path) -> Vec<Violation> {
    let src = root.join("src");
    let table = fs::read_to_string(src.join("ARCHITECTURE.md"))
        .map_err(|e| format!("cannot read src/ARCHITECTURE.md: {e}"))
        .and_then(|md| parse_table(&md));
    let rows = match table {
        Ok(rows) => rows,
        Err(e) => return vec![general(Rule::Table, e)],
    };
    let mut files = Vec::new();
    if let Err(e) = rust_files(&src, &mut files) {
        let text = format!("cannot list {}: {e}", src.display());
        return vec![general(Rule::Table, text)];
    }
    let mut out = Vec::new();
    let modules = modules_on_disk(&src);
    let place = place_modules(&rows, &modules, &mut out);
    let mut names = Names {
        modules,
        uses: HashMap::new(),
        macros: HashMap::new(),
        root_glob: false,
    };
    let found = read_sources(root, &files, &mut names, &mut out);

    // Each edge against the table.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, from, refs) in &found {
        let Some(from) = from.as_ref().filter(|m| place.contains_key(m.as_str())) else {
            continue; // lib.rs, or a module the table lacks (reported above)
        };
        for r in refs {
            let Some(abs) = absolute(&r.segs, &r.module) else {
                continue; // an external crate, or a name already in scope
            };
            let path = r.segs.join("::").trim_end_matches("::self").to_string();
            let at = |rule, to: &str, what: String| Violation {
                file: file.clone(),
                line: r.line,
                rule,
                to: to.to_string(),
                text: format!("{file}:{}: {path}: {what}", r.line),
            };
            let to = match names.target(&abs) {
                Target::Module(m) if m != *from && place.contains_key(m.as_str()) => m,
                Target::Unknown(why) => {
                    let what = format!("cannot tell which module it names ({why})");
                    out.push(at(Rule::Unresolved, "", what));
                    continue;
                }
                _ => continue, // its own module, the root, or outside the crate
            };
            graph.entry(from.clone()).or_default().insert(to.clone());
            let ((ra, pa), (rb, pb)) = (place[from.as_str()], place[to.as_str()]);
            let (rule, why) = if rb > ra {
                (Rule::Upward, "upward import")
            } else if rb == ra && ra == rows.len() - 1 {
                (Rule::Capabilities, "capability imports another capability")
            } else if rb == ra && pb > pa {
                (Rule::SameRowLater, "same layer, listed after it")
            } else {
                continue;
            };
            let (a, b) = (&rows[ra], &rows[rb]);
            let what = format!(
                "{from} (layer {} \"{}\") imports {to} (layer {} \"{}\"): {why}",
                a.layer, a.name, b.layer, b.name
            );
            out.push(at(rule, &to, what));
        }
    }
    let loops = circles(&graph, &place).into_iter();
    out.extend(loops.map(|text| general(Rule::Circle, text)));
    out.sort();
    out
}

/// The top-level modules of `src/`: each `x.rs` but `lib.rs`, each folder.
fn modules_on_disk(src: &Path) -> BTreeSet<String> {
    let entries = fs::read_dir(src).into_iter().flatten().flatten();
    let mut modules = BTreeSet::new();
    for p in entries.map(|e| e.path()) {
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        let is_rs = p.extension().is_some_and(|e| e == "rs");
        match stem {
            Some(stem) if p.is_dir() || (is_rs && stem != "lib") => modules.insert(stem),
            _ => false,
        };
    }
    modules
}

/// Each module's (row, position in its row); the table's disagreements
/// with the modules on disk go to `out`.
fn place_modules<'a>(
    rows: &'a [Row],
    modules: &BTreeSet<String>,
    out: &mut Vec<Violation>,
) -> HashMap<&'a str, (usize, usize)> {
    let mut place = HashMap::new();
    let mut table_error = |text: String| out.push(general(Rule::Table, text));
    for (r, row) in rows.iter().enumerate() {
        for (i, m) in row.modules.iter().enumerate() {
            // The first listing counts; a second one is an error.
            if place.contains_key(m.as_str()) {
                table_error(format!("layer table: module {m} is listed twice"));
            } else {
                place.insert(m.as_str(), (r, i));
            }
            if !modules.contains(m) {
                table_error(format!("layer table: module {m} does not exist in src/"));
            }
        }
    }
    for m in modules.iter().filter(|m| !place.contains_key(m.as_str())) {
        table_error(format!(
            "module {m} is in src/ but not in the layer table (src/ARCHITECTURE.md)"
        ));
    }
    place
}

/// A file as shown (`src/batch/bind.rs`), its top-level module (`None`
/// for `lib.rs`) and the paths it writes outside test code.
type Found = (String, Option<String>, Vec<PathRef>);

/// Reads every file in `files`: its paths, and into `names` what its `use`
/// items bind and the macros it exports.
fn read_sources(
    root: &Path,
    files: &[PathBuf],
    names: &mut Names,
    out: &mut Vec<Violation>,
) -> Vec<Found> {
    let src = root.join("src");
    let mut found = Vec::new();
    for p in files {
        let rel = p.strip_prefix(root).unwrap_or(p).components();
        let shown = rel
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let text = match fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                out.push(general(Rule::Table, format!("cannot read {shown}: {e}")));
                continue;
            }
        };
        // `src/batch/bind.rs` is `crate::batch::bind`, `src/ops/mod.rs` is
        // `crate::ops`, `src/lib.rs` the root.
        let in_src = p.strip_prefix(&src).unwrap_or(p).with_extension("");
        let mut module: Vec<String> = in_src
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") || module == ["lib"] {
            module.pop();
        }
        let toks = strip_test_code(&lex(&text));
        // `#[macro_export] macro_rules! name`: `crate::name!` is this module's.
        for w in toks.windows(6) {
            let exported = w[1].text == "macro_export" && w[3].text == "macro_rules";
            if let (true, Some(top)) = (exported && w[4].text == "!", module.first()) {
                names.macros.insert(w[5].text.clone(), top.clone());
            }
        }
        let refs = scan(&toks, &module);
        for r in &refs {
            let Some(bound) = &r.binds else { continue };
            // An unanchored `use` path is relative to the module (2018).
            let target = absolute(&r.segs, &r.module)
                .unwrap_or_else(|| r.module.iter().chain(&r.segs).cloned().collect());
            if bound == "*" {
                names.root_glob |= r.module.is_empty();
            } else if bound != "_" {
                let module_uses = names.uses.entry(r.module.clone()).or_default();
                module_uses.insert(bound.clone(), target);
            }
        }
        found.push((shown, module.first().cloned(), refs));
    }
    found
}

/// The violations, one per line.
fn listing(v: &[Violation]) -> String {
    v.iter().map(|v| format!("  {v}\n")).collect()
}

#[test]
fn the_layers_are_one_way() {
    let v = check(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(
        v.is_empty(),
        "{} layer violation(s) against src/ARCHITECTURE.md:\n{}",
        v.len(),
        listing(&v)
    );
}

// ------------------------------------------------------------- self-test

/// A temporary folder, removed on drop.
struct TempTree(PathBuf);

/// A fresh temporary folder for one test.
fn temp_tree(tag: &str) -> TempTree {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    let stamp = since.map_or(0, |d| d.as_nanos());
    let pid = std::process::id();
    TempTree(std::env::temp_dir().join(format!("vkcompute-layers-{tag}-{pid}-{stamp}")))
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let p = e?.path();
        let dest = to.join(p.file_name().unwrap_or_default());
        if p.is_dir() {
            copy_dir(&p, &dest)?;
        } else {
            fs::copy(&p, &dest)?;
        }
    }
    Ok(())
}

/// Appends `text` to the copy's `rel` (a new file if none); returns the line of each
/// `// planted: <tag>` marker in the file afterwards.
fn plant(root: &Path, rel: &str, text: &str) -> io::Result<HashMap<String, usize>> {
    let p = root.join(rel);
    let mut body = fs::read_to_string(&p).unwrap_or_default();
    body.push_str(text);
    fs::write(&p, &body)?;
    let tag = |(i, l): (usize, &str)| {
        l.split_once("// planted: ")
            .map(|(_, t)| (t.trim().to_string(), i + 1))
    };
    Ok(body.lines().enumerate().filter_map(tag).collect())
}

#[test]
fn the_check_reports_planted_imports_and_nothing_else() {
    let tree = temp_tree("planted");
    let root = &tree.0;
    let copied = copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &root.join("src"),
    );
    assert!(
        copied.is_ok(),
        "copying src/ into {}: {copied:?}",
        root.display()
    );
    let baseline = check(root);
    assert!(
        baseline.is_empty(),
        "the unplanted copy must pass first:\n{}",
        listing(&baseline)
    );

    // reclaim is layer 0: one real upward import among look-alikes that are
    // comments, strings, a char `'}'` and test code.
    let reclaim = "
// crate::batch::Batch in a line comment
/// Doc links are no imports: [`Batch`](crate::batch::Batch), [`crate::Batch`].
/* a block /* nested */ comment: use crate::batch::Batch; */
const PLANTED_TEXT: &str = r#\"use crate::batch::Batch; \"quoted\" \"#;
const PLANTED_ESCAPED: &str = \"\\\" crate::batch::Batch\";
#[cfg(test)]
mod planted_tests {
    const CLOSE: char = '}';
    use crate::batch::Batch;
    fn f<'a>(_: &'a crate::graph::Graph) {}
}
#[cfg(test)]
fn planted_test_helper(_: &crate::stream::Stream) {}
use crate::batch::Batch; // planted: use
pub(crate) fn planted(_: Option<crate::Batch>) {} // planted: root
fn planted_list() -> usize { crate::bindings![].len() } // planted: bindings
macro_rules! planted {
    () => { $crate::Batch::new() }; // planted: macro
}
";
    let plants = [
        ("src/reclaim.rs", reclaim),
        // staging is layer 1: a nested use tree, `ops::{self}` upward.
        ("src/staging.rs", "\nuse crate::{error::Error, ops::{self}}; // planted: nested\n"),
        // batch/bind.rs is `crate::batch::bind`: `super::super` is the root.
        ("src/batch/bind.rs", "\nfn planted_bind(_: &super::Batch) {}\nuse super::super::ops::dot; // planted: super\n"),
        // memory comes first in layer 0; error after it.
        ("src/memory.rs", "\nfn planted_memory(_: crate::error::Error) {} // planted: later\n"),
        // Two capabilities.
        ("src/megakernel/mod.rs", "\nuse crate::ops::DType; // planted: capability\n"),
        // A module the table does not list.
        ("src/planted_orphan.rs", "use crate::batch::Batch;\n"),
    ];
    let mut lines = HashMap::new();
    for (rel, text) in plants {
        let planted = plant(root, rel, text);
        assert!(planted.is_ok(), "planting into {rel}: {planted:?}");
        lines.extend(planted.unwrap_or_default());
    }
    let line = |tag: &str| lines.get(tag).copied().unwrap_or(0);
    let mut want = vec![
        ("src/batch/bind.rs", line("super"), Rule::Upward, "ops"),
        (
            "src/megakernel/mod.rs",
            line("capability"),
            Rule::Capabilities,
            "ops",
        ),
        ("src/memory.rs", line("later"), Rule::SameRowLater, "error"),
        ("src/reclaim.rs", line("use"), Rule::Upward, "batch"),
        ("src/reclaim.rs", line("root"), Rule::Upward, "batch"),
        ("src/reclaim.rs", line("bindings"), Rule::Upward, "batch"),
        ("src/reclaim.rs", line("macro"), Rule::Upward, "batch"),
        ("src/staging.rs", line("nested"), Rule::Upward, "ops"),
    ];
    want.sort();

    let v = check(root);
    let (circles, rest): (Vec<&Violation>, Vec<&Violation>) =
        v.iter().partition(|v| v.rule == Rule::Circle);
    let (table, edges): (Vec<&Violation>, Vec<&Violation>) =
        rest.into_iter().partition(|v| v.rule == Rule::Table);
    let got: Vec<_> = edges
        .iter()
        .map(|v| (v.file.as_str(), v.line, v.rule, v.to.as_str()))
        .collect();
    assert_eq!(
        got,
        want,
        "the planted edges, exactly; all findings:\n{}",
        listing(&v)
    );
    let orphan = "module planted_orphan is in src/ but not in the layer table";
    assert!(
        table.len() == 1 && table[0].text.starts_with(orphan),
        "the orphan module only:\n{}",
        listing(&v)
    );
    let use_line = format!(
        "src/reclaim.rs:{}: crate::batch::Batch: reclaim (layer 0 ",
        line("use")
    );
    assert!(
        edges
            .iter()
            .any(|v| v.text.starts_with(&use_line) && v.text.ends_with("): upward import")),
        "the line names file, line, path, both modules and the rule:\n{}",
        listing(&v)
    );
    let nested = format!(
        "src/staging.rs:{}: crate::ops: staging (layer 1 ",
        line("nested")
    );
    assert!(
        edges.iter().any(|v| v.text.starts_with(&nested)),
        "`ops::{{self}}` reads as crate::ops:\n{}",
        listing(&v)
    );
    // reclaim -> batch closes a loop (batch imports reclaim, directly or not).
    assert!(
        circles
            .iter()
            .any(|c| c.text.starts_with("circle: reclaim -> batch -> ")
                && c.text.contains("-> reclaim")),
        "a circle through reclaim and batch:\n{}",
        listing(&v)
    );
}

#[test]
fn the_table_must_match_the_modules_on_disk() {
    let tree = temp_tree("table");
    let root = &tree.0;
    let head = "<!-- layers: -->\n\n| layer | name | modules | what |\n| --- | --- | --- | --- |\n";
    let md = format!("{head}| 0 | low | `a`, `ghost` | x |\n| 1 | high | `b`, `a` | y |\n");
    let files = [
        ("src/ARCHITECTURE.md", md.as_str()),
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "pub struct X;\n"),
        ("src/b.rs", "use crate::a::X;\n"), // down to the first listing of `a`
        ("src/c.rs", ""),
    ];
    for (rel, text) in files {
        let written =
            fs::create_dir_all(root.join("src")).and_then(|()| fs::write(root.join(rel), text));
        assert!(
            written.is_ok(),
            "writing {rel} under {}: {written:?}",
            root.display()
        );
    }
    let texts = |v: Vec<Violation>| v.into_iter().map(|v| v.text).collect::<Vec<_>>();
    let want = [
        "layer table: module a is listed twice",
        "layer table: module ghost does not exist in src/",
        "module c is in src/ but not in the layer table (src/ARCHITECTURE.md)",
    ];
    assert_eq!(texts(check(root)), want);

    // Layers out of order: the table itself is refused.
    let swapped = format!("{head}| 1 | high | `b` | y |\n| 0 | low | `a`, `c` | x |\n");
    let written = fs::write(root.join("src/ARCHITECTURE.md"), swapped);
    assert!(written.is_ok(), "rewriting the table: {written:?}");
    assert_eq!(
        texts(check(root)),
        ["layer table: layer 0 comes after layer 1"]
    );
}
