//! The CQL lexer: source text to tokens with line and column positions.

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Unquoted identifier or keyword, as written.
    Ident(String),
    /// `"quoted identifier"`, unescaped.
    QuotedIdent(String),
    Str(String),
    Integer(String),
    Float(String),
    Hex(Vec<u8>),
    Uuid(String),
    Duration(String),
    /// Punctuation: `( ) , ; . * = < > <= >= != + - [ ] { } : ?`
    Sym(&'static str),
    Eof,
}

/// A token with its 1-based line and 0-based column, as Cassandra reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
    /// Source text of the token.
    pub text: String,
}

/// A lexing failure with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct LexError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

const SYMS: [&str; 26] = [
    "<=", ">=", "!=", "+=", "-=", "(", ")", ",", ";", "..", ".", "*", "=", "<", ">", "+", "-", "[",
    "]", "{", "}", ":", "?", "&", "/", "%",
];

fn is_uuid_at(s: &[char], i: usize) -> bool {
    // 8-4-4-4-12 hex digits
    let groups = [8, 4, 4, 4, 12];
    let mut p = i;
    for (gi, g) in groups.iter().enumerate() {
        for _ in 0..*g {
            match s.get(p) {
                Some(c) if c.is_ascii_hexdigit() => p += 1,
                _ => return false,
            }
        }
        if gi < 4 {
            if s.get(p) != Some(&'-') {
                return false;
            }
            p += 1;
        }
    }
    // must not continue as an identifier
    !matches!(s.get(p), Some(c) if c.is_alphanumeric() || *c == '_')
}

const DURATION_UNITS: [&str; 11] = ["mo", "ms", "us", "µs", "ns", "y", "w", "d", "h", "m", "s"];

/// Length of a `1h30m`-style duration starting at `i` (digits first), or 0.
fn duration_len(s: &[char], i: usize) -> usize {
    let mut p = i;
    let mut groups = 0;
    loop {
        let start = p;
        while matches!(s.get(p), Some(c) if c.is_ascii_digit()) {
            p += 1;
        }
        if p == start {
            break;
        }
        let mut matched = 0;
        for u in DURATION_UNITS {
            let uc: Vec<char> = u.chars().collect();
            if (0..uc.len()).all(
                |k| matches!(s.get(p + k), Some(c) if c.to_lowercase().eq(uc[k].to_lowercase())),
            ) {
                matched = uc.len();
                break;
            }
        }
        if matched == 0 {
            p = start;
            break;
        }
        p += matched;
        groups += 1;
    }
    if groups == 0 || matches!(s.get(p), Some(c) if c.is_alphanumeric() || *c == '_') {
        0
    } else {
        p - i
    }
}

/// Splits `src` into tokens; the last token is always `Eof`.
pub fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut line_start = 0;
    let err = |line: usize, col: usize, m: String| LexError {
        line,
        col,
        message: m,
    };
    while i < s.len() {
        let c = s[i];
        let col = i - line_start;
        if c == '\n' {
            line += 1;
            i += 1;
            line_start = i;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        // comments
        if (c == '-' && s.get(i + 1) == Some(&'-')) || (c == '/' && s.get(i + 1) == Some(&'/')) {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && s.get(i + 1) == Some(&'*') {
            i += 2;
            loop {
                if i >= s.len() {
                    return Err(err(line, col, "unterminated comment".into()));
                }
                if s[i] == '\n' {
                    line += 1;
                    line_start = i + 1;
                }
                if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let start = i;
        let tok = if c == '\'' {
            let mut v = String::new();
            i += 1;
            loop {
                match s.get(i) {
                    None => {
                        return Err(err(
                            line,
                            col,
                            format!(
                                "token recognition error at: '{}'",
                                s[start..].iter().collect::<String>()
                            ),
                        ))
                    }
                    Some('\'') if s.get(i + 1) == Some(&'\'') => {
                        v.push('\'');
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(&ch) => {
                        if ch == '\n' {
                            line += 1;
                            line_start = i + 1;
                        }
                        v.push(ch);
                        i += 1;
                    }
                }
            }
            Tok::Str(v)
        } else if c == '$' && s.get(i + 1) == Some(&'$') {
            i += 2;
            let mut v = String::new();
            loop {
                match s.get(i) {
                    None => return Err(err(line, col, "unterminated $$ string".into())),
                    Some('$') if s.get(i + 1) == Some(&'$') => {
                        i += 2;
                        break;
                    }
                    Some(&ch) => {
                        if ch == '\n' {
                            line += 1;
                            line_start = i + 1;
                        }
                        v.push(ch);
                        i += 1;
                    }
                }
            }
            Tok::Str(v)
        } else if c == '"' {
            let mut v = String::new();
            i += 1;
            loop {
                match s.get(i) {
                    None => return Err(err(line, col, "unterminated quoted identifier".into())),
                    Some('"') if s.get(i + 1) == Some(&'"') => {
                        v.push('"');
                        i += 2;
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some(&ch) => {
                        v.push(ch);
                        i += 1;
                    }
                }
            }
            Tok::QuotedIdent(v)
        } else if c == '0' && matches!(s.get(i + 1), Some('x') | Some('X')) && !is_uuid_at(&s, i) {
            i += 2;
            let hs = i;
            while matches!(s.get(i), Some(c) if c.is_ascii_hexdigit()) {
                i += 1;
            }
            let hex: String = s[hs..i].iter().collect();
            if hex.len() % 2 == 1 {
                return Err(err(
                    line,
                    col,
                    format!("Invalid hex literal 0x{hex}: odd number of digits"),
                ));
            }
            let mut bytes = Vec::with_capacity(hex.len() / 2);
            for k in (0..hex.len()).step_by(2) {
                let b = u8::from_str_radix(&hex[k..k + 2], 16)
                    .map_err(|e| err(line, col, e.to_string()))?;
                bytes.push(b);
            }
            Tok::Hex(bytes)
        } else if c.is_ascii_hexdigit() && is_uuid_at(&s, i) {
            i += 36;
            Tok::Uuid(s[start..i].iter().collect())
        } else if c.is_ascii_digit() {
            let dl = duration_len(&s, i);
            if dl > 0 {
                i += dl;
                Tok::Duration(s[start..i].iter().collect())
            } else {
                while matches!(s.get(i), Some(c) if c.is_ascii_digit()) {
                    i += 1;
                }
                let mut is_float = false;
                if s.get(i) == Some(&'.') && matches!(s.get(i + 1), Some(c) if c.is_ascii_digit()) {
                    is_float = true;
                    i += 1;
                    while matches!(s.get(i), Some(c) if c.is_ascii_digit()) {
                        i += 1;
                    }
                } else if s.get(i) == Some(&'.')
                    && !matches!(s.get(i + 1), Some(c) if c.is_alphabetic() || *c == '.')
                {
                    // "1." is a float in CQL
                    is_float = true;
                    i += 1;
                }
                if matches!(s.get(i), Some('e') | Some('E')) {
                    let mut p = i + 1;
                    if matches!(s.get(p), Some('+') | Some('-')) {
                        p += 1;
                    }
                    if matches!(s.get(p), Some(c) if c.is_ascii_digit()) {
                        is_float = true;
                        i = p;
                        while matches!(s.get(i), Some(c) if c.is_ascii_digit()) {
                            i += 1;
                        }
                    }
                }
                let text: String = s[start..i].iter().collect();
                if matches!(s.get(i), Some(c) if c.is_alphabetic() || *c == '_') {
                    // e.g. 123abc is not a valid token
                    while matches!(s.get(i), Some(c) if c.is_alphanumeric() || *c == '_') {
                        i += 1;
                    }
                    let bad: String = s[start..i].iter().collect();
                    return Err(err(
                        line,
                        col,
                        format!("token recognition error at: '{bad}'"),
                    ));
                }
                if is_float {
                    Tok::Float(text)
                } else {
                    Tok::Integer(text)
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            while matches!(s.get(i), Some(c) if c.is_alphanumeric() || *c == '_') {
                i += 1;
            }
            // ISO 8601's alternative format: P0001-02-03T04:05:06
            // (upper case only, unlike the other forms)
            if i - start == 5 && s[start] == 'P' && s.len() >= start + 20 {
                let cand: String = s[start..start + 20].iter().collect();
                if sibyl_types::iso_alternative(&cand).is_some() {
                    i = start + 20;
                }
            }
            let text: String = s[start..i].iter().collect();
            // ISO-8601 durations: P1Y2M3DT4H5M6S, P1W
            let up = text.to_ascii_uppercase();
            if up.starts_with('P')
                && up.len() > 1
                && (is_iso_duration(&up) || sibyl_types::iso_alternative(&text).is_some())
            {
                Tok::Duration(text)
            } else if up == "NAN" || up == "INFINITY" {
                Tok::Float(text)
            } else {
                Tok::Ident(text)
            }
        } else {
            let mut found = None;
            for sym in SYMS {
                let sc: Vec<char> = sym.chars().collect();
                if s.len() >= i + sc.len() && s[i..i + sc.len()] == sc[..] {
                    found = Some(sym);
                    break;
                }
            }
            match found {
                Some(sym) => {
                    i += sym.chars().count();
                    Tok::Sym(sym)
                }
                None => return Err(err(line, col, format!("token recognition error at: '{c}'"))),
            }
        };
        out.push(Token {
            tok,
            line,
            col,
            text: s[start..i].iter().collect(),
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col: i.saturating_sub(line_start),
        text: "<EOF>".into(),
    });
    Ok(out)
}

fn is_iso_duration(up: &str) -> bool {
    let body = &up[1..];
    if body.is_empty() {
        return false;
    }
    let mut seen_digit = false;
    let mut any_unit = false;
    for ch in body.chars() {
        if ch.is_ascii_digit() {
            seen_digit = true;
        } else if "YMDWHS".contains(ch) {
            if !seen_digit {
                return false;
            }
            seen_digit = false;
            any_unit = true;
        } else if ch == 'T' {
            if seen_digit {
                return false;
            }
        } else {
            return false;
        }
    }
    any_unit && !seen_digit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        tokenize(s)
            .expect("lex")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn lexes_literals_of_every_kind() {
        assert_eq!(
            kinds("'it''s' 12 -3 1.5 0xCAFE 123e4567-e89b-12d3-a456-426614174000 1h30m NaN"),
            vec![
                Tok::Str("it's".into()),
                Tok::Integer("12".into()),
                Tok::Sym("-"),
                Tok::Integer("3".into()),
                Tok::Float("1.5".into()),
                Tok::Hex(vec![0xca, 0xfe]),
                Tok::Uuid("123e4567-e89b-12d3-a456-426614174000".into()),
                Tok::Duration("1h30m".into()),
                Tok::Float("NaN".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn skips_comments_and_tracks_lines() {
        let t = tokenize("-- c\nSELECT /* x */ a").expect("lex");
        assert_eq!(t[0].line, 2);
        assert_eq!(t[1].col, 15);
    }

    #[test]
    fn unterminated_string_is_an_error() {
        assert!(tokenize("SELECT 'abc").is_err());
    }
}
