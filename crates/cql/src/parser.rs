//! A recursive-descent parser for CQL statements, following Cassandra's
//! `Parser.g`. Syntax errors carry Cassandra-style `line L:C` positions.

use crate::ast::*;
use crate::lexer::{tokenize, Tok, Token};
use sibyl_types::Constant;

/// A syntax error; `message` is what the client sees (SYNTAX_ERROR, 0x2000).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
}

type PResult<T> = Result<T, ParseError>;

/// Parses exactly one statement (a trailing `;` is allowed).
pub fn parse_statement(src: &str) -> PResult<ParsedStatement> {
    let mut p = Parser::new(src)?;
    let st = p.statement()?;
    p.eat_sym(";");
    if !p.at_eof() {
        return Err(p.trailing("expecting EOF"));
    }
    Ok(ParsedStatement {
        statement: st,
        bind_markers: p.markers,
        memo: Default::default(),
    })
}

/// Parses a `;`-separated script of statements.
pub fn parse_statements(src: &str) -> PResult<Vec<ParsedStatement>> {
    let mut p = Parser::new(src)?;
    let mut out = Vec::new();
    loop {
        while p.eat_sym(";") {}
        if p.at_eof() {
            break;
        }
        p.markers.clear();
        let st = p.statement()?;
        out.push(ParsedStatement {
            statement: st,
            bind_markers: std::mem::take(&mut p.markers),
            memo: Default::default(),
        });
        if !p.eat_sym(";") && !p.at_eof() {
            return Err(p.trailing("expecting ';'"));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    markers: Vec<BindMarker>,
    src: String,
    /// Nesting of terms, selectors, types and relations being parsed.
    depth: usize,
    /// The token of the last table (or type, index) name written without
    /// its keyspace: ANTLR decides between `ks.name` and `name` on the
    /// token after it, so an error there is reported as that decision's.
    after_name: Option<usize>,
    /// Where the last term ended, and the token a failing decision after it
    /// highlights (a bind marker's own, else the next).
    term_end: Option<(usize, usize)>,
}

/// The deepest nesting of terms, selectors, types and relations (and the
/// longest chain of arithmetic operators) a statement may have. Everything
/// recursive after the parser (planning, evaluation, printing) stays within
/// it, so no statement can overflow a stack. Cassandra 5.0.4 fails these with
/// a ServerError `java.lang.StackOverflowError` already at 200 parentheses.
pub const MAX_NESTING: usize = 100;

fn fold_ident(t: &Token) -> Option<String> {
    match &t.tok {
        Tok::Ident(s) => Some(s.to_lowercase()),
        Tok::QuotedIdent(s) => Some(s.clone()),
        _ => None,
    }
}

impl Parser {
    fn new(src: &str) -> PResult<Parser> {
        let toks = tokenize(src).map_err(|e| ParseError {
            message: format!("line {}:{} {}", e.line, e.col, e.message),
        })?;
        Ok(Parser {
            toks,
            pos: 0,
            markers: Vec::new(),
            src: src.to_string(),
            depth: 0,
            after_name: None,
            term_end: None,
        })
    }

    /// Runs `f` one level deeper, refusing past [`MAX_NESTING`].
    fn nested<T>(&mut self, extra: usize, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth + extra >= MAX_NESTING {
            let t = self.peek();
            return Err(ParseError {
                message: format!(
                    "line {}:{} expression nested too deeply (more than {MAX_NESTING} levels)",
                    t.line, t.col
                ),
            });
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn peek(&self) -> &Token {
        let i = self.pos.min(self.toks.len() - 1);
        &self.toks[i]
    }

    fn peek_at(&self, n: usize) -> &Token {
        let i = (self.pos + n).min(self.toks.len() - 1);
        &self.toks[i]
    }

    fn at_eof(&self) -> bool {
        self.peek().tok == Tok::Eof
    }

    fn advance(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    /// Byte offset of a token's first character.
    fn offset(&self, t: &Token) -> usize {
        let mut line_start = 0;
        for _ in 1..t.line {
            match self.src[line_start..].find('\n') {
                Some(i) => line_start += i + 1,
                None => break,
            }
        }
        self.src[line_start..]
            .char_indices()
            .nth(t.col)
            .map(|(i, _)| line_start + i)
            .unwrap_or(self.src.len())
    }

    /// Cassandra's `ErrorCollector` snippet for an error at the current
    /// token: see [`Parser::context_at`].
    fn context(&self) -> String {
        let pos = self.pos.min(self.toks.len() - 1);
        self.context_at(pos, pos)
    }

    /// The text ANTLR holds for a token: string literals and quoted names
    /// without their quotes (the snippet highlights that many characters).
    fn token_text(t: &Token) -> String {
        match &t.tok {
            // ANTLR shows an empty quoted name as written
            Tok::QuotedIdent(s) if s.is_empty() => "\"\"".into(),
            Tok::Str(s) | Tok::QuotedIdent(s) => s.clone(),
            _ => t.text.clone(),
        }
    }

    /// Cassandra's `ErrorCollector` snippet: the source from ten tokens
    /// before the parser's position `index` (whitespace runs count as tokens,
    /// line breaks are dropped) to two tokens after it, but no further than
    /// the last token the parser has looked at (`seen`); the token at
    /// `index` in brackets, `...` where the query goes on:
    /// `(SELECT * FRM [t]...)`. A token's extent is as many characters as
    /// ANTLR's text of it has ([`Parser::token_text`]).
    fn context_at(&self, index: usize, seen: usize) -> String {
        let last = self.toks.len() - 1;
        let (index, seen) = (index.min(last), seen.min(last).max(index.min(last)));
        // token starts and ends, with a pseudo-token for each gap of whitespace
        // or comments
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut prev_end = 0;
        let mut offending = 0;
        let mut seen_unit = 0;
        for (i, t) in self.toks.iter().enumerate().take(seen + 1) {
            let start = self.offset(t);
            if start > prev_end {
                spans.push((prev_end, start));
            }
            if i == index {
                offending = spans.len();
            }
            if i == seen {
                seen_unit = spans.len();
            }
            // the end of input has no text
            let end = if t.tok == Tok::Eof {
                start
            } else {
                let n = Self::token_text(t).chars().count();
                self.src[start..]
                    .char_indices()
                    .nth(n)
                    .map(|(i, _)| start + i)
                    .unwrap_or(self.src.len())
            };
            spans.push((start, end));
            prev_end = start + t.text.len();
        }
        let from = spans[offending.saturating_sub(10)].0;
        let to_unit = seen_unit.min(offending + 2);
        let to = spans[to_unit].1.max(spans[to_unit].0);
        let (off_start, off_end) = spans[offending];
        let part = |a: usize, b: usize| {
            self.src
                .get(a..b.max(a))
                .unwrap_or("")
                .replace(['\n', '\r'], "")
        };
        let mut s = String::new();
        if from > 0 {
            s.push_str("...");
        }
        s.push_str(&part(from, off_start));
        s.push('[');
        s.push_str(&part(off_start, off_end));
        s.push(']');
        s.push_str(&part(off_end, to.max(off_end)));
        if to.max(off_end) < self.src.trim_end_matches('\n').len() {
            s.push_str("...");
        }
        s
    }

    /// ANTLR's failed two-token decision (a name, or `EXISTS` that may name
    /// a column): the token after `first` is the one named, `first` the
    /// one highlighted: `no viable alternative at input 'WHER' (SELECT *
    /// FROM [t] WHER...)`.
    fn no_viable_after(&self, first: usize) -> ParseError {
        let next = (first + 1).min(self.toks.len() - 1);
        self.no_viable_at(next, first)
    }

    /// ANTLR's NoViableAltException of a decision that started at token
    /// `start` and failed at the current one: the message names the current
    /// token, the snippet highlights the decision's start.
    fn no_viable_from(&self, start: usize) -> ParseError {
        let pos = self.pos.min(self.toks.len() - 1);
        self.no_viable_at(pos, start)
    }

    /// No viable alternative at token `at`, the snippet highlighting token
    /// `start` and going on to `at`.
    fn no_viable_at(&self, at: usize, start: usize) -> ParseError {
        let t = &self.toks[at];
        if t.tok == Tok::Eof {
            return ParseError {
                message: "line 0:-1 no viable alternative at input '<EOF>'".into(),
            };
        }
        ParseError {
            message: format!(
                "line {}:{} no viable alternative at input '{}' ({})",
                t.line,
                t.col,
                Self::token_text(t),
                self.context_at(start, at)
            ),
        }
    }

    /// Whether the current token may follow a term somewhere in the grammar:
    /// after a statement's last term, ANTLR's decision there fails on any
    /// other token, and these end the statement where it expected its end.
    fn may_follow_term(&self) -> bool {
        let t = self.peek();
        matches!(t.tok, Tok::Sym("," | ")" | "]" | "}" | ":" | ";"))
            || [
                "insert", "update", "delete", "apply", "allow", "limit", "order", "group", "per",
                "where", "primary", "desc", "asc",
            ]
            .iter()
            .any(|k| matches!(&t.tok, Tok::Ident(s) if s.eq_ignore_ascii_case(k)))
    }

    /// The error for a token the statement cannot end with. After a
    /// relation's or condition's term ANTLR's decision looked past it: a
    /// token that cannot follow a term fails that decision (no viable
    /// alternative), one that can is not the `expected` end, ANTLR having
    /// read the token after it. After a table name, the name's decision
    /// fails (see [`Parser::error_here`]).
    fn trailing(&self, expected: &str) -> ParseError {
        if let Some((end, shown)) = self.term_end {
            if end == self.pos {
                if !self.may_follow_term() {
                    return self.no_viable_from(shown);
                }
                return self.error_seen(expected, self.pos + 1);
            }
        }
        self.error_here(expected)
    }

    fn error_here(&self, expecting: &str) -> ParseError {
        self.error_seen(expecting, self.pos)
    }

    /// A mismatched token after the parser looked ahead up to token `seen`;
    /// when what it looked at is the end of input, ANTLR leaves the snippet
    /// out.
    fn error_seen(&self, expecting: &str, seen: usize) -> ParseError {
        let t = self.peek();
        // the decision on an unqualified table name looked at this token
        if let Some(i) = self.after_name {
            if self.pos == i + 1 {
                return self.no_viable_after(i);
            }
        }
        let pos = self.pos.min(self.toks.len() - 1);
        let seen = seen.min(self.toks.len() - 1);
        let msg = if t.tok == Tok::Eof {
            // ANTLR reports the end of input at line 0:-1
            format!("line 0:-1 mismatched input '<EOF>' {expecting}")
        } else if seen > pos && self.toks[seen].tok == Tok::Eof {
            format!(
                "line {}:{} mismatched input '{}' {}",
                t.line,
                t.col,
                Self::token_text(t),
                expecting
            )
        } else {
            // after `..` the lexer has read the token after it (a float, or not)
            let next = (pos + 1).min(self.toks.len() - 1);
            let seen = if t.tok == Tok::Sym("..")
                && self.offset(&self.toks[next]) == self.offset(t) + t.text.len()
                && self.toks[next].tok != Tok::Eof
            {
                seen.max(next)
            } else {
                seen
            };
            format!(
                "line {}:{} mismatched input '{}' {} ({})",
                t.line,
                t.col,
                Self::token_text(t),
                expecting,
                self.context_at(pos, seen)
            )
        };
        ParseError { message: msg }
    }

    fn no_viable(&self) -> ParseError {
        let t = self.peek();
        if t.tok == Tok::Eof {
            return ParseError {
                message: "line 0:-1 no viable alternative at input '<EOF>'".into(),
            };
        }
        if let Some(i) = self.after_name {
            if self.pos == i + 1 {
                return self.no_viable_after(i);
            }
        }
        ParseError {
            message: format!(
                "line {}:{} no viable alternative at input '{}' ({})",
                t.line,
                t.col,
                Self::token_text(t),
                self.context()
            ),
        }
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(&self.peek_at(n).tok, Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.advance();
            true
        } else {
            false
        }
    }

    /// Parser.g's `native_type` (what CAST takes), as written.
    fn native_type(&mut self) -> PResult<String> {
        if !sibyl_types::ident::NATIVE_TYPE_NAMES
            .iter()
            .any(|n| self.is_kw(n))
        {
            return Err(self.no_viable());
        }
        self.ident_any()
    }

    /// Items separated by `,` up to `close` (consumed); none when `close`
    /// comes first.
    fn list_until<T>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        let mut items = Vec::new();
        if self.eat_sym(close) {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.eat_sym(close) {
                return Ok(items);
            }
            self.expect_sym(",")?;
        }
    }

    fn expect_kw(&mut self, kw: &str) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expecting K_{}", kw.to_uppercase())))
        }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(&self.peek().tok, Tok::Sym(x) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> PResult<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expecting '{s}'")))
        }
    }

    /// An identifier (unquoted ones lower-cased); reserved words are refused.
    fn ident(&mut self) -> PResult<String> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Ident(s) if sibyl_types::ident::is_reserved(s) => Err(self.no_viable()),
            Tok::Ident(_) | Tok::QuotedIdent(_) => {
                self.advance();
                Ok(fold_ident(&t).unwrap_or_default())
            }
            _ => Err(self.no_viable()),
        }
    }

    /// Whether the next token is `""`, a quoted name with nothing inside,
    /// which Cassandra's grammar does not take as a keyspace, table or
    /// column name.
    fn at_empty_quoted(&self) -> bool {
        matches!(&self.peek().tok, Tok::QuotedIdent(s) if s.is_empty())
    }

    /// A keyspace, table or column name: an identifier, not `""`.
    fn name_ident(&mut self) -> PResult<String> {
        if self.at_empty_quoted() {
            return Err(self.no_viable());
        }
        self.ident()
    }

    /// A user type's name (`[ks.]name`): Cassandra's `userTypeName` reads an
    /// unquoted native type name (`int`, `text`...) only as a keyspace.
    fn user_type_name(&mut self) -> PResult<QualifiedName> {
        let native = |t: &Token| matches!(&t.tok, Tok::Ident(s) if sibyl_types::ident::NATIVE_TYPE_NAMES.contains(&s.to_lowercase().as_str()));
        if native(self.peek()) {
            if !matches!(self.peek_at(1).tok, Tok::Sym(".")) {
                self.advance();
                return Err(self.error_here("expecting '.'"));
            }
            let ks = self.ident_any()?;
            self.advance();
            if native(self.peek()) {
                return Err(self.no_viable());
            }
            let name = self.name_ident()?;
            return Ok(QualifiedName {
                keyspace: Some(ks),
                name,
            });
        }
        let q = self.qualified_name()?;
        // Parser.g's non_type_ident: an unquoted name Cassandra keeps for
        // types of its own, compared as written
        if let Tok::Ident(s) = &self.toks[self.pos - 1].tok {
            const RESERVED: [&str; 6] = [
                "byte",
                "complex",
                "enum",
                "interval",
                "macaddr",
                "bitstring",
            ];
            if RESERVED.contains(&s.as_str()) {
                return Err(ParseError {
                    message: format!("Invalid (reserved) user type name {s}"),
                });
            }
        }
        if q.keyspace.is_some()
            && matches!(&self.toks[self.pos - 1].tok, Tok::Ident(s) if sibyl_types::ident::NATIVE_TYPE_NAMES.contains(&s.to_lowercase().as_str()))
        {
            self.pos -= 1;
            return Err(self.no_viable());
        }
        Ok(q)
    }

    fn qualified_name(&mut self) -> PResult<QualifiedName> {
        let first = self.name_ident()?;
        self.after_name = Some(self.pos - 1);
        if self.eat_sym(".") {
            let second = self.name_ident()?;
            Ok(QualifiedName {
                keyspace: Some(first),
                name: second,
            })
        } else {
            Ok(QualifiedName {
                keyspace: None,
                name: first,
            })
        }
    }

    fn if_not_exists(&mut self) -> PResult<bool> {
        if self.is_kw("if") {
            self.advance();
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn if_exists(&mut self) -> PResult<bool> {
        if self.is_kw("if") && self.is_kw_at(1, "exists") {
            self.advance();
            self.advance();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn statement(&mut self) -> PResult<Statement> {
        let t = self.peek().clone();
        let kw = match &t.tok {
            Tok::Ident(s) => s.to_lowercase(),
            _ => return Err(self.no_viable()),
        };
        match kw.as_str() {
            "select" => self.select().map(|s| Statement::Select(Box::new(s))),
            "insert" => self.insert().map(|s| Statement::Insert(Box::new(s))),
            "update" => self.update().map(|s| Statement::Update(Box::new(s))),
            "delete" => self.delete().map(|s| Statement::Delete(Box::new(s))),
            "begin" => self.batch().map(|s| Statement::Batch(Box::new(s))),
            "use" => {
                self.advance();
                Ok(Statement::Use(self.name_ident()?))
            }
            "truncate" => {
                self.advance();
                if !self.eat_kw("table") {
                    self.eat_kw("columnfamily");
                }
                Ok(Statement::Truncate(self.qualified_name()?))
            }
            "create" => self.create(),
            "drop" => self.drop(),
            "alter" => self.alter(),
            "describe" | "desc" => self.describe(),
            _ => Err(self.no_viable()),
        }
    }

    // ---- terms ----

    /// Whether a bind marker (`?` or `:name`) starts here.
    fn starts_marker(&self) -> bool {
        self.is_sym("?")
            || (self.is_sym(":")
                && matches!(self.peek_at(1).tok, Tok::Ident(_) | Tok::QuotedIdent(_)))
    }

    fn bind_marker(&mut self) -> PResult<Option<BindMarker>> {
        if self.eat_sym("?") {
            let m = BindMarker {
                index: self.markers.len(),
                name: None,
            };
            self.markers.push(m.clone());
            return Ok(Some(m));
        }
        if self.is_sym(":") && matches!(self.peek_at(1).tok, Tok::Ident(_) | Tok::QuotedIdent(_)) {
            self.advance();
            let name = self.ident_any()?;
            let m = BindMarker {
                index: self.markers.len(),
                name: Some(name),
            };
            self.markers.push(m.clone());
            return Ok(Some(m));
        }
        Ok(None)
    }

    /// Any identifier, keywords included (for positions where Cassandra allows them).
    fn ident_any(&mut self) -> PResult<String> {
        let t = self.peek().clone();
        match fold_ident(&t) {
            Some(s) => {
                self.advance();
                Ok(s)
            }
            None => Err(self.no_viable()),
        }
    }

    fn constant(&mut self) -> Option<Constant> {
        let t = self.peek().clone();
        let c = match &t.tok {
            Tok::Str(s) => Constant::String(s.clone()),
            Tok::Integer(s) => Constant::Integer(s.clone()),
            Tok::Float(s) => Constant::Float(s.clone()),
            Tok::Hex(h) => Constant::Hex(h.clone()),
            Tok::Uuid(u) => Constant::Uuid(u.clone()),
            Tok::Duration(d) => Constant::Duration(d.clone()),
            Tok::Ident(s) if s.eq_ignore_ascii_case("true") => Constant::Boolean(true),
            Tok::Ident(s) if s.eq_ignore_ascii_case("false") => Constant::Boolean(false),
            Tok::Sym("-") => {
                let n = self.peek_at(1).clone();
                let c = match &n.tok {
                    Tok::Integer(s) => Constant::Integer(format!("-{s}")),
                    Tok::Float(s) => Constant::Float(format!("-{s}")),
                    Tok::Duration(s) => Constant::Duration(format!("-{s}")),
                    _ => return None,
                };
                self.advance();
                c
            }
            _ => return None,
        };
        self.advance();
        Some(c)
    }

    /// A LIMIT's value: an integer or a bind marker only.
    fn limit_value(&mut self) -> PResult<Term> {
        if let Some(m) = self.bind_marker()? {
            return Ok(Term::Bind(m));
        }
        let int = match &self.peek().tok {
            Tok::Integer(_) => true,
            Tok::Sym("-") => matches!(self.peek_at(1).tok, Tok::Integer(_)),
            _ => false,
        };
        if !int {
            return Err(self.no_viable());
        }
        Ok(Term::Constant(
            self.constant().ok_or_else(|| self.no_viable())?,
        ))
    }

    fn term(&mut self) -> PResult<Term> {
        self.nested(0, |p| p.term_nested())
    }

    /// Cassandra's `termAddition`: `*`, `/`, `%` bind tighter than `+`, `-`.
    fn term_nested(&mut self) -> PResult<Term> {
        let mut t = self.term_product()?;
        let mut chain = 0;
        loop {
            let op = if self.is_sym("+") {
                '+'
            } else if self.is_sym("-") {
                '-'
            } else {
                break;
            };
            // `[1] + l` (a prepend): the operator is not followed by a term
            if !self.starts_term(1) {
                break;
            }
            self.advance();
            chain += 1;
            let rhs = self.nested(chain, |p| p.term_product())?;
            t = Term::Arith {
                op,
                lhs: Box::new(t),
                rhs: Box::new(rhs),
            };
        }
        Ok(t)
    }

    fn term_product(&mut self) -> PResult<Term> {
        let mut t = self.term_group()?;
        let mut chain = 0;
        loop {
            let op = if self.is_sym("*") {
                '*'
            } else if self.is_sym("/") {
                '/'
            } else if self.is_sym("%") {
                '%'
            } else {
                break;
            };
            self.advance();
            chain += 1;
            let rhs = self.nested(chain, |p| p.term_group())?;
            t = Term::Arith {
                op,
                lhs: Box::new(t),
                rhs: Box::new(rhs),
            };
        }
        Ok(t)
    }

    /// `-x` on a term that is not a number literal (those are folded).
    fn term_group(&mut self) -> PResult<Term> {
        if self.is_sym("-")
            && !matches!(
                self.peek_at(1).tok,
                Tok::Integer(_) | Tok::Float(_) | Tok::Duration(_)
            )
        {
            self.advance();
            let t = self.nested(1, |p| p.simple_term())?;
            return Ok(Term::Negate(Box::new(t)));
        }
        self.simple_term()
    }

    /// Whether the token `n` ahead starts a term (Cassandra's `simpleTerm`
    /// or `'-' simpleTerm`).
    fn starts_term(&self, n: usize) -> bool {
        match &self.peek_at(n).tok {
            Tok::Str(_)
            | Tok::Integer(_)
            | Tok::Float(_)
            | Tok::Hex(_)
            | Tok::Uuid(_)
            | Tok::Duration(_)
            | Tok::Sym("[")
            | Tok::Sym("{")
            | Tok::Sym("(")
            | Tok::Sym("?") => true,
            Tok::Sym("-") => self.starts_term(n + 1),
            Tok::Sym(":") => matches!(self.peek_at(n + 1).tok, Tok::Ident(_) | Tok::QuotedIdent(_)),
            Tok::Ident(s)
                if ["null", "true", "false"]
                    .iter()
                    .any(|k| s.eq_ignore_ascii_case(k)) =>
            {
                true
            }
            Tok::Ident(_) | Tok::QuotedIdent(_) => {
                self.peek_at(n + 1).tok == Tok::Sym("(")
                    || (self.peek_at(n + 1).tok == Tok::Sym(".")
                        && matches!(self.peek_at(n + 2).tok, Tok::Ident(_) | Tok::QuotedIdent(_))
                        && self.peek_at(n + 3).tok == Tok::Sym("("))
            }
            _ => false,
        }
    }

    /// After `(`: a type followed by `)` and something `follows` accepts
    /// (a type cast or hint); the position is left unchanged when not.
    fn type_hint(&mut self, follows: impl Fn(&Self) -> bool) -> Option<String> {
        let save = self.pos;
        let markers = self.markers.len();
        let looks_like_type = matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && !matches!(&self.peek().tok, Tok::Ident(s) if ["null", "true", "false"].iter().any(|k| s.eq_ignore_ascii_case(k)));
        if looks_like_type {
            if let Ok(typ) = self.type_text() {
                if self.eat_sym(")") && follows(self) {
                    return Some(typ);
                }
            }
        }
        self.pos = save;
        self.markers.truncate(markers);
        None
    }

    fn simple_term(&mut self) -> PResult<Term> {
        if let Some(m) = self.bind_marker()? {
            return Ok(Term::Bind(m));
        }
        if let Some(c) = self.constant() {
            return Ok(Term::Constant(c));
        }
        if self.eat_kw("null") {
            return Ok(Term::Null);
        }
        if self.eat_sym("[") {
            let items = self.list_until("]", |p| p.term())?;
            return Ok(Term::List(items));
        }
        if self.eat_sym("{") {
            return self.brace_term();
        }
        if self.eat_sym("(") {
            // cast `(type) term` or tuple
            if let Some(typ) = self.type_hint(|p| {
                p.starts_term(0)
                    && (!p.is_sym("-")
                        || matches!(
                            p.peek_at(1).tok,
                            Tok::Integer(_) | Tok::Float(_) | Tok::Duration(_)
                        ))
            }) {
                let term = self.nested(1, |p| p.simple_term())?;
                return Ok(Term::Cast {
                    typ,
                    term: Box::new(term),
                });
            }
            let mut items = Vec::new();
            loop {
                items.push(self.term()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
            return Ok(Term::Tuple(items));
        }
        if self.is_sym("-") {
            return self.term_group();
        }
        // Parser.g: K_CAST '(' simpleTerm K_AS native_type ')', the call of
        // the native function system.cast_as_<type>
        if self.is_kw("cast") && self.peek_at(1).tok == Tok::Sym("(") {
            self.advance();
            self.advance();
            let inner = self.nested(1, |p| p.simple_term())?;
            self.expect_kw("as")?;
            let typ = self.native_type()?.to_lowercase();
            self.expect_sym(")")?;
            return Ok(Term::Function {
                name: format!("system.cast_as_{typ}"),
                args: vec![inner],
            });
        }
        // function call
        if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_)) {
            let start = self.pos;
            let mut name = self.ident_any()?;
            if self.is_sym(".")
                && matches!(self.peek_at(1).tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            {
                self.advance();
                name = format!("{name}.{}", self.ident_any()?);
            }
            if self.eat_sym("(") {
                let args = self.list_until(")", |p| p.term())?;
                return Ok(Term::Function { name, args });
            }
            // ANTLR's decision for a function call looked past the name
            return Err(self.no_viable_from(start));
        }
        Err(self.no_viable())
    }

    /// After `{`: a map, a set, or a UDT literal.
    fn brace_term(&mut self) -> PResult<Term> {
        self.nested(0, |p| p.brace_term_nested())
    }

    fn brace_term_nested(&mut self) -> PResult<Term> {
        if self.eat_sym("}") {
            return Ok(Term::Map(Vec::new()));
        }
        // UDT literal: ident ':'
        if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && self.peek_at(1).tok == Tok::Sym(":")
            && !self.is_kw("true")
            && !self.is_kw("false")
            && !self.is_kw("null")
        {
            let mut fields = Vec::new();
            loop {
                let f = self.ident_any()?;
                self.expect_sym(":")?;
                let v = self.term()?;
                fields.push((f, v));
                if self.eat_sym("}") {
                    break;
                }
                self.expect_sym(",")?;
            }
            return Ok(Term::UserType(fields));
        }
        let first = self.term()?;
        if self.eat_sym(":") {
            let v = self.term()?;
            let mut pairs = vec![(first, v)];
            loop {
                if self.eat_sym("}") {
                    break;
                }
                self.expect_sym(",")?;
                let k = self.term()?;
                self.expect_sym(":")?;
                let v = self.term()?;
                pairs.push((k, v));
            }
            Ok(Term::Map(pairs))
        } else {
            let mut items = vec![first];
            loop {
                if self.eat_sym("}") {
                    break;
                }
                self.expect_sym(",")?;
                items.push(self.term()?);
            }
            Ok(Term::Set(items))
        }
    }

    // ---- SELECT ----

    fn select(&mut self) -> PResult<Select> {
        self.expect_kw("select")?;
        // Parser.g: `((K_JSON selectClause)=> K_JSON)?` and the same for
        // DISTINCT: a modifier only when a select clause follows it
        let json = self.is_kw("json") && self.select_clause_after(true);
        if json {
            self.advance();
        }
        let distinct = self.is_kw("distinct") && self.select_clause_after(false);
        if distinct {
            self.advance();
        }
        let selectors = self.select_clause()?;
        self.expect_kw("from")?;
        let table = self.qualified_name()?;
        let where_clause = if self.eat_kw("where") {
            self.relations()?
        } else {
            Vec::new()
        };
        let mut group_by = Vec::new();
        let mut group_by_floor = None;
        if self.is_kw("group") {
            self.advance();
            self.expect_kw("by")?;
            loop {
                if self.is_kw("floor") && self.peek_at(1).tok == Tok::Sym("(") {
                    self.advance();
                    self.advance();
                    let col = self.ident()?;
                    self.expect_sym(",")?;
                    let d = match self.constant() {
                        Some(c) => constant_text(&c),
                        None => return Err(self.no_viable()),
                    };
                    self.expect_sym(")")?;
                    group_by.push(col.clone());
                    group_by_floor = Some((col, d));
                } else {
                    group_by.push(self.ident()?);
                }
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let mut order_by = Vec::new();
        let mut ann = None;
        if self.is_kw("order") {
            self.advance();
            self.expect_kw("by")?;
            loop {
                let column = self.ident()?;
                if self.is_kw("ann") && self.is_kw_at(1, "of") {
                    self.advance();
                    self.advance();
                    ann = Some((column, self.term()?));
                    break;
                }
                let descending = if self.eat_kw("desc") {
                    true
                } else {
                    self.eat_kw("asc");
                    false
                };
                order_by.push(Ordering { column, descending });
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let mut per_partition_limit = None;
        if self.is_kw("per") {
            self.advance();
            self.expect_kw("partition")?;
            self.expect_kw("limit")?;
            per_partition_limit = Some(self.limit_value()?);
        }
        let limit = if self.eat_kw("limit") {
            Some(self.limit_value()?)
        } else {
            None
        };
        let allow_filtering = if self.is_kw("allow") {
            self.advance();
            self.expect_kw("filtering")?;
            true
        } else {
            false
        };
        Ok(Select {
            table,
            json,
            distinct,
            selectors,
            where_clause,
            group_by,
            group_by_floor,
            order_by,
            ann,
            per_partition_limit,
            limit,
            allow_filtering,
        })
    }

    /// A selector with arithmetic: `*`, `/`, `%` bind tighter than `+`, `-`.
    fn selector(&mut self) -> PResult<Selector> {
        self.nested(0, |p| p.selector_nested())
    }

    fn selector_nested(&mut self) -> PResult<Selector> {
        let mut s = self.selector_product()?;
        let mut chain = 0;
        loop {
            let op = if self.is_sym("+") {
                '+'
            } else if self.is_sym("-") {
                '-'
            } else {
                break;
            };
            self.advance();
            chain += 1;
            let rhs = self.nested(chain, |p| p.selector_product())?;
            s = Selector::Arith {
                op,
                lhs: Box::new(s),
                rhs: Box::new(rhs),
            };
        }
        Ok(s)
    }

    fn selector_product(&mut self) -> PResult<Selector> {
        let mut s = self.selector_group()?;
        let mut chain = 0;
        loop {
            let op = if self.is_sym("*") {
                '*'
            } else if self.is_sym("/") {
                '/'
            } else if self.is_sym("%") {
                '%'
            } else {
                break;
            };
            self.advance();
            chain += 1;
            let rhs = self.nested(chain, |p| p.selector_group())?;
            s = Selector::Arith {
                op,
                lhs: Box::new(s),
                rhs: Box::new(rhs),
            };
        }
        Ok(s)
    }

    /// A `-` glued to a number at token `n` is part of the literal (Cassandra
    /// lexes `-1` as one INTEGER token); anywhere else it is a negation.
    fn negative_literal_at(&self, n: usize) -> bool {
        let (m, x) = (self.peek_at(n), self.peek_at(n + 1));
        m.tok == Tok::Sym("-")
            && matches!(x.tok, Tok::Integer(_) | Tok::Float(_) | Tok::Duration(_))
            && m.line == x.line
            && m.col + 1 == x.col
    }

    /// Cassandra's `selectionGroup`: `'-' selectionGroup` or a selector with
    /// its field and element modifiers.
    fn selector_group(&mut self) -> PResult<Selector> {
        if self.is_sym("-") && !self.negative_literal_at(0) {
            self.advance();
            let inner = self.nested(1, |p| p.selector_group())?;
            return Ok(Selector::Negate(Box::new(inner)));
        }
        self.selector_postfix()
    }

    /// Whether the current token starts Cassandra's `selectionGroupWithoutField`.
    fn starts_selector_atom(&self) -> bool {
        match &self.peek().tok {
            Tok::Str(_)
            | Tok::Integer(_)
            | Tok::Float(_)
            | Tok::Hex(_)
            | Tok::Uuid(_)
            | Tok::Duration(_)
            | Tok::Sym("[")
            | Tok::Sym("{")
            | Tok::Sym("(")
            | Tok::Sym("?")
            | Tok::QuotedIdent(_) => true,
            Tok::Sym("-") => self.negative_literal_at(0),
            Tok::Sym(":") => matches!(self.peek_at(1).tok, Tok::Ident(_) | Tok::QuotedIdent(_)),
            Tok::Ident(s) => {
                !sibyl_types::ident::is_reserved(s)
                    || self.peek_at(1).tok == Tok::Sym("(")
                    || ["null", "true", "false"]
                        .iter()
                        .any(|k| s.eq_ignore_ascii_case(k))
            }
            _ => false,
        }
    }

    fn selector_postfix(&mut self) -> PResult<Selector> {
        let s = self.selector_atom()?;
        self.selector_modifiers(s)
    }

    /// `.field` and `[key]`, `[from..to]` after a selector.
    /// `*` (no selectors) or selectors with their aliases.
    fn select_clause(&mut self) -> PResult<Vec<SelectItem>> {
        let mut selectors = Vec::new();
        if !self.eat_sym("*") {
            loop {
                let selector = self.selector()?;
                // an alias is a `noncol_ident`: no reserved word
                let alias = if self.eat_kw("as") {
                    Some(self.ident()?)
                } else {
                    None
                };
                selectors.push(SelectItem { selector, alias });
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        Ok(selectors)
    }

    /// Whether a select clause parses after the current token (ANTLR's
    /// syntactic predicate); nothing is consumed.
    fn select_clause_after(&mut self, distinct: bool) -> bool {
        let (pos, markers, depth) = (self.pos, self.markers.len(), self.depth);
        self.advance();
        if distinct && self.is_kw("distinct") && self.select_clause_after(false) {
            self.advance();
        }
        let ok = self.select_clause().is_ok();
        self.pos = pos;
        self.markers.truncate(markers);
        self.depth = depth;
        ok
    }

    fn selector_modifiers(&mut self, mut s: Selector) -> PResult<Selector> {
        let mut chain = 0;
        loop {
            chain += 1;
            self.nested(chain, |_| Ok(()))?;
            if self.is_sym(".") {
                self.advance();
                let field = self.ident_any()?;
                s = Selector::Field {
                    selector: Box::new(s),
                    field,
                };
            } else if self.is_sym("[") {
                // `m[..]` and `m[]` select nothing: ANTLR gives up at the `[`
                if self.peek_at(1).tok == Tok::Sym("]") {
                    return Err(self.error_seen("expecting K_FROM", self.pos + 1));
                }
                if self.peek_at(1).tok == Tok::Sym("..") && self.peek_at(2).tok == Tok::Sym("]") {
                    return Err(self.error_seen("expecting K_FROM", self.pos + 2));
                }
                self.advance();
                let from = if self.is_sym("..") {
                    None
                } else {
                    Some(self.term()?)
                };
                if self.eat_sym("..") {
                    let to = if self.is_sym("]") {
                        None
                    } else {
                        Some(self.term()?)
                    };
                    self.expect_sym("]")?;
                    s = Selector::Slice {
                        selector: Box::new(s),
                        from,
                        to,
                    };
                } else {
                    self.expect_sym("]")?;
                    let Some(key) = from else {
                        return Err(self.no_viable());
                    };
                    s = Selector::Element {
                        selector: Box::new(s),
                        key,
                    };
                }
            } else {
                break;
            }
        }
        Ok(s)
    }

    fn selector_atom(&mut self) -> PResult<Selector> {
        if self.is_kw("cast") && self.peek_at(1).tok == Tok::Sym("(") {
            self.advance();
            self.advance();
            let inner = self.selector()?;
            self.expect_kw("as")?;
            let typ = self.native_type()?;
            self.expect_sym(")")?;
            return Ok(Selector::Cast {
                selector: Box::new(inner),
                typ,
            });
        }
        // `ks.fn(...)`: a function named with its keyspace
        if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && self.peek_at(1).tok == Tok::Sym(".")
            && matches!(self.peek_at(2).tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && self.peek_at(3).tok == Tok::Sym("(")
        {
            let ks = self.ident()?;
            self.advance(); // .
                            // Parser.g's allowedFunctionName: also the keywords TOKEN and COUNT
            let f = if self.is_kw("token") || self.is_kw("count") {
                self.ident_any()?.to_lowercase()
            } else {
                self.ident()?
            };
            self.advance(); // (
            let mut args = Vec::new();
            if !self.eat_sym(")") {
                loop {
                    args.push(self.selector()?);
                    if self.eat_sym(")") {
                        break;
                    }
                    self.expect_sym(",")?;
                }
            }
            return Ok(Selector::Function {
                name: format!("{ks}.{f}"),
                args,
            });
        }
        if self.is_sym("(") {
            self.advance();
            if let Some(typ) = self.type_hint(|p| p.starts_selector_atom()) {
                let inner = self.nested(1, |p| p.selector_atom())?;
                return Ok(Selector::Hint {
                    typ,
                    selector: Box::new(inner),
                });
            }
            let mut items = Vec::new();
            loop {
                items.push(self.selector()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
            return Ok(Selector::Parens(items));
        }
        if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && self.peek_at(1).tok == Tok::Sym("(")
        {
            let quoted = matches!(self.peek().tok, Tok::QuotedIdent(_));
            let name = self.ident_any()?;
            self.advance(); // (
            let lname = if quoted {
                name.clone()
            } else {
                name.to_lowercase()
            };
            if lname == "count" && self.eat_sym("*") {
                self.expect_sym(")")?;
                return Ok(Selector::CountRows);
            }
            if lname == "count"
                && matches!(&self.peek().tok, Tok::Integer(s) if s == "1")
                && self.peek_at(1).tok == Tok::Sym(")")
            {
                self.advance();
                self.advance();
                return Ok(Selector::CountRows);
            }
            // no argument starts with `*`: the argument list is empty
            if self.is_sym("*") {
                return Err(self.error_here("expecting ')'"));
            }
            if lname == "writetime" || lname == "ttl" || lname == "maxwritetime" {
                let col = self.ident()?;
                let target = self.selector_modifiers(Selector::Column(col.clone()))?;
                if !self.is_sym(")") && !self.is_sym(",") {
                    return Err(self.no_viable());
                }
                self.expect_sym(")")?;
                return Ok(match (lname.as_str(), target) {
                    ("ttl", Selector::Column(c)) => Selector::Ttl(c),
                    ("writetime", Selector::Column(c)) => Selector::WriteTime(c),
                    (_, Selector::Column(c)) => Selector::Function {
                        name: lname,
                        args: vec![Selector::Column(c)],
                    },
                    (_, target) => Selector::MetaOf {
                        kind: lname,
                        column: col,
                        selector: Box::new(target),
                    },
                });
            }
            let mut args = Vec::new();
            if !self.eat_sym(")") {
                loop {
                    args.push(self.selector()?);
                    if self.eat_sym(")") {
                        break;
                    }
                    self.expect_sym(",")?;
                }
            }
            return Ok(Selector::Function { name: lname, args });
        }
        if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
            && !self.is_kw("true")
            && !self.is_kw("false")
            && !self.is_kw("null")
        {
            let start = self.pos;
            let c = self.ident()?;
            // ANTLR's selector decision looks at the next token: a name or
            // a literal cannot follow a column
            let next_is_name = match &self.peek().tok {
                Tok::Ident(s) => !s.eq_ignore_ascii_case("from") && !s.eq_ignore_ascii_case("as"),
                Tok::Sym(_) | Tok::Eof => false,
                _ => true,
            };
            if next_is_name {
                return Err(self.no_viable_from(start));
            }
            return Ok(Selector::Column(c));
        }
        Ok(Selector::Term(self.nested(0, |p| p.simple_term())?))
    }

    fn relations(&mut self) -> PResult<Vec<Relation>> {
        let mut out = Vec::new();
        loop {
            out.push(self.relation()?);
            if !self.eat_kw("and") {
                break;
            }
        }
        Ok(out)
    }

    fn operator(&mut self) -> PResult<Operator> {
        let op = match &self.peek().tok {
            Tok::Sym("=") => Operator::Eq,
            Tok::Sym("<") => Operator::Lt,
            Tok::Sym("<=") => Operator::Le,
            Tok::Sym(">") => Operator::Gt,
            Tok::Sym(">=") => Operator::Ge,
            Tok::Sym("!=") => Operator::Ne,
            Tok::Ident(s) if s.eq_ignore_ascii_case("in") => Operator::In,
            Tok::Ident(s) if s.eq_ignore_ascii_case("like") => Operator::Like,
            Tok::Ident(s) if s.eq_ignore_ascii_case("contains") => {
                self.advance();
                if self.eat_kw("key") {
                    return Ok(Operator::ContainsKey);
                }
                return Ok(Operator::Contains);
            }
            Tok::Ident(s) if s.eq_ignore_ascii_case("is") => {
                self.advance();
                self.expect_kw("not")?;
                self.expect_kw("null")?;
                return Ok(Operator::IsNotNull);
            }
            _ => return Err(self.no_viable()),
        };
        self.advance();
        Ok(op)
    }

    /// An operator among `allowed` (the grammar of token and multi-column
    /// relations): anything else is no viable alternative.
    fn operator_of(&mut self, allowed: &[Operator]) -> PResult<Operator> {
        let at = self.pos;
        let op = self.operator()?;
        if !allowed.contains(&op) {
            self.pos = at;
            return Err(self.no_viable());
        }
        Ok(op)
    }

    fn rhs(&mut self, op: Operator) -> PResult<RelationRhs> {
        if op == Operator::IsNotNull {
            return Ok(RelationRhs::NotNull);
        }
        if op == Operator::In {
            if let Some(m) = self.bind_marker()? {
                return Ok(RelationRhs::InMarker(m));
            }
            self.expect_sym("(")?;
            let mut items = Vec::new();
            if !self.eat_sym(")") {
                loop {
                    items.push(self.term()?);
                    if self.eat_sym(")") {
                        break;
                    }
                    self.expect_sym(",")?;
                }
            }
            return Ok(RelationRhs::InList(items));
        }
        let start = self.pos;
        let t = self.term()?;
        // what follows a relation's term is decided by looking past it
        let shown = if matches!(t, Term::Bind(_)) {
            start
        } else {
            self.pos
        };
        self.term_end = Some((self.pos, shown));
        Ok(RelationRhs::Term(t))
    }

    fn relation(&mut self) -> PResult<Relation> {
        self.nested(0, |p| p.relation_nested())
    }

    fn relation_nested(&mut self) -> PResult<Relation> {
        if self.is_kw("token") && self.peek_at(1).tok == Tok::Sym("(") {
            self.advance();
            self.advance();
            let mut cols = Vec::new();
            loop {
                cols.push(self.ident()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
            let op = self.operator_of(&[
                Operator::Eq,
                Operator::Lt,
                Operator::Le,
                Operator::Gt,
                Operator::Ge,
                Operator::Ne,
            ])?;
            let rhs = self.rhs(op)?;
            return Ok(Relation {
                lhs: RelationLhs::Token(cols),
                op,
                rhs,
            });
        }
        if self.eat_sym("(") {
            // Parser.g: '(' relation ')', told from a multi-column relation
            // by what follows the first name
            let parenthesized = self.is_sym("(")
                || (self.is_kw("token") && self.peek_at(1).tok == Tok::Sym("("))
                || (matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
                    && !matches!(self.peek_at(1).tok, Tok::Sym(",") | Tok::Sym(")")));
            if parenthesized {
                let r = self.nested(1, |p| p.relation_nested())?;
                self.expect_sym(")")?;
                return Ok(r);
            }
            let mut cols = Vec::new();
            loop {
                cols.push(self.ident()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
            let op_pos = self.pos;
            let op = self.operator_of(&[
                Operator::Eq,
                Operator::Lt,
                Operator::Le,
                Operator::Gt,
                Operator::Ge,
                Operator::Ne,
                Operator::In,
            ])?;
            // Parser.g: a tuple literal or a marker after the operator
            if op != Operator::In && !self.is_sym("(") && !self.starts_marker() {
                return Err(self.no_viable_from(op_pos));
            }
            let rhs = self.rhs(op)?;
            return Ok(Relation {
                lhs: RelationLhs::Columns(cols),
                op,
                rhs,
            });
        }
        let start = self.pos;
        let col = self.ident()?;
        if self.eat_sym("[") {
            let key = self.term()?;
            self.expect_sym("]")?;
            // Parser.g: only a relationType after an element
            let op = self.operator_of(&[
                Operator::Eq,
                Operator::Lt,
                Operator::Le,
                Operator::Gt,
                Operator::Ge,
                Operator::Ne,
            ])?;
            let rhs = self.rhs(op)?;
            return Ok(Relation {
                lhs: RelationLhs::Element(col, key),
                op,
                rhs,
            });
        }
        // ANTLR decides among the relations on the tokens after the name
        // (and after IN): when none fits, the name is where it failed
        if self.is_kw("in")
            && self.peek_at(1).tok != Tok::Sym("(")
            && !matches!(self.peek_at(1).tok, Tok::Sym("?") | Tok::Sym(":"))
        {
            self.advance();
            return Err(self.no_viable_from(start));
        }
        let at = self.pos;
        let op = match self.operator() {
            Ok(op) => op,
            Err(_) if self.pos == at => return Err(self.no_viable_from(start)),
            Err(e) => return Err(e),
        };
        let rhs = self.rhs(op)?;
        Ok(Relation {
            lhs: RelationLhs::Column(col),
            op,
            rhs,
        })
    }

    // ---- modifications ----

    fn using(&mut self, u: &mut UsingClause) -> PResult<()> {
        if !self.eat_kw("using") {
            return Ok(());
        }
        loop {
            if self.eat_kw("ttl") {
                u.ttl = Some(self.int_value()?);
            } else if self.eat_kw("timestamp") {
                u.timestamp = Some(self.int_value()?);
            } else {
                return Err(self.no_viable());
            }
            if !self.eat_kw("and") {
                break;
            }
        }
        Ok(())
    }

    /// DELETE takes one `USING TIMESTAMP` (Cassandra's `usingClauseDelete`).
    fn using_delete(&mut self, u: &mut UsingClause) -> PResult<()> {
        if !self.eat_kw("using") {
            return Ok(());
        }
        self.expect_kw("timestamp")?;
        u.timestamp = Some(self.int_value()?);
        Ok(())
    }

    /// Cassandra's `intValue`: an integer literal or a bind marker, the
    /// only values USING TTL / TIMESTAMP take.
    fn int_value(&mut self) -> PResult<Term> {
        if let Some(m) = self.bind_marker()? {
            return Ok(Term::Bind(m));
        }
        let start = self.pos;
        match self.constant() {
            Some(c @ Constant::Integer(_)) => Ok(Term::Constant(c)),
            _ => {
                self.pos = start;
                Err(self.no_viable())
            }
        }
    }

    fn insert(&mut self) -> PResult<Insert> {
        self.expect_kw("insert")?;
        self.expect_kw("into")?;
        let table = self.qualified_name()?;
        let mut ins = Insert {
            table,
            columns: Vec::new(),
            values: Vec::new(),
            json: None,
            json_default_unset: false,
            if_not_exists: false,
            using: UsingClause::default(),
        };
        if self.eat_kw("json") {
            // Cassandra's `jsonValue`: a string literal or a bind marker
            ins.json = Some(match self.bind_marker()? {
                Some(m) => Term::Bind(m),
                None => match &self.peek().tok {
                    Tok::Str(s) => {
                        let s = s.clone();
                        self.advance();
                        Term::Constant(Constant::String(s))
                    }
                    _ => return Err(self.no_viable()),
                },
            });
            if self.eat_kw("default") {
                if self.eat_kw("unset") {
                    ins.json_default_unset = true;
                } else if !self.eat_kw("null") {
                    return Err(self.no_viable());
                }
            }
        } else {
            self.expect_sym("(")?;
            loop {
                ins.columns.push(self.ident()?);
                if !self.eat_sym(",") {
                    self.expect_sym(")")?;
                    break;
                }
            }
            self.expect_kw("values")?;
            self.expect_sym("(")?;
            loop {
                ins.values.push(self.term()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        ins.if_not_exists = self.if_not_exists()?;
        self.using(&mut ins.using)?;
        Ok(ins)
    }

    fn column_target(&mut self) -> PResult<ColumnTarget> {
        let c = self.ident()?;
        if self.eat_sym("[") {
            let t = self.term()?;
            self.expect_sym("]")?;
            return Ok(ColumnTarget::Element(c, t));
        }
        if self.eat_sym(".") {
            let f = self.ident_any()?;
            return Ok(ColumnTarget::Field(c, f));
        }
        Ok(ColumnTarget::Column(c))
    }

    fn assignment(&mut self) -> PResult<Assignment> {
        let target = self.column_target()?;
        let col = target.column().to_string();
        // `c += t` / `c -= t` (Cassandra's `shorthandColumnOperation`)
        if let ColumnTarget::Column(_) = &target {
            if self.is_sym("+=") || self.is_sym("-=") {
                let plus = self.advance().tok == Tok::Sym("+=");
                let term = self.term()?;
                return Ok(Assignment {
                    target,
                    op: if plus {
                        AssignOp::Append(term)
                    } else {
                        AssignOp::Remove(term)
                    },
                });
            }
        }
        if matches!(target, ColumnTarget::Column(_)) && !self.is_sym("=") {
            // none of `columnOperationDifferentiator`'s alternatives
            return Err(self.no_viable());
        }
        self.expect_sym("=")?;
        // c = c + t | c = c - t
        if let ColumnTarget::Column(_) = &target {
            let t = self.peek().clone();
            let is_column = match &t.tok {
                Tok::Ident(s) => !["true", "false", "null"]
                    .iter()
                    .any(|k| s.eq_ignore_ascii_case(k)),
                Tok::QuotedIdent(_) => true,
                _ => false,
            };
            if is_column && matches!(self.peek_at(1).tok, Tok::Sym("+") | Tok::Sym("-")) {
                self.advance();
                let sign = self.advance().text;
                if fold_ident(&t).as_deref() != Some(col.as_str()) {
                    return Err(ParseError {
                        message: format!(
                            "Only expressions of the form X = X {sign}<value> are supported."
                        ),
                    });
                }
                let term = self.term()?;
                return Ok(Assignment {
                    target,
                    op: if sign == "+" {
                        AssignOp::Append(term)
                    } else {
                        AssignOp::Remove(term)
                    },
                });
            }
        }
        let term = self.term()?;
        if self.eat_sym("+") {
            let c2 = self.ident()?;
            if c2 != col {
                return Err(ParseError {
                    message: "Only expressions of the form X = <value> + X are supported."
                        .to_string(),
                });
            }
            return Ok(Assignment {
                target,
                op: AssignOp::Prepend(term),
            });
        }
        Ok(Assignment {
            target,
            op: AssignOp::Set(term),
        })
    }

    /// Cassandra's `addRawUpdate`: a column set as a whole cannot be
    /// otherwise updated in the same statement, nor a UDT field set twice.
    fn check_compatible(done: &[Assignment], a: &Assignment) -> PResult<()> {
        let col = a.target.column();
        let whole = |x: &Assignment| {
            matches!(
                (&x.target, &x.op),
                (ColumnTarget::Column(_), AssignOp::Set(_))
            )
        };
        for p in done.iter().filter(|p| p.target.column() == col) {
            let same_field = matches!((&p.target, &a.target), (ColumnTarget::Field(_, f), ColumnTarget::Field(_, g)) if f == g);
            if whole(p) || whole(a) || same_field {
                return Err(ParseError {
                    message: format!("Multiple incompatible setting of column {col}"),
                });
            }
        }
        Ok(())
    }

    fn conditions(&mut self) -> PResult<Conditions> {
        if !self.eat_kw("if") {
            return Ok(Conditions::None);
        }
        if self.is_kw("exists") {
            // `exists` may also name a column: ANTLR decides on the token
            // after it
            let next = &self.peek_at(1).tok;
            let ends = matches!(next, Tok::Eof | Tok::Sym(";"))
                || ["apply", "insert", "update", "delete"]
                    .iter()
                    .any(|k| matches!(next, Tok::Ident(s) if s.eq_ignore_ascii_case(k)));
            let condition = matches!(
                next,
                Tok::Sym("=" | "<" | ">" | "<=" | ">=" | "!=" | "[" | ".")
            ) || ["in", "contains"]
                .iter()
                .any(|k| matches!(next, Tok::Ident(s) if s.eq_ignore_ascii_case(k)));
            if ends {
                self.advance();
                return Ok(Conditions::Exists);
            }
            if !condition {
                return Err(self.no_viable_after(self.pos));
            }
        }
        if self.is_kw("not") {
            // UPDATE and DELETE take IF EXISTS, never IF NOT EXISTS
            return Err(self.no_viable());
        }
        if self.is_kw("not") && self.is_kw_at(1, "exists") {
            self.advance();
            self.advance();
            return Ok(Conditions::NotExists);
        }
        let mut out = Vec::new();
        loop {
            let target = self.column_target()?;
            // `columnCondition`: a relation type or IN, and CONTAINS (KEY)
            // on a whole column only
            let mut allowed = vec![
                Operator::Eq,
                Operator::Lt,
                Operator::Le,
                Operator::Gt,
                Operator::Ge,
                Operator::Ne,
                Operator::In,
            ];
            if let ColumnTarget::Column(_) = target {
                allowed.extend([Operator::Contains, Operator::ContainsKey]);
            }
            let op = self.operator_of(&allowed)?;
            let rhs = self.rhs(op)?;
            out.push(Condition { target, op, rhs });
            if !self.eat_kw("and") {
                break;
            }
        }
        Ok(Conditions::Columns(out))
    }

    fn update(&mut self) -> PResult<Update> {
        self.expect_kw("update")?;
        let table = self.qualified_name()?;
        let mut using = UsingClause::default();
        self.using(&mut using)?;
        self.expect_kw("set")?;
        let mut assignments: Vec<Assignment> = Vec::new();
        loop {
            let a = self.assignment()?;
            Self::check_compatible(&assignments, &a)?;
            assignments.push(a);
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_kw("where")?;
        let where_clause = self.relations()?;
        let conditions = self.conditions()?;
        Ok(Update {
            table,
            using,
            assignments,
            where_clause,
            conditions,
        })
    }

    fn delete(&mut self) -> PResult<Delete> {
        self.expect_kw("delete")?;
        let mut columns = Vec::new();
        if !self.is_kw("from") {
            loop {
                columns.push(self.column_target()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.expect_kw("from")?;
        let table = self.qualified_name()?;
        let mut using = UsingClause::default();
        self.using_delete(&mut using)?;
        self.expect_kw("where")?;
        let where_clause = self.relations()?;
        let conditions = self.conditions()?;
        Ok(Delete {
            table,
            columns,
            using,
            where_clause,
            conditions,
        })
    }

    fn batch(&mut self) -> PResult<Batch> {
        self.expect_kw("begin")?;
        let batch_type = if self.eat_kw("unlogged") {
            BatchType::Unlogged
        } else if self.eat_kw("counter") {
            BatchType::Counter
        } else {
            BatchType::Logged
        };
        self.expect_kw("batch")?;
        let mut using = UsingClause::default();
        self.using(&mut using)?;
        let mut statements = Vec::new();
        loop {
            while self.eat_sym(";") {}
            if self.is_kw("apply") {
                self.advance();
                self.expect_kw("batch")?;
                break;
            }
            let st = match self.peek().tok.clone() {
                Tok::Ident(s) if s.eq_ignore_ascii_case("insert") => {
                    Statement::Insert(Box::new(self.insert()?))
                }
                Tok::Ident(s) if s.eq_ignore_ascii_case("update") => {
                    Statement::Update(Box::new(self.update()?))
                }
                Tok::Ident(s) if s.eq_ignore_ascii_case("delete") => {
                    Statement::Delete(Box::new(self.delete()?))
                }
                _ => return Err(self.error_here("expecting K_APPLY")),
            };
            statements.push(st);
        }
        Ok(Batch {
            batch_type,
            using,
            statements,
        })
    }

    // ---- DDL ----

    fn properties(&mut self) -> PResult<Vec<Property>> {
        let mut out = Vec::new();
        loop {
            let p = self.property()?;
            Self::add_property(&mut out, p)?;
            if !self.eat_kw("and") {
                break;
            }
        }
        Ok(out)
    }

    /// Cassandra's `PropertyDefinitions.addProperty`: a property is defined once.
    fn add_property(out: &mut Vec<Property>, p: Property) -> PResult<()> {
        if out.iter().any(|q| q.name == p.name) {
            return Err(ParseError {
                message: format!("Multiple definitions for property '{}'", p.name),
            });
        }
        out.push(p);
        Ok(())
    }

    /// One `name = value` property; the value is a constant, an identifier or a map.
    fn property(&mut self) -> PResult<Property> {
        let name_pos = self.pos;
        let name = self.ident_any()?;
        if !self.is_sym("=") {
            return Err(self.no_viable_from(name_pos));
        }
        self.expect_sym("=")?;
        let value = if self.eat_sym("{") {
            let mut pairs = Vec::new();
            if !self.eat_sym("}") {
                loop {
                    let k = self.prop_scalar()?;
                    self.expect_sym(":")?;
                    let v = self.prop_scalar()?;
                    if pairs.iter().any(|(q, _): &(String, String)| *q == k) {
                        return Err(ParseError {
                            message: format!("Multiple definition for property {k}"),
                        });
                    }
                    pairs.push((k, v));
                    if self.eat_sym("}") {
                        break;
                    }
                    self.expect_sym(",")?;
                }
            }
            PropertyValue::Map(pairs)
        } else if let Some(c) = self.constant() {
            PropertyValue::Constant(c)
        } else {
            PropertyValue::Identifier(self.ident_any()?)
        };
        Ok(Property { name, value })
    }

    fn prop_scalar(&mut self) -> PResult<String> {
        if let Some(c) = self.constant() {
            return Ok(constant_text(&c));
        }
        self.ident_any()
    }

    /// A type as text, normalised: `map<text, frozen<list<int>>>`.
    fn type_text(&mut self) -> PResult<String> {
        self.nested(0, |p| p.type_text_nested())
    }

    fn type_text_nested(&mut self) -> PResult<String> {
        let t = self.peek().clone();
        let name = match &t.tok {
            Tok::Ident(s) => s.to_lowercase(),
            Tok::QuotedIdent(s) => format!("\"{}\"", s.replace('"', "\"\"")),
            Tok::Str(s) => {
                self.advance();
                return Ok(format!("'{s}'"));
            }
            _ => return Err(self.no_viable()),
        };
        self.advance();
        let mut name = name;
        if self.is_sym(".") {
            self.advance();
            let second = self.ident_any()?;
            name = format!("{name}.{second}");
        }
        if name == "vector" && self.eat_sym("<") {
            let element = self.type_text()?;
            self.expect_sym(",")?;
            let minus = if self.is_sym("-") && matches!(self.peek_at(1).tok, Tok::Integer(_)) {
                self.advance();
                "-"
            } else {
                ""
            };
            if !matches!(self.peek().tok, Tok::Integer(_)) {
                return Err(self.no_viable());
            }
            let n = self.advance().text;
            self.expect_sym(">")?;
            return Ok(format!("vector<{element}, {minus}{n}>"));
        }
        if self.eat_sym("<") {
            // Parser.g's collection_type and tuple_type: a map takes two
            // types, a list, a set and frozen one, a tuple one or more
            let arity = match name.as_str() {
                "map" => Some(2),
                "list" | "set" | "frozen" => Some(1),
                _ => None,
            };
            let mut args = Vec::new();
            loop {
                if arity.is_none() && matches!(self.peek().tok, Tok::Integer(_)) {
                    args.push(self.advance().text);
                } else {
                    args.push(self.type_text()?);
                }
                // (ANTLR looked one token past the one it refuses)
                match arity {
                    Some(n) if args.len() < n => {
                        if !self.eat_sym(",") {
                            return Err(self.error_seen("expecting ','", self.pos + 1));
                        }
                    }
                    Some(_) => {
                        if !self.eat_sym(">") {
                            return Err(self.error_seen("expecting '>'", self.pos + 1));
                        }
                        break;
                    }
                    None => {
                        if self.eat_sym(">") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                }
            }
            return Ok(format!("{name}<{}>", args.join(", ")));
        }
        Ok(name)
    }

    fn create(&mut self) -> PResult<Statement> {
        self.expect_kw("create")?;
        if self.eat_kw("keyspace") || self.eat_kw("schema") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.name_ident()?;
            self.expect_kw("with")?;
            let properties = self.properties()?;
            return Ok(Statement::CreateKeyspace(CreateKeyspace {
                name,
                if_not_exists,
                properties,
            }));
        }
        if self.eat_kw("table") || self.eat_kw("columnfamily") {
            return self.create_table();
        }
        if self.eat_kw("type") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.user_type_name()?;
            self.expect_sym("(")?;
            let mut fields = Vec::new();
            loop {
                if self.at_empty_quoted() {
                    return Err(self.no_viable());
                }
                // Parser.g's fident: no reserved keyword
                if matches!(&self.peek().tok, Tok::Ident(s) if sibyl_types::ident::is_reserved(s)) {
                    return Err(if fields.is_empty() {
                        self.no_viable()
                    } else {
                        self.error_here("expecting ')'")
                    });
                }
                let f = self.ident_any()?;
                let t = self.type_text()?;
                fields.push((f, t));
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
            return Ok(Statement::CreateType(CreateType {
                name,
                if_not_exists,
                fields,
            }));
        }
        let custom = self.eat_kw("custom");
        if self.eat_kw("index") {
            let if_not_exists = self.if_not_exists()?;
            let name = if !self.is_kw("on") {
                Some(self.ident()?)
            } else {
                None
            };
            self.expect_kw("on")?;
            let table = self.qualified_name()?;
            self.expect_sym("(")?;
            let no_target = self.is_sym(")");
            let mut more_targets = Vec::new();
            let (target_kind, target) = if no_target {
                (String::new(), String::new())
            } else if matches!(self.peek_at(1).tok, Tok::Sym("(")) {
                let k = self.ident_any()?;
                self.expect_sym("(")?;
                let c = self.ident()?;
                self.expect_sym(")")?;
                (k, c)
            } else {
                (String::new(), self.ident()?)
            };
            while !no_target && self.eat_sym(",") {
                if matches!(self.peek_at(1).tok, Tok::Sym("(")) {
                    self.ident_any()?;
                    self.expect_sym("(")?;
                    more_targets.push(self.ident()?);
                    self.expect_sym(")")?;
                } else {
                    more_targets.push(self.ident()?);
                }
            }
            self.expect_sym(")")?;
            let mut custom_class = None;
            let _ = custom;
            if self.eat_kw("using") {
                if let Tok::Str(s) = self.peek().tok.clone() {
                    self.advance();
                    custom_class = Some(s);
                }
            }
            let mut options = Vec::new();
            if self.eat_kw("with") {
                for p in self.properties()? {
                    if let (true, PropertyValue::Map(m)) =
                        (p.name.eq_ignore_ascii_case("options"), p.value)
                    {
                        options = m;
                    }
                }
            }
            return Ok(Statement::CreateIndex(CreateIndex {
                name,
                table,
                if_not_exists,
                target,
                target_kind,
                custom_class,
                options,
                more_targets,
                no_target,
            }));
        }
        Err(self.no_viable())
    }

    fn create_table(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.qualified_name()?;
        self.expect_sym("(")?;
        let mut columns = Vec::new();
        let mut partition_key = Vec::new();
        let mut clustering_key = Vec::new();
        let mut inline_pk: Option<String> = None;
        let mut multiple_pk = false;
        loop {
            if self.is_kw("primary") && self.is_kw_at(1, "key") {
                self.advance();
                self.advance();
                if inline_pk.is_some() || !partition_key.is_empty() {
                    multiple_pk = true;
                }
                self.expect_sym("(")?;
                if self.eat_sym("(") {
                    loop {
                        partition_key.push(self.ident()?);
                        if self.eat_sym(")") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                } else {
                    partition_key.push(self.ident()?);
                }
                while self.eat_sym(",") {
                    clustering_key.push(self.ident()?);
                }
                self.expect_sym(")")?;
            } else {
                // (after a first definition, Cassandra's grammar reads what
                // is not a name as the end of the definitions)
                let not_a_name = self.at_empty_quoted()
                    || matches!(&self.peek().tok, Tok::Ident(s) if sibyl_types::ident::is_reserved(s));
                if not_a_name && !columns.is_empty() {
                    return Err(self.error_here("expecting ')'"));
                }
                let cname = self.name_ident()?;
                let typ = self.type_text()?;
                let mut is_static = false;
                loop {
                    if self.eat_kw("static") {
                        is_static = true;
                    } else if self.is_kw("primary") {
                        self.advance();
                        self.expect_kw("key")?;
                        if inline_pk.is_some() {
                            multiple_pk = true;
                        }
                        inline_pk = Some(cname.clone());
                    } else {
                        break;
                    }
                }
                columns.push(ColumnDef {
                    name: cname,
                    typ,
                    is_static,
                });
            }
            if self.eat_sym(")") {
                break;
            }
            self.expect_sym(",")?;
            if self.is_sym(")") {
                self.advance();
                break;
            }
        }
        let multiple_primary_keys =
            multiple_pk || (inline_pk.is_some() && !partition_key.is_empty());
        if let (Some(pk), false) = (inline_pk, multiple_primary_keys) {
            partition_key.push(pk);
        }
        let mut clustering_order = Vec::new();
        let mut compact_storage = false;
        let mut properties = Vec::new();
        if self.eat_kw("with") {
            loop {
                if self.is_kw("clustering") && self.is_kw_at(1, "order") {
                    self.advance();
                    self.expect_kw("order")?;
                    self.expect_kw("by")?;
                    self.expect_sym("(")?;
                    loop {
                        let column = self.ident()?;
                        let descending = if self.eat_kw("desc") {
                            true
                        } else if self.eat_kw("asc") {
                            false
                        } else {
                            return Err(self.no_viable());
                        };
                        clustering_order.push(Ordering { column, descending });
                        if self.eat_sym(")") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                } else if self.is_kw("compact") && self.is_kw_at(1, "storage") {
                    self.advance();
                    self.advance();
                    compact_storage = true;
                } else {
                    let p = self.property()?;
                    Self::add_property(&mut properties, p)?;
                }
                if !self.eat_kw("and") {
                    break;
                }
            }
        }
        Ok(Statement::CreateTable(Box::new(CreateTable {
            name,
            if_not_exists,
            columns,
            partition_key,
            clustering_key,
            clustering_order,
            compact_storage,
            properties,
            multiple_primary_keys,
        })))
    }

    fn drop(&mut self) -> PResult<Statement> {
        self.expect_kw("drop")?;
        if self.eat_kw("keyspace") || self.eat_kw("schema") {
            let if_exists = self.if_exists()?;
            let name = self.name_ident()?;
            return Ok(Statement::DropKeyspace { name, if_exists });
        }
        if self.eat_kw("table") || self.eat_kw("columnfamily") {
            let if_exists = self.if_exists()?;
            let name = self.qualified_name()?;
            return Ok(Statement::DropTable { name, if_exists });
        }
        if self.eat_kw("type") {
            let if_exists = self.if_exists()?;
            let name = self.user_type_name()?;
            return Ok(Statement::DropType { name, if_exists });
        }
        if self.eat_kw("index") {
            let if_exists = self.if_exists()?;
            let name = self.qualified_name()?;
            return Ok(Statement::DropIndex { name, if_exists });
        }
        let kind = if self.eat_kw("function") {
            "Function"
        } else if self.eat_kw("aggregate") {
            "Aggregate"
        } else if self.is_kw("materialized") && self.is_kw_at(1, "view") {
            self.pos += 2;
            "Materialized view"
        } else {
            return Err(self.no_viable());
        };
        let if_exists = self.if_exists()?;
        let name = self.qualified_name()?;
        let mut args = None;
        if kind != "Materialized view" && self.eat_sym("(") {
            // the argument types of the overload to drop
            args = Some(self.list_until(")", |p| p.type_text())?);
        }
        Ok(Statement::DropAbsent {
            kind,
            name,
            if_exists,
            args,
        })
    }

    fn alter(&mut self) -> PResult<Statement> {
        self.expect_kw("alter")?;
        if self.eat_kw("keyspace") || self.eat_kw("schema") {
            let if_exists = self.if_exists()?;
            let name = self.name_ident()?;
            self.expect_kw("with")?;
            let properties = self.properties()?;
            return Ok(Statement::AlterKeyspace {
                name,
                if_exists,
                properties,
            });
        }
        if self.eat_kw("type") {
            let if_exists = self.if_exists()?;
            let name = self.user_type_name()?;
            // ADD, RENAME or ALTER: a one-token decision
            self.after_name = None;
            if self.eat_kw("add") {
                let if_field_exists = self.if_not_exists()?;
                let f = self.ident()?;
                let t = self.type_text()?;
                return Ok(Statement::AlterType {
                    name,
                    if_exists,
                    add: Some((f, t)),
                    renames: Vec::new(),
                    if_field_exists,
                    alter_field: None,
                });
            }
            if self.eat_kw("alter") {
                let f = self.ident()?;
                self.expect_kw("type")?;
                let t = self.type_text()?;
                return Ok(Statement::AlterType {
                    name,
                    if_exists,
                    add: None,
                    renames: Vec::new(),
                    if_field_exists: false,
                    alter_field: Some((f, t)),
                });
            }
            if !self.is_kw("rename") {
                return Err(self.no_viable());
            }
            self.advance();
            let if_field_exists = self.if_exists()?;
            let mut renames = Vec::new();
            loop {
                let from = self.ident()?;
                self.expect_kw("to")?;
                renames.push((from, self.ident()?));
                if !self.eat_kw("and") {
                    break;
                }
            }
            return Ok(Statement::AlterType {
                name,
                if_exists,
                add: None,
                renames,
                if_field_exists,
                alter_field: None,
            });
        }
        if self.eat_kw("table") || self.eat_kw("columnfamily") {
            let if_exists = self.if_exists()?;
            let name = self.qualified_name()?;
            let mut if_column_exists = false;
            let op = if self.eat_kw("add") {
                if_column_exists = self.if_not_exists()?;
                let mut cols = Vec::new();
                if self.eat_sym("(") {
                    loop {
                        let n = self.name_ident()?;
                        let t = self.type_text()?;
                        let st = self.eat_kw("static");
                        cols.push(ColumnDef {
                            name: n,
                            typ: t,
                            is_static: st,
                        });
                        if self.eat_sym(")") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                } else {
                    let n = self.name_ident()?;
                    let t = self.type_text()?;
                    let st = self.eat_kw("static");
                    cols.push(ColumnDef {
                        name: n,
                        typ: t,
                        is_static: st,
                    });
                }
                AlterTableOp::Add(cols)
            } else if self.is_kw("drop")
                && self.is_kw_at(1, "compact")
                && self.is_kw_at(2, "storage")
            {
                self.pos += 3;
                AlterTableOp::DropCompactStorage
            } else if self.eat_kw("drop") {
                if_column_exists = self.if_exists()?;
                let mut cols = Vec::new();
                if self.eat_sym("(") {
                    loop {
                        cols.push(self.ident()?);
                        if self.eat_sym(")") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                } else {
                    cols.push(self.ident()?);
                }
                let timestamp = if self.eat_kw("using") {
                    self.expect_kw("timestamp")?;
                    // Parser.g: t=INTEGER, read with Long.parseLong
                    let Tok::Integer(n) = &self.peek().tok else {
                        return Err(self.error_here("expecting INTEGER"));
                    };
                    let n = n.parse::<i64>().map_err(|_| ParseError {
                        message: format!("For input string: \"{n}\""),
                    })?;
                    self.advance();
                    Some(n)
                } else {
                    None
                };
                AlterTableOp::Drop(cols, timestamp)
            } else if self.eat_kw("rename") {
                if_column_exists = self.if_exists()?;
                let mut pairs = Vec::new();
                loop {
                    let a = self.ident()?;
                    self.expect_kw("to")?;
                    let b = self.ident()?;
                    pairs.push((a, b));
                    if !self.eat_kw("and") {
                        break;
                    }
                }
                AlterTableOp::Rename(pairs)
            } else if self.eat_kw("alter") {
                if_column_exists = self.if_exists()?;
                let column = self.ident()?;
                if self.is_kw("drop") && self.is_kw_at(1, "masked") {
                    self.pos += 2;
                    AlterTableOp::Mask {
                        column,
                        masked: false,
                    }
                } else if self.eat_kw("masked") {
                    self.expect_kw("with")?;
                    // the masking function (parsed; Sibyl masks nothing)
                    self.simple_term()?;
                    AlterTableOp::Mask {
                        column,
                        masked: true,
                    }
                } else {
                    self.expect_kw("type")?;
                    let typ = self.type_text()?;
                    AlterTableOp::Alter { column, typ }
                }
            } else if self.eat_kw("with") {
                AlterTableOp::With(self.properties()?)
            } else {
                return Err(self.no_viable());
            };
            return Ok(Statement::AlterTable(Box::new(AlterTable {
                name,
                if_exists,
                op,
                if_column_exists,
            })));
        }
        Err(self.no_viable())
    }

    fn describe(&mut self) -> PResult<Statement> {
        self.advance(); // DESCRIBE | DESC
        let what = if self.eat_kw("cluster") {
            Describe::Cluster
        } else if self.eat_kw("keyspaces") {
            Describe::Keyspaces
        } else if self.is_kw("only") || self.is_kw("keyspace") {
            let only = self.eat_kw("only");
            self.expect_kw("keyspace")?;
            let name = if matches!(self.peek().tok, Tok::Ident(_) | Tok::QuotedIdent(_))
                && !self.is_kw("with")
            {
                Some(self.ident_any()?)
            } else {
                None
            };
            Describe::Keyspace { name, only }
        } else if self.eat_kw("tables") {
            Describe::Tables
        } else if self.eat_kw("table") || self.eat_kw("columnfamily") {
            Describe::Table(self.qualified_name_any()?)
        } else if self.eat_kw("types") {
            Describe::Types
        } else if self.eat_kw("type") {
            Describe::Type(self.qualified_name_any()?)
        } else if self.eat_kw("functions") {
            Describe::Functions
        } else if self.eat_kw("aggregates") {
            Describe::Aggregates
        } else if self.eat_kw("index") {
            Describe::Index(self.qualified_name_any()?)
        } else if self.eat_kw("function") {
            Describe::Other("function", self.qualified_name_any()?)
        } else if self.eat_kw("aggregate") {
            Describe::Other("aggregate", self.qualified_name_any()?)
        } else if self.is_kw("materialized") && self.is_kw_at(1, "view") {
            self.advance();
            self.advance();
            Describe::Other("view", self.qualified_name_any()?)
        } else if self.is_kw("full") && self.is_kw_at(1, "schema") {
            self.advance();
            self.advance();
            Describe::Schema { full: true }
        } else if self.eat_kw("schema") {
            Describe::Schema { full: false }
        } else {
            Describe::Generic(self.qualified_name_any()?)
        };
        let mut with_internals = false;
        if self.eat_kw("with") {
            self.expect_kw("internals")?;
            with_internals = true;
        }
        Ok(Statement::Describe(DescribeStatement {
            what,
            with_internals,
        }))
    }

    fn qualified_name_any(&mut self) -> PResult<QualifiedName> {
        let first = self.ident_any()?;
        self.after_name = Some(self.pos - 1);
        if self.eat_sym(".") {
            let second = self.ident_any()?;
            Ok(QualifiedName {
                keyspace: Some(first),
                name: second,
            })
        } else {
            Ok(QualifiedName {
                keyspace: None,
                name: first,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Statement {
        match parse_statement(s) {
            Ok(p) => p.statement,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn syntax_error(s: &str) -> String {
        match parse_statement(s) {
            Ok(_) => panic!("{s}: parsed"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn syntax_errors_are_reported_where_antlr_decisions_fail() {
        // answers of Cassandra 5.0.4
        for (q, want) in [
            ("SELECT * FROM t WHERE pk1 IN 1 AND pk2 = 'a'", "line 1:29 no viable alternative at input '1' (SELECT * FROM t WHERE [pk1] IN...)"),
            ("UPDATE n SET c32 = -c32 WHERE k = 5", "line 1:24 no viable alternative at input 'WHERE' (... n SET c32 = -[c32] WHERE...)"),
            ("SELECT * FROM t WHERE a = 1 AND (c1, c2) = 1", "line 1:43 no viable alternative at input '1' (... AND (c1, c2) [=] 1)"),
            ("SELECT m[..] FROM t WHERE k = 1", "line 1:8 mismatched input '[' expecting K_FROM (SELECT m[[]..]...)"),
            ("SELECT DISTINCT JSON pk1, pk2 FROM t", "line 1:16 no viable alternative at input 'JSON' (SELECT [DISTINCT] JSON...)"),
            ("SELECT count(*, v) FROM t", "line 1:14 mismatched input ',' expecting ')' (SELECT count(*[,]...)"),
            ("SELECT * FROM ct foo", "line 1:17 no viable alternative at input 'foo' (SELECT * FROM [ct] foo)"),
            ("SELECT * FROM ct WHERE k = ? foo", "line 1:29 no viable alternative at input 'foo' (...FROM ct WHERE k = [?] foo)"),
            ("SELECT * FROM ct LIMIT 1 foo", "line 1:25 mismatched input 'foo' expecting EOF (...* FROM ct LIMIT 1 [foo])"),
        ] {
            assert_eq!(syntax_error(q), want, "{q}");
        }
        parse("SELECT JSON DISTINCT k FROM t");
    }

    #[test]
    fn a_statements_trailing_tokens_fail_as_antlrs_decisions_do() {
        // answers of Cassandra 5.0.4: after a term, a token that may follow
        // one is a mismatched end (the snippet shows the token after it, or
        // is left out at the end of input), any other fails the decision
        for (q, want) in [
            (
                "UPDATE t SET v = 1 WHERE k = ? foo",
                "line 1:31 no viable alternative at input 'foo' (...= 1 WHERE k = [?] foo)",
            ),
            (
                "DELETE FROM t WHERE k = 1 foo",
                "line 1:26 no viable alternative at input 'foo' (...t WHERE k = 1 [foo])",
            ),
            (
                "SELECT * FROM t WHERE k = 1 INSERT",
                "line 1:28 mismatched input 'INSERT' expecting EOF",
            ),
            (
                "UPDATE t SET v = 1 WHERE k = 1 ,2 3",
                "line 1:31 mismatched input ',' expecting EOF (...1 WHERE k = 1 [,]2...)",
            ),
            (
                "SELECT * FROM t WHERE k = 1 AND c = 2 ) x",
                "line 1:38 mismatched input ')' expecting EOF (...1 AND c = 2 [)] x)",
            ),
            (
                "DELETE FROM t WHERE k IN (1) , 2 3",
                "line 1:29 mismatched input ',' expecting EOF (...WHERE k IN (1) [,]...)",
            ),
            (
                "UPDATE t SET v = 1 WHERE k = 1 IF v = 1 foo",
                "line 1:40 no viable alternative at input 'foo' (...1 IF v = 1 [foo])",
            ),
            (
                "SELECT * FROM t WHERE k = ks.f 1",
                "line 1:31 no viable alternative at input '1' (...FROM t WHERE k = [ks].f...)",
            ),
            (
                "UPDATE t foo",
                "line 1:9 no viable alternative at input 'foo' (UPDATE [t] foo)",
            ),
        ] {
            assert_eq!(syntax_error(q), want, "{q}");
        }
    }

    #[test]
    fn parses_create_table_with_composite_key_and_order() {
        let st = parse("CREATE TABLE IF NOT EXISTS ks.t (a int, b text, c timeuuid, v map<text, frozen<list<int>>>, s int static, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND gc_grace_seconds = 10 AND compaction = {'class': 'LeveledCompactionStrategy'}");
        let Statement::CreateTable(ct) = st else {
            panic!("not a create table")
        };
        assert!(ct.if_not_exists);
        assert_eq!(ct.partition_key, vec!["a", "b"]);
        assert_eq!(ct.clustering_key, vec!["c"]);
        assert_eq!(ct.columns[3].typ, "map<text, frozen<list<int>>>");
        assert!(ct.columns[4].is_static);
        assert!(ct.clustering_order[0].descending);
        assert_eq!(ct.properties.len(), 2);
    }

    #[test]
    fn parses_select_with_everything() {
        let p = parse_statement("SELECT a, \"B\", writetime(c) AS w, count(*) FROM t WHERE a IN (1, ?) AND (b, c) > (1, 2) AND token(a) > -5 ORDER BY b DESC PER PARTITION LIMIT 2 LIMIT :lim ALLOW FILTERING").expect("parse");
        let Statement::Select(s) = p.statement else {
            panic!()
        };
        assert_eq!(s.selectors.len(), 4);
        assert_eq!(s.selectors[1].selector, Selector::Column("B".into()));
        assert_eq!(s.selectors[2].alias.as_deref(), Some("w"));
        assert_eq!(s.where_clause.len(), 3);
        assert!(s.allow_filtering);
        assert_eq!(p.bind_markers.len(), 2);
        assert_eq!(p.bind_markers[1].name.as_deref(), Some("lim"));
    }

    #[test]
    fn parses_update_with_collections_and_conditions() {
        let st = parse("UPDATE t USING TTL 10 AND TIMESTAMP 5 SET l = l + [1], m['k'] = 2, s = {1, 2} + s, x = x - {3} WHERE k = 1 IF v = 3");
        let Statement::Update(u) = st else { panic!() };
        assert_eq!(u.assignments.len(), 4);
        assert!(matches!(u.assignments[0].op, AssignOp::Append(_)));
        assert!(matches!(u.assignments[2].op, AssignOp::Prepend(_)));
        assert!(matches!(u.assignments[3].op, AssignOp::Remove(_)));
        assert!(matches!(u.conditions, Conditions::Columns(_)));
    }

    #[test]
    fn parses_batch() {
        let st = parse("BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (1); DELETE FROM t WHERE a = 2; APPLY BATCH");
        let Statement::Batch(b) = st else { panic!() };
        assert_eq!(b.batch_type, BatchType::Unlogged);
        assert_eq!(b.statements.len(), 2);
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let e = parse_statement("SELECT * FRM t").expect_err("must fail");
        assert!(e.message.starts_with("line 1:9"), "{}", e.message);
        let e = parse_statement("SELEC * FROM t").expect_err("must fail");
        assert!(
            e.message
                .starts_with("line 1:0 no viable alternative at input 'SELEC'"),
            "{}",
            e.message
        );
    }

    #[test]
    fn parses_describe_variants() {
        assert!(matches!(
            parse("DESCRIBE KEYSPACES"),
            Statement::Describe(DescribeStatement {
                what: Describe::Keyspaces,
                ..
            })
        ));
        assert!(matches!(
            parse("DESC TABLE ks.t"),
            Statement::Describe(DescribeStatement {
                what: Describe::Table(_),
                ..
            })
        ));
        assert!(matches!(
            parse("DESCRIBE FULL SCHEMA"),
            Statement::Describe(DescribeStatement {
                what: Describe::Schema { full: true },
                ..
            })
        ));
    }

    #[test]
    fn parses_literals_in_values() {
        let st = parse("INSERT INTO t (a, b, c, d, e) VALUES (-1, {'a': 1}, {1, 2}, (1, 'x'), {f: 1}) USING TTL 5");
        let Statement::Insert(i) = st else { panic!() };
        assert_eq!(i.values[0], Term::Constant(Constant::Integer("-1".into())));
        assert!(matches!(i.values[1], Term::Map(_)));
        assert!(matches!(i.values[2], Term::Set(_)));
        assert!(matches!(i.values[3], Term::Tuple(_)));
        assert!(matches!(i.values[4], Term::UserType(_)));
    }

    #[test]
    fn parses_indexes_ann_alter_type_and_element_selectors() {
        let Statement::CreateIndex(ci) = parse("CREATE INDEX IF NOT EXISTS ON ks.t (entries(m)) USING 'sai' WITH OPTIONS = {'similarity_function': 'dot_product'}") else {
            panic!("not a create index")
        };
        assert_eq!(
            (
                ci.target_kind.as_str(),
                ci.target.as_str(),
                ci.custom_class.as_deref()
            ),
            ("entries", "m", Some("sai"))
        );
        assert_eq!(
            ci.options,
            vec![("similarity_function".to_string(), "dot_product".to_string())]
        );
        let Statement::Select(s) =
            parse("SELECT id FROM t WHERE m['k'] = 1 ORDER BY v ANN OF [1.0, 2.0] LIMIT 3")
        else {
            panic!("not a select")
        };
        assert!(matches!(&s.where_clause[0].lhs, RelationLhs::Element(c, _) if c == "m"));
        assert_eq!(s.ann.as_ref().map(|(c, _)| c.as_str()), Some("v"));
        let Statement::AlterType { add, renames, .. } =
            parse("ALTER TYPE addr RENAME a TO b AND c TO d")
        else {
            panic!("not an alter type")
        };
        assert!(add.is_none());
        assert_eq!(
            renames,
            vec![
                ("a".to_string(), "b".to_string()),
                ("c".to_string(), "d".to_string())
            ]
        );
        let Statement::Select(s) = parse("SELECT m['a'..'z'], s[3], m[..'q'] FROM t") else {
            panic!("not a select")
        };
        assert!(matches!(
            &s.selectors[0].selector,
            Selector::Slice {
                from: Some(_),
                to: Some(_),
                ..
            }
        ));
        assert!(matches!(&s.selectors[1].selector, Selector::Element { .. }));
        assert!(matches!(
            &s.selectors[2].selector,
            Selector::Slice {
                from: None,
                to: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn nesting_is_bounded_at_and_past_the_limit() {
        let deep = |open: &str, mid: &str, close: &str, n: usize| {
            format!("{}{mid}{}", open.repeat(n), close.repeat(n))
        };
        let ok = [
            format!("INSERT INTO t (k) VALUES ({})", deep("[", "1", "]", 90)),
            format!("SELECT {} FROM t", deep("abs(", "k", ")", 90)),
            format!("SELECT * FROM t WHERE k = {}", deep("(", "1", ")", 90)),
            format!(
                "CREATE TABLE t (k int PRIMARY KEY, v {})",
                deep("frozen<tuple<", "int", ">>", 45)
            ),
            format!("SELECT {} FROM t", vec!["k"; 90].join("+")),
            format!("SELECT {} FROM t", vec!["k"; 90].join("*")),
            format!("SELECT k{} FROM t", ".f".repeat(90)),
        ];
        for q in &ok {
            assert!(parse_statement(q).is_ok(), "{}", &q[..60]);
        }
        let too_deep = [
            format!("SELECT * FROM nosuch.t WHERE k = {}", "(".repeat(10_000)),
            format!("INSERT INTO t (k) VALUES ({})", deep("[", "1", "]", 5000)),
            format!("SELECT {} FROM t", deep("abs(", "k", ")", 1000)),
            format!(
                "CREATE TABLE t (k int PRIMARY KEY, v {})",
                deep("frozen<tuple<", "int", ">>", 3000)
            ),
            format!("SELECT {} FROM system.local", vec!["key"; 1500].join("+")),
            format!("SELECT {} FROM t", vec!["k"; 1500].join("/")),
            format!("SELECT k{} FROM t", ".f".repeat(1500)),
            format!("SELECT k{} FROM t", "['a']".repeat(1500)),
            format!("UPDATE t SET v = {}1 WHERE k = 0", "- ".repeat(5000)),
            format!(
                "SELECT * FROM t WHERE k = {{a: {}}}",
                deep("{a: ", "1", "}", 3000)
            ),
        ];
        for q in &too_deep {
            let e = std::thread::Builder::new()
                .stack_size(2 << 20) // a tokio worker thread's stack
                .spawn({
                    let q = q.clone();
                    move || parse_statement(&q).map(|_| ()).unwrap_err().message
                })
                .unwrap()
                .join()
                .unwrap();
            assert!(e.contains("nested too deeply"), "{}: {e}", &q[..60]);
        }
    }

    #[test]
    fn syntax_errors_quote_the_source_as_cassandra_does() {
        // ten tokens back, whitespace runs counted, the failing token bracketed
        let e = parse_statement("SELECT k, ttl(v) > 990 AS big FROM ttl")
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("line 1:17 mismatched input '>' expecting K_FROM (SELECT k, ttl(v) [>]...)")
        );
        let e = parse_statement("UPDATE lwt SET v = 8 WHERE k = 2 IF NOT EXISTS")
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("line 1:36 no viable alternative at input 'NOT' (...WHERE k = 2 IF [NOT]...)")
        );
    }

    #[test]
    fn modifications_parse_as_cassandras_grammar() {
        let err = |q: &str| {
            parse_statement(q)
                .err()
                .map(|e| e.message)
                .unwrap_or_default()
        };
        // shorthand updates are additions and substractions
        match parse("UPDATE t SET a += 3, b -= 2 WHERE k = 1") {
            Statement::Update(u) => {
                assert!(matches!(u.assignments[0].op, AssignOp::Append(_)));
                assert!(matches!(u.assignments[1].op, AssignOp::Remove(_)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err("UPDATE t SET v = w + 1 WHERE k = 1"),
            "Only expressions of the form X = X +<value> are supported."
        );
        assert_eq!(
            err("UPDATE t SET m['a'] = 1, m = {'x': 0} WHERE k = 1"),
            "Multiple incompatible setting of column m"
        );
        assert!(parse_statement("UPDATE t SET m['a'] = 1, m['b'] = 2 WHERE k = 1").is_ok());
        assert!(parse_statement("UPDATE t SET a = a + 1, a = a + 2 WHERE k = 1").is_ok());
        assert_eq!(
            err("UPDATE t SET u.a = 1, u.a = 2 WHERE k = 1"),
            "Multiple incompatible setting of column u"
        );
        // USING takes an integer or a marker; DELETE one timestamp
        assert_eq!(
            err("INSERT INTO t (k) VALUES (1) USING TTL 'a'"),
            "line 1:39 no viable alternative at input 'a' (...VALUES (1) USING TTL [']...)"
        );
        assert!(
            parse_statement("INSERT INTO t (k) VALUES (1) USING TTL ? AND TIMESTAMP -1").is_ok()
        );
        assert_eq!(
            err("DELETE FROM t USING TTL 10 WHERE k = 1"),
            "line 1:20 mismatched input 'TTL' expecting K_TIMESTAMP (DELETE FROM t USING [TTL]...)"
        );
        assert_eq!(
            err("BEGIN LOGGED BATCH APPLY BATCH"),
            "line 1:6 mismatched input 'LOGGED' expecting K_BATCH (BEGIN [LOGGED]...)"
        );
        assert_eq!(
            err("INSERT INTO t JSON null"),
            "line 1:19 no viable alternative at input 'null' (INSERT INTO t JSON [null])"
        );
        // ANTLR's two-token decisions
        assert_eq!(
            err("INSERT INTO t VALUES (1, 1)"),
            "line 1:14 no viable alternative at input 'VALUES' (INSERT INTO [t] VALUES...)"
        );
        assert_eq!(
            err("UPDATE t SET l = l + l WHERE k = 8"),
            "line 1:23 no viable alternative at input 'WHERE' (...SET l = l + [l] WHERE...)"
        );
        assert_eq!(
            err("UPDATE t SET v = 1 WHERE k = 1 IF EXISTS AND v = 1"),
            "line 1:41 no viable alternative at input 'AND' (...WHERE k = 1 IF [EXISTS] AND...)"
        );
        assert_eq!(
            err("DELETE FROM t WHERE k = 8 AND c = 1 ALLOW FILTERING"),
            "line 1:36 mismatched input 'ALLOW' expecting EOF (...8 AND c = 1 [ALLOW] FILTERING)"
        );
        assert_eq!(
            err("DELETE FROM t WHERE k = 8 ALLOW"),
            "line 1:26 mismatched input 'ALLOW' expecting EOF"
        );
    }

    #[test]
    fn schema_statements_are_refused_as_cassandras_grammar_refuses_them() {
        let err = |q: &str| parse_statement(q).err().map(|e| e.message);
        assert_eq!(
            err(r#"CREATE KEYSPACE "" WITH replication = {}"#).as_deref(),
            Some(r#"line 1:16 no viable alternative at input '""' (CREATE KEYSPACE [""]...)"#)
        );
        assert_eq!(
            err(r#"CREATE TABLE t (k int PRIMARY KEY, "" int)"#).as_deref(),
            Some(
                r#"line 1:35 mismatched input '""' expecting ')' (...(k int PRIMARY KEY, [""]...)"#
            )
        );
        assert_eq!(
            err("CREATE TYPE int (a int)").as_deref(),
            Some("line 1:16 mismatched input '(' expecting '.' (CREATE TYPE int [(]...)")
        );
        assert_eq!(
            err("DROP TYPE int").as_deref(),
            Some("line 0:-1 mismatched input '<EOF>' expecting '.'")
        );
        assert_eq!(
            err("CREATE TABLE t (k int PRIMARY KEY) WITH comment = 'a' AND comment = 'b'")
                .as_deref(),
            Some("Multiple definitions for property 'comment'")
        );
        assert_eq!(
            err("ALTER KEYSPACE k WITH replication = {'class': 'a', 'class': 'b'}").as_deref(),
            Some("Multiple definition for property class")
        );
        assert_eq!(
            err("ALTER TABLE t WITH COMPACT STORAGE").as_deref(),
            Some("line 1:27 no viable alternative at input 'STORAGE' (ALTER TABLE t WITH [COMPACT] STORAGE)")
        );
        let Statement::CreateTable(ct) =
            parse("CREATE TABLE t (k int PRIMARY KEY, v int PRIMARY KEY)")
        else {
            panic!("not a CREATE TABLE")
        };
        assert!(ct.multiple_primary_keys);
        let Statement::CreateTable(ct) =
            parse("CREATE TABLE t (k int PRIMARY KEY, v vector<float, -1>)")
        else {
            panic!("not a CREATE TABLE")
        };
        assert_eq!(ct.columns[1].typ, "vector<float, -1>");
    }
}
