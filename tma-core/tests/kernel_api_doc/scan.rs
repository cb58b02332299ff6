//! Reads generated CUDA back into its declarations and their doc comments: the part of C++
//! the templates use (structs, functions, constants, fields, types, enums, macros; namespaces
//! and `extern "C"` blocks), not C++ in general.
//!
//! The doc convention of `tma-core/templates/` (docs/KERNEL_API.md says it to readers):
//! - a declaration's doc is the block of `//` lines right above it (conditional-compilation
//!   lines may sit in between; a blank line or another declaration ends a block);
//! - a declaration with no block of its own shares the doc of the declaration right above it
//!   (no blank line between: a group), except that declaration's `@internal`;
//! - a trailing `// ...` on the declaration's line is part of its doc;
//! - lines starting `@who`, `@debug`, `@timeline` or `@internal` are tags: which threads call
//!   it, what a `TMA_DEBUG` build checks in it, what a `TMA_TIMELINE` build records in it, and
//!   "an implementation detail, not API";
//! - `// ---- title ----` starts a subsection; a banner (between two `// -----` lines) is the
//!   doc of the struct that follows it.

/// What a declaration declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Macro,
    Type,
    Enum,
    Constant,
    Variable,
    Field,
    Struct,
    Function,
}

/// One declaration of the generated source.
#[derive(Clone, Debug)]
pub struct Item {
    pub kind: Kind,
    /// The namespaces and structs around it, outer first.
    pub scope: Vec<String>,
    pub name: String,
    /// The declaration as written, whitespace collapsed, without body or initializer.
    pub decl: String,
    /// A constant's, variable's or macro's value; an enum's enumerators.
    pub value: Option<String>,
    /// The doc lines (own, or the group's when `inherited`), `//` and one space removed.
    pub doc: Vec<String>,
    /// Its trailing `// ...` comments (never shared with a group).
    pub trailing: Vec<String>,
    inherit_from: Option<usize>,
    /// The doc is the banner above the struct.
    pub banner: bool,
    /// A function's body, `{ .. }` (preprocessor lines kept, comments dropped).
    pub body: String,
    /// The `// ---- title ----` subsection it sits in.
    pub heading: Option<String>,
    /// The preprocessor conditions it is compiled under (include guards left out).
    pub conditions: Vec<String>,
    /// `= delete` (not callable) or `= default` (nothing to say): not API.
    pub deleted: bool,
    /// How many banners came before it in its source (0: none).
    pub banner_index: usize,
    /// An enum's enumerators (`NAME = value`).
    pub enumerators: Vec<String>,
    /// The declaration it was rendered for, where a section shows several (set by the page).
    pub example: Option<String>,
}

impl Item {
    pub fn tag(&self, tag: &str) -> Vec<String> {
        tag_lines(&self.doc, tag)
    }
    pub fn is_internal(&self) -> bool {
        !self.tag("@internal").is_empty()
    }
    /// The doc's lines that are no tag, then the trailing comments.
    pub fn contract(&self) -> Vec<String> {
        self.doc
            .iter()
            .filter(|l| !is_tag(l))
            .chain(&self.trailing)
            .cloned()
            .collect()
    }
}

pub const TAGS: [&str; 4] = ["@who", "@debug", "@timeline", "@internal"];

pub fn is_tag(line: &str) -> bool {
    TAGS.iter().any(|t| {
        line.strip_prefix(t)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    })
}

/// The text of every `tag` line, tag removed.
pub fn tag_lines(doc: &[String], tag: &str) -> Vec<String> {
    doc.iter()
        .filter_map(|l| l.strip_prefix(tag))
        .filter(|rest| rest.is_empty() || rest.starts_with(' '))
        .map(|rest| rest.trim().to_string())
        .collect()
}

#[derive(Clone, Debug)]
enum ScopeKind {
    Struct(String),
    Namespace(String),
    Linkage,
}

#[derive(Clone, Debug)]
struct Scope {
    kind: ScopeKind,
    /// A struct's item and the line it opens on: a member on that line (a struct written on
    /// one line) shares its doc.
    owner: Option<(usize, usize)>,
    /// The item that ended right above (a group's previous member).
    adjacent: Option<usize>,
    heading: Option<String>,
}

#[derive(Clone, Debug)]
enum Mode {
    Statement,
    /// A function's body: brace depth, the function's item.
    Body {
        depth: u32,
        item: usize,
    },
    /// A brace initializer inside a statement.
    Init {
        depth: u32,
    },
    /// An enum's enumerators.
    Enum {
        depth: u32,
        item: usize,
    },
}

struct Parser {
    items: Vec<Item>,
    scopes: Vec<Scope>,
    block: Vec<String>,
    banner_lines: Option<Vec<String>>,
    banner: Option<Vec<String>>,
    banners: usize,
    titles: Vec<String>,
    /// (condition, is an include guard)
    conds: Vec<(String, bool)>,
    /// The last line was `#ifndef NAME`.
    ifndef: Option<String>,
    stmt: String,
    stmt_doc: Option<(Vec<String>, Option<usize>)>,
    stmt_trailing: Vec<String>,
    paren: i32,
    mode: Mode,
    body: String,
    enum_line: String,
    made_this_line: Vec<usize>,
    line_no: usize,
}

/// A scanned source: its declarations in order, and the first line of each banner (an
/// item's `banner_index` - 1 indexes it).
pub struct Scanned {
    pub items: Vec<Item>,
    pub banners: Vec<String>,
}

impl Scanned {
    /// The title of the banner an item sits under ("" before the first).
    pub fn banner_of(&self, item: &Item) -> &str {
        item.banner_index
            .checked_sub(1)
            .and_then(|i| self.banners.get(i))
            .map_or("", String::as_str)
    }
}

/// Every declaration of `source`, in order.
pub fn scan(source: &str) -> Scanned {
    let mut p = Parser {
        items: Vec::new(),
        scopes: vec![Scope {
            kind: ScopeKind::Linkage,
            owner: None,
            adjacent: None,
            heading: None,
        }],
        block: Vec::new(),
        banner_lines: None,
        banner: None,
        banners: 0,
        titles: Vec::new(),
        conds: Vec::new(),
        ifndef: None,
        stmt: String::new(),
        stmt_doc: None,
        stmt_trailing: Vec::new(),
        paren: 0,
        mode: Mode::Statement,
        body: String::new(),
        enum_line: String::new(),
        made_this_line: Vec::new(),
        line_no: 0,
    };
    for line in source.lines() {
        p.line(line);
    }
    p.resolve();
    Scanned {
        items: p.items,
        banners: p.titles,
    }
}

fn comment_text(trimmed: &str) -> String {
    let t = trimmed.trim_start_matches('/');
    t.strip_prefix(' ').unwrap_or(t).trim_end().to_string()
}

impl Parser {
    fn scope(&mut self) -> &mut Scope {
        let n = self.scopes.len() - 1;
        &mut self.scopes[n]
    }

    fn scope_names(&self) -> Vec<String> {
        self.scopes
            .iter()
            .filter_map(|s| match &s.kind {
                ScopeKind::Struct(n) | ScopeKind::Namespace(n) => Some(n.clone()),
                ScopeKind::Linkage => None,
            })
            .collect()
    }

    fn line(&mut self, line: &str) {
        self.line_no += 1;
        let trimmed = line.trim();
        self.made_this_line.clear();
        match self.mode {
            Mode::Body { .. } | Mode::Enum { .. } => {
                if trimmed.starts_with('#') {
                    self.body.push_str(trimmed);
                    self.body.push('\n');
                    return;
                }
                if trimmed.starts_with("//") {
                    return;
                }
            }
            Mode::Init { .. } => {}
            Mode::Statement => {
                if self.stmt.trim().is_empty() {
                    if trimmed.is_empty() {
                        self.block.clear();
                        self.scope().adjacent = None;
                        return;
                    }
                    if trimmed.starts_with("//") {
                        self.comment(trimmed);
                        return;
                    }
                    if trimmed.starts_with('#') {
                        self.preprocessor(trimmed);
                        return;
                    }
                } else if trimmed.starts_with("//") || trimmed.is_empty() {
                    return;
                }
            }
        }
        self.ifndef = None;
        let trailing = self.code(line);
        if let Some(t) = trailing {
            if !self.made_this_line.is_empty() {
                for &i in &self.made_this_line.clone() {
                    self.items[i].trailing.push(t.clone());
                }
            } else if !self.stmt.trim().is_empty() {
                self.stmt_trailing.push(t);
            }
        }
        match self.mode {
            Mode::Body { .. } => self.body.push('\n'),
            Mode::Enum { .. } => {
                let e = std::mem::take(&mut self.enum_line);
                self.enumerator(&e);
            }
            _ => self.stmt.push(' '),
        }
    }

    fn comment(&mut self, trimmed: &str) {
        let text = comment_text(trimmed);
        let dashes = text.len() >= 10 && text.chars().all(|c| c == '-');
        if dashes {
            match self.banner_lines.take() {
                None => {
                    self.banner_lines = Some(Vec::new());
                    self.banners += 1;
                    self.scope().heading = None;
                }
                Some(lines) => {
                    self.titles.push(lines.first().cloned().unwrap_or_default());
                    self.banner = Some(lines);
                }
            }
            self.block.clear();
            return;
        }
        if let Some(lines) = &mut self.banner_lines {
            lines.push(text);
            return;
        }
        if let Some(rest) = text.strip_prefix("---- ") {
            self.scope().heading = Some(rest.trim_end_matches('-').trim().to_string());
            self.block.clear();
            return;
        }
        self.block.push(text);
        self.scope().adjacent = None;
    }

    fn preprocessor(&mut self, trimmed: &str) {
        let directive = trimmed.trim_start_matches('#').trim_start();
        let (word, rest) = directive
            .split_once(char::is_whitespace)
            .map_or((directive, ""), |(w, r)| (w, r.trim()));
        let ifndef = self.ifndef.take();
        match word {
            "if" => self.conds.push((rest.to_string(), false)),
            "ifdef" => self.conds.push((format!("defined({rest})"), false)),
            "ifndef" => {
                self.conds.push((format!("!defined({rest})"), false));
                self.ifndef = Some(rest.to_string());
            }
            "elif" => {
                if let Some(top) = self.conds.last_mut() {
                    *top = (rest.to_string(), top.1);
                }
            }
            "else" => {
                if let Some(top) = self.conds.last_mut() {
                    *top = (format!("!({})", top.0), top.1);
                }
            }
            "endif" => {
                self.conds.pop();
            }
            "define" => {
                let (name, value) = rest
                    .split_once(char::is_whitespace)
                    .map_or((rest, ""), |(n, v)| (n, v.trim()));
                if ifndef.as_deref() == Some(name) {
                    // `#ifndef X` / `#define X`: an include guard, or a default the user may
                    // define first; either way the condition is no fact of the API.
                    if let Some(top) = self.conds.last_mut() {
                        top.1 = true;
                    }
                    if value.is_empty() {
                        return;
                    }
                }
                let (doc, prev) = self.take_doc();
                let i = self.push_item(
                    Kind::Macro,
                    name,
                    trimmed,
                    Some(value.to_string()),
                    doc,
                    prev,
                );
                self.scope().adjacent = Some(i);
            }
            _ => {}
        }
    }

    fn take_doc(&mut self) -> (Vec<String>, Option<usize>) {
        let prev = self.scope().adjacent;
        (std::mem::take(&mut self.block), prev)
    }

    fn push_item(
        &mut self,
        kind: Kind,
        name: &str,
        decl: &str,
        value: Option<String>,
        mut doc: Vec<String>,
        prev: Option<usize>,
    ) -> usize {
        let mut banner = false;
        if doc.is_empty() && kind == Kind::Struct {
            if let Some(b) = self.banner.take() {
                doc = b;
                banner = true;
            }
        }
        // A banner documents the struct that follows it (a macro may come between).
        if kind != Kind::Macro {
            self.banner = None;
        }
        // A group is of structs or of members, never both; a member on its struct's line
        // shares the struct's doc.
        let one_line = self
            .scopes
            .last()
            .and_then(|s| s.owner)
            .filter(|&(_, line)| line == self.line_no)
            .map(|(owner, _)| owner);
        let inherited_from = prev
            .filter(|&j| (self.items[j].kind == Kind::Struct) == (kind == Kind::Struct))
            .or(one_line)
            .filter(|_| doc.is_empty());
        let item = Item {
            kind,
            scope: self.scope_names(),
            name: name.to_string(),
            decl: collapse(decl),
            value,
            doc,
            trailing: Vec::new(),
            inherit_from: inherited_from,
            banner,
            body: String::new(),
            heading: self.scopes.last().and_then(|s| s.heading.clone()),
            conditions: self
                .conds
                .iter()
                .filter(|(_, guard)| !guard)
                .map(|(c, _)| c.clone())
                .collect(),
            deleted: false,
            banner_index: self.banners,
            enumerators: Vec::new(),
            example: None,
        };
        self.items.push(item);
        let i = self.items.len() - 1;
        self.made_this_line.push(i);
        i
    }

    /// Scans one line's code; returns its trailing comment.
    fn code(&mut self, line: &str) -> Option<String> {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut quote: Option<char> = None;
        let mut escaped = false;
        while i < chars.len() {
            let c = chars[i];
            if let Some(q) = quote {
                self.push_char(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if c == '/' && chars.get(i + 1) == Some(&'/') {
                let rest: String = chars[i..].iter().collect();
                return Some(comment_text(rest.trim()));
            }
            if c == '"' || c == '\'' {
                quote = Some(c);
                self.push_char(c);
                i += 1;
                continue;
            }
            self.code_char(c);
            i += 1;
        }
        None
    }

    fn push_char(&mut self, c: char) {
        match self.mode {
            Mode::Body { .. } => self.body.push(c),
            Mode::Enum { .. } => self.enum_line.push(c),
            _ => self.stmt.push(c),
        }
    }

    fn code_char(&mut self, c: char) {
        match self.mode.clone() {
            Mode::Body { depth, item } => {
                self.body.push(c);
                match c {
                    '{' => {
                        self.mode = Mode::Body {
                            depth: depth + 1,
                            item,
                        }
                    }
                    '}' if depth == 1 => {
                        self.items[item].body = std::mem::take(&mut self.body);
                        self.mode = Mode::Statement;
                        self.scope().adjacent = Some(item);
                    }
                    '}' => {
                        self.mode = Mode::Body {
                            depth: depth - 1,
                            item,
                        }
                    }
                    _ => {}
                }
            }
            Mode::Enum { depth, item } => match c {
                '{' => {
                    self.mode = Mode::Enum {
                        depth: depth + 1,
                        item,
                    }
                }
                '}' if depth == 1 => {
                    let e = std::mem::take(&mut self.enum_line);
                    self.enumerator(&e);
                    self.mode = Mode::Statement;
                    self.scope().adjacent = Some(item);
                }
                '}' => {
                    self.mode = Mode::Enum {
                        depth: depth - 1,
                        item,
                    }
                }
                ',' if depth == 1 => {
                    let e = std::mem::take(&mut self.enum_line);
                    self.enumerator(&e);
                }
                _ => self.enum_line.push(c),
            },
            Mode::Init { depth } => {
                self.stmt.push(c);
                match c {
                    '{' => self.mode = Mode::Init { depth: depth + 1 },
                    '}' if depth == 1 => self.mode = Mode::Statement,
                    '}' => self.mode = Mode::Init { depth: depth - 1 },
                    _ => {}
                }
            }
            Mode::Statement => {
                if self.stmt.trim().is_empty() && !c.is_whitespace() && c != '}' && c != ';' {
                    self.stmt_doc = Some(self.take_doc());
                }
                match c {
                    '(' => {
                        self.paren += 1;
                        self.stmt.push(c);
                    }
                    ')' => {
                        self.paren -= 1;
                        self.stmt.push(c);
                    }
                    ';' if self.paren == 0 => self.finish(),
                    '{' if self.paren == 0 => self.open(),
                    '}' if self.paren == 0 && self.stmt.trim().is_empty() => self.close(),
                    _ => self.stmt.push(c),
                }
            }
        }
    }

    fn enumerator(&mut self, text: &str) {
        let t = collapse(text);
        if t.is_empty() {
            return;
        }
        let item = match self.mode {
            Mode::Enum { item, .. } => item,
            _ => match self.items.iter().rposition(|i| i.kind == Kind::Enum) {
                Some(i) => i,
                None => return,
            },
        };
        self.items[item].enumerators.push(t);
    }

    fn close(&mut self) {
        self.stmt.clear();
        let closed = self.scopes.pop();
        if self.scopes.is_empty() {
            self.scopes.push(Scope {
                kind: ScopeKind::Linkage,
                owner: None,
                adjacent: None,
                heading: None,
            });
        }
        match closed.map(|s| s.kind) {
            Some(ScopeKind::Linkage) => {}
            Some(ScopeKind::Struct(name)) => {
                self.block.clear();
                let owner = self
                    .items
                    .iter()
                    .rposition(|i| i.kind == Kind::Struct && i.name == name);
                self.scope().adjacent = owner;
            }
            _ => {
                self.scope().adjacent = None;
                self.block.clear();
            }
        }
    }

    fn open(&mut self) {
        let text = collapse(&self.stmt);
        let (_, head) = split_template(&text);
        let first = head.split_whitespace().next().unwrap_or("");
        match first {
            "struct" | "union" | "class" => {
                let name = struct_name(head);
                let (doc, prev) = self.stmt_doc.take().unwrap_or_default();
                let i = self.push_item(Kind::Struct, &name, &text, None, doc, prev);
                self.apply_trailing(i);
                self.stmt.clear();
                self.scopes.push(Scope {
                    kind: ScopeKind::Struct(name),
                    owner: Some((i, self.line_no)),
                    adjacent: None,
                    heading: None,
                });
            }
            "namespace" => {
                let name = head.split_whitespace().nth(1).unwrap_or("").to_string();
                self.stmt.clear();
                self.stmt_doc = None;
                self.scopes.push(Scope {
                    kind: ScopeKind::Namespace(name),
                    owner: None,
                    adjacent: None,
                    heading: None,
                });
            }
            "extern" if head.starts_with("extern \"C\"") => {
                self.stmt.clear();
                // The block above the linkage block documents what is in it.
                if let Some((doc, _)) = self.stmt_doc.take() {
                    self.block = doc;
                }
                self.scopes.push(Scope {
                    kind: ScopeKind::Linkage,
                    owner: None,
                    adjacent: None,
                    heading: self.scopes.last().and_then(|s| s.heading.clone()),
                });
            }
            "enum" => {
                let name = head
                    .trim_start_matches("enum ")
                    .split([' ', ':', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string();
                let (doc, prev) = self.stmt_doc.take().unwrap_or_default();
                let i = self.push_item(Kind::Enum, &name, &text, None, doc, prev);
                self.apply_trailing(i);
                self.stmt.clear();
                self.mode = Mode::Enum { depth: 1, item: i };
            }
            _ if is_function(head) => {
                let (doc, prev) = self.stmt_doc.take().unwrap_or_default();
                let (name, sig) = function_name(&text);
                let i = self.push_item(Kind::Function, &name, &sig, None, doc, prev);
                self.apply_trailing(i);
                self.stmt.clear();
                self.body = String::from("{");
                self.mode = Mode::Body { depth: 1, item: i };
            }
            _ => {
                self.stmt.push('{');
                self.mode = Mode::Init { depth: 1 };
            }
        }
    }

    fn apply_trailing(&mut self, i: usize) {
        for t in std::mem::take(&mut self.stmt_trailing) {
            self.items[i].trailing.push(t);
        }
    }

    fn finish(&mut self) {
        let text = collapse(&self.stmt);
        self.stmt.clear();
        self.paren = 0;
        let Some((doc, prev)) = self.stmt_doc.take() else {
            return;
        };
        if text.is_empty() {
            return;
        }
        let (_, head) = split_template(&text);
        let first: String = head
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let made: Vec<usize> = match first.as_str() {
            "static_assert" => Vec::new(),
            "typedef" => {
                let name = if let Some(at) = head.find("(*") {
                    head[at + 2..].split(')').next().unwrap_or("").to_string()
                } else {
                    last_ident(head)
                };
                vec![self.push_item(Kind::Type, &name, &text, None, doc, prev)]
            }
            "using" => {
                let name = head
                    .trim_start_matches("using ")
                    .split([' ', '='])
                    .next()
                    .unwrap_or("")
                    .to_string();
                vec![self.push_item(Kind::Type, &name, &text, None, doc, prev)]
            }
            "struct" | "union" | "class" => {
                let name = struct_name(head);
                vec![self.push_item(Kind::Struct, &name, &text, None, doc, prev)]
            }
            _ if is_function(head) => {
                let (name, sig) = function_name(&text);
                let i = self.push_item(Kind::Function, &name, &sig, None, doc, prev);
                self.items[i].deleted = text.contains("= delete") || text.contains("= default");
                vec![i]
            }
            _ => self.variables(&text, doc, prev),
        };
        for &i in &made {
            self.apply_trailing(i);
        }
        self.stmt_trailing.clear();
        if let Some(&last) = made.last() {
            self.scope().adjacent = Some(last);
        }
    }

    /// `static constexpr unsigned A = 1u, B = 2u;`, `unsigned char* base;`, ...
    fn variables(&mut self, text: &str, doc: Vec<String>, prev: Option<usize>) -> Vec<usize> {
        let in_struct = matches!(
            self.scopes.last().map(|s| &s.kind),
            Some(ScopeKind::Struct(_))
        );
        let constant = text.contains("constexpr") || text.starts_with("const ");
        let kind = if constant {
            Kind::Constant
        } else if in_struct {
            Kind::Field
        } else {
            Kind::Variable
        };
        let parts = split_top(text, ',');
        let mut made = Vec::new();
        let mut type_words = String::new();
        for (n, part) in parts.iter().enumerate() {
            let (lhs, value) = match find_top(part, '=') {
                Some(at) => (part[..at].trim(), Some(part[at + 1..].trim().to_string())),
                None => (part.trim(), None),
            };
            // A brace initializer `name{}` or an array `name[N]`.
            let lhs_name = lhs.split(['{', '[']).next().unwrap_or(lhs).trim();
            let name = last_ident(lhs_name);
            if n == 0 {
                type_words = lhs_name[..lhs_name.len() - name.len()].trim().to_string();
            }
            let decl = if n == 0 {
                lhs.to_string()
            } else {
                format!("{type_words} {lhs}")
            };
            let d = if n == 0 { doc.clone() } else { Vec::new() };
            let p = if n == 0 { prev } else { made.last().copied() };
            made.push(self.push_item(kind, &name, &decl, value, d, p));
        }
        made
    }

    /// Gives each group member without a doc of its own the group's (less its `@internal`).
    fn resolve(&mut self) {
        for i in 0..self.items.len() {
            if let Some(j) = self.items[i].inherit_from {
                let doc: Vec<String> = self.items[j]
                    .doc
                    .iter()
                    .filter(|l| !l.starts_with("@internal"))
                    .cloned()
                    .collect();
                self.items[i].doc = doc;
            }
        }
    }
}

pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// (`template <...>` or "", the rest).
fn split_template(text: &str) -> (&str, &str) {
    let t = text.trim();
    if !t.starts_with("template") {
        return ("", t);
    }
    let mut depth = 0;
    for (i, c) in t.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return (&t[..=i], t[i + 1..].trim());
                }
            }
            _ => {}
        }
    }
    ("", t)
}

fn struct_name(head: &str) -> String {
    let mut rest = head
        .split_once(' ')
        .map_or("", |(_, r)| r)
        .trim()
        .to_string();
    loop {
        if let Some(r) = rest.strip_prefix("[[") {
            rest = r.split_once("]]").map_or("", |(_, r)| r).trim().to_string();
        } else if rest.starts_with("alignas(") || rest.starts_with("__align__(") {
            rest = rest
                .split_once(')')
                .map_or("", |(_, r)| r)
                .trim()
                .to_string();
        } else {
            break;
        }
    }
    let end = rest
        .find(|c: char| c == '{' || c == ':' && !rest.contains("::") || c == ';')
        .unwrap_or(rest.len());
    let name = rest[..end].trim();
    // `tma_wgmma_op<A, B, N>`: a specialisation keeps its arguments.
    name.trim_end_matches(" final").trim().to_string()
}

const NOT_CALLS: [&str; 5] = [
    "__align__",
    "alignas",
    "__launch_bounds__",
    "__attribute__",
    "decltype",
];

/// The index of the `(` of a function's parameter list, if `head` declares a function.
fn param_paren(head: &str) -> Option<usize> {
    let bytes = head.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' if !head[..i].contains("operator") => return None,
            b'(' => {
                let before = head[..i].trim_end();
                let ident: String = before
                    .chars()
                    .rev()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if NOT_CALLS.contains(&ident.as_str()) {
                    // skip its parentheses
                    let mut depth = 0;
                    while i < bytes.len() {
                        match bytes[i] {
                            b'(' => depth += 1,
                            b')' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                } else {
                    return Some(i);
                }
            }
            b'{' => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_function(head: &str) -> bool {
    param_paren(head).is_some()
}

/// (name, signature without initializer list or body).
fn function_name(text: &str) -> (String, String) {
    let (tmpl, head) = split_template(text);
    let Some(p) = param_paren(head) else {
        return (last_ident(head), text.to_string());
    };
    let before = head[..p].trim_end();
    let name = if let Some(at) = before.rfind("operator") {
        before[at..].replace(' ', "")
    } else {
        let ident: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '~')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        ident
    };
    // The parameter list's closing paren.
    let mut depth = 0;
    let mut end = head.len();
    for (i, c) in head[p..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = p + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    let mut sig = head[..end].to_string();
    let after = head[end..].trim_start();
    for q in ["const", "noexcept"] {
        if after.starts_with(q) {
            sig.push(' ');
            sig.push_str(q);
        }
    }
    if after.contains("= delete") {
        sig.push_str(" = delete");
    }
    let sig = if tmpl.is_empty() {
        sig
    } else {
        format!("{tmpl} {sig}")
    };
    (name, sig)
}

fn last_ident(s: &str) -> String {
    let s = s.trim_end();
    let ident: String = s
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    ident
}

/// Splits at `sep` outside (), {}, [] and template arguments.
fn split_top(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            '<' if prev.is_alphanumeric() || prev == '_' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ => {}
        }
        if c == sep && depth == 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
        prev = c;
    }
    out.push(cur);
    out
}

/// The first `c` outside brackets (an `=` that is no part of `==`, `<=`, `>=`, `!=`).
fn find_top(s: &str, c: char) -> Option<usize> {
    let b: Vec<char> = s.chars().collect();
    let mut depth = 0i32;
    let mut byte = 0usize;
    for (i, &ch) in b.iter().enumerate() {
        match ch {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            _ => {}
        }
        if ch == c && depth == 0 {
            let prev = if i > 0 { b[i - 1] } else { ' ' };
            let next = b.get(i + 1).copied().unwrap_or(' ');
            if c != '=' || (!"=<>!".contains(prev) && next != '=') {
                return Some(byte);
            }
        }
        byte += ch.len_utf8();
    }
    None
}

/// Names called in a body: an identifier followed by `(` (or by template arguments and `(`).
pub fn calls(body: &str) -> Vec<String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_alphabetic() || chars[i] == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            if j < chars.len() && chars[j] == '<' {
                let mut depth = 0;
                while j < chars.len() {
                    match chars[j] {
                        '<' => depth += 1,
                        '>' => {
                            depth -= 1;
                            if depth == 0 {
                                j += 1;
                                break;
                            }
                        }
                        ';' | '{' => break,
                        _ => {}
                    }
                    j += 1;
                }
            }
            if j < chars.len() && chars[j] == '(' {
                out.push(ident);
            }
        } else {
            i += 1;
        }
    }
    out
}
