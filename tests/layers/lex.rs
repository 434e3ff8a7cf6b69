//! Lexing Rust source for the layer guard (`tests/layers.rs`): tokens
//! without comments or literal contents, and without `#[cfg(test)]` code.

/// One token: an identifier or keyword (`$crate` included, a raw
/// identifier's `r#` stripped), `::`, one punctuation character, or `"`
/// standing for any string, char or byte literal.
#[derive(Clone, Debug)]
pub struct Tok {
    /// The token's text.
    pub text: String,
    /// Its 1-based line in the file.
    pub line: usize,
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether a token is an identifier or keyword (`$crate`, `$x` included).
pub fn is_ident(s: &str) -> bool {
    let s = s.strip_prefix('$').unwrap_or(s);
    s.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Lexes Rust source into tokens, dropping comments (doc comments
/// included, so intra-doc links are never paths) and literal contents.
pub fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let (mut toks, mut i, mut line) = (Vec::new(), 0, 1);
    let lit = |line| Tok {
        text: "\"".into(),
        line,
    };
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            // Block comments nest.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    (depth, i) = (depth + 1, i + 2);
                } else if c[i] == '*' && at(i + 1) == '/' {
                    (depth, i) = (depth - 1, i + 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i, None, &mut line);
            toks.push(lit(start_line));
        } else if ch == '\'' {
            // A char literal, or a lifetime / label (dropped too).
            let is_char = at(i + 1) == '\\' || at(i + 2) == '\'';
            i = if is_char { skip_char(&c, i) } else { i + 1 };
            if is_char {
                toks.push(lit(start_line));
            }
            while !is_char && ident_char(at(i)) {
                i += 1;
            }
        } else if ident_char(ch) || (ch == '$' && ident_char(at(i + 1))) {
            let start = i;
            i += 1;
            while ident_char(at(i)) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            if raw && at(i + hashes) == '"' {
                i = skip_string(&c, i + hashes, Some(hashes), &mut line);
                toks.push(lit(start_line));
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = skip_string(&c, i, None, &mut line);
                toks.push(lit(start_line));
            } else if word == "b" && at(i) == '\'' {
                i = skip_char(&c, i);
                toks.push(lit(start_line));
            } else if word == "r" && hashes == 1 && ident_char(at(i + 1)) {
                // A raw identifier, `r#type`: the identifier itself.
                let s = i + 1;
                i = s;
                while ident_char(at(i)) {
                    i += 1;
                }
                toks.push(Tok {
                    text: c[s..i].iter().collect(),
                    line,
                });
            } else {
                toks.push(Tok { text: word, line });
            }
        } else if ch == ':' && at(i + 1) == ':' {
            toks.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            toks.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    toks
}

/// Index past the string whose opening quote is at `open`; `raw` gives a
/// raw string's count of `#` (no escapes in it).
fn skip_string(c: &[char], open: usize, raw: Option<usize>, line: &mut usize) -> usize {
    let mut j = open + 1;
    while j < c.len() {
        match c[j] {
            '\\' if raw.is_none() => {
                *line += usize::from(c.get(j + 1) == Some(&'\n'));
                j += 2;
                continue;
            }
            '"' => {
                let n = raw.unwrap_or(0);
                if c[j + 1..].iter().take(n).filter(|&&h| h == '#').count() == n {
                    return j + 1 + n;
                }
            }
            '\n' => *line += 1,
            _ => {}
        }
        j += 1;
    }
    c.len()
}

/// Index past the char literal whose opening quote is at `open`.
fn skip_char(c: &[char], open: usize) -> usize {
    // After an escape's backslash and first char, the next quote closes.
    let from = if c.get(open + 1) == Some(&'\\') {
        open + 3
    } else {
        open + 2
    };
    (from..c.len())
        .find(|&j| c[j] == '\'')
        .map_or(c.len(), |j| j + 1)
}

// ------------------------------------------------ dropping cfg(test) code

fn is_open(s: &str) -> bool {
    matches!(s, "(" | "[" | "{")
}

fn is_close(s: &str) -> bool {
    matches!(s, ")" | "]" | "}")
}

/// Index past the bracket that closes the one at `open`.
fn close_of(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if is_open(&t.text) {
            depth += 1;
        } else if is_close(&t.text) {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return k + 1;
            }
        }
    }
    toks.len()
}

/// Whether an attribute's tokens (inside `#[...]`) are `cfg(test)` or
/// `cfg(all(..., test, ...))`: code compiled only for unit tests.
fn is_test_cfg(attr: &[Tok]) -> bool {
    let w: Vec<&str> = attr.iter().map(|t| t.text.as_str()).collect();
    match w.as_slice() {
        ["cfg", "(", "test", ")"] => true,
        ["cfg", "(", "all", "(", args @ .., ")", ")"] => {
            args.split(|a| *a == ",").any(|a| a == ["test"])
        }
        _ => false,
    }
}

/// End (exclusive) of the item, field, arm or statement starting at
/// `start`: at a `;` on its level, at the `}` closing its body, at a `,`
/// on its level where it is no item (a field or an arm), or before a
/// closing bracket of the enclosing block.
fn item_end(toks: &[Tok], start: usize) -> usize {
    // Look past further attributes and qualifiers to the keyword.
    let word = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut k = start;
    loop {
        match word(k) {
            "#" => k = close_of(toks, k + 1),
            "pub" if word(k + 1) == "(" => k = close_of(toks, k + 1),
            "pub" | "unsafe" | "async" | "default" | "extern" | "\"" => k += 1,
            "const" if matches!(word(k + 1), "fn" | "unsafe" | "async" | "extern") => k += 1,
            _ => break,
        }
    }
    let semi_only = matches!(word(k), "const" | "static" | "type" | "use" | "let");
    let item = matches!(
        word(k),
        "fn" | "mod" | "impl" | "trait" | "struct" | "enum" | "union" | "macro_rules"
    );
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(start) {
        let s = t.text.as_str();
        if is_open(s) {
            depth += 1;
        } else if is_close(s) {
            if depth == 0 {
                return j;
            }
            depth -= 1;
            if depth == 0 && s == "}" && !semi_only {
                return j + 1;
            }
        } else if depth == 0 && (s == ";" || (s == "," && !semi_only && !item)) {
            return j + 1;
        }
    }
    toks.len()
}

/// End (exclusive) of the block enclosing `start`: before its unmatched
/// closing bracket (for an inner `#![cfg(test)]`).
fn block_end(toks: &[Tok], start: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(start) {
        if is_open(&t.text) {
            depth += 1;
        } else if is_close(&t.text) {
            if depth == 0 {
                return j;
            }
            depth -= 1;
        }
    }
    toks.len()
}

/// The tokens without `#[cfg(test)]` items (and blocks under `#![cfg(test)]`).
pub fn strip_test_code(toks: &[Tok]) -> Vec<Tok> {
    let mut out = Vec::with_capacity(toks.len());
    let mut k = 0;
    while k < toks.len() {
        let inner = toks.get(k + 1).is_some_and(|t| t.text == "!");
        let open = if inner { k + 2 } else { k + 1 };
        if toks[k].text == "#" && toks.get(open).is_some_and(|t| t.text == "[") {
            let end = close_of(toks, open);
            let attr = toks.get(open + 1..end.saturating_sub(1)).unwrap_or(&[]);
            if is_test_cfg(attr) {
                k = if inner {
                    block_end(toks, end)
                } else {
                    item_end(toks, end)
                };
                continue;
            }
        }
        out.push(toks[k].clone());
        k += 1;
    }
    out
}
