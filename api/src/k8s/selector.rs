//! Kubernetes label and field selectors (`?labelSelector=` / `?fieldSelector=`).
//!
//! Pure parsing and matching; no I/O. Grammar follows `k8s.io/apimachinery`
//! closely enough that `kubectl -l ...` and `--field-selector ...` behave the
//! same, with looser validation of label keys and values.

use std::collections::BTreeMap;

use serde_json::Value;

/// A parsed label selector: a conjunction of requirements. Empty matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`. The empty string is the
    /// empty selector (matches everything).
    pub fn parse(s: &str) -> Result<Self, String> {
        let fail = |msg: String| format!("invalid label selector {s:?}: {msg}");
        let tokens = tokenize(s);
        let mut p = Parser { tokens, pos: 0 };
        let mut requirements = Vec::new();
        if p.peek().is_none() {
            return Ok(Self { requirements });
        }
        loop {
            requirements.push(p.requirement().map_err(fail)?);
            match p.next() {
                None => break,
                Some(Tok::Comma) => {
                    if p.peek().is_none() {
                        return Err(fail("trailing ','".into()));
                    }
                }
                Some(t) => {
                    return Err(fail(format!("expected ',' or end of selector, found {}", t.describe())));
                }
            }
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }

    /// Matches against `obj.metadata.labels`; a missing or malformed label map
    /// counts as no labels, so `!key` / `key!=v` still match such objects.
    pub fn matches_object(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.requirements.iter().all(|r| {
            let v = labels.and_then(|m| m.get(&r.key)).and_then(Value::as_str);
            r.matches(v)
        })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        let in_set = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            Op::Equals | Op::In => value.is_some_and(in_set),
            // Kubernetes: negative operators also match objects lacking the key.
            Op::NotEquals | Op::NotIn => !value.is_some_and(in_set),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::GreaterThan | Op::LessThan => {
                // Non-integer label values never match a numeric comparison.
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Op::GreaterThan { have > want } else { have < want }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Bang,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("{s:?}"),
            Tok::Bang => "'!'".into(),
            Tok::Eq => "'='".into(),
            Tok::DoubleEq => "'=='".into(),
            Tok::NotEq => "'!='".into(),
            Tok::Gt => "'>'".into(),
            Tok::Lt => "'<'".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
            Tok::Comma => "','".into(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>')
}

fn tokenize(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if is_special(c) {
            chars.next();
            let next_is_eq = chars.peek() == Some(&'=');
            let tok = match c {
                '=' if next_is_eq => {
                    chars.next();
                    Tok::DoubleEq
                }
                '=' => Tok::Eq,
                '!' if next_is_eq => {
                    chars.next();
                    Tok::NotEq
                }
                '!' => Tok::Bang,
                '(' => Tok::Open,
                ')' => Tok::Close,
                ',' => Tok::Comma,
                '<' => Tok::Lt,
                _ => Tok::Gt,
            };
            out.push(tok);
            continue;
        }
        let mut ident = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || is_special(c) {
                break;
            }
            ident.push(c);
            chars.next();
        }
        out.push(Tok::Ident(ident));
    }
    out
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    /// True when the next token ends the current requirement.
    fn at_requirement_end(&self) -> bool {
        matches!(self.peek(), None | Some(Tok::Comma))
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        if self.peek() == Some(&Tok::Bang) {
            self.pos += 1;
            let key = self.key()?;
            return Ok(Requirement { key, op: Op::DoesNotExist, values: Vec::new() });
        }
        let key = self.key()?;
        if self.at_requirement_end() {
            return Ok(Requirement { key, op: Op::Exists, values: Vec::new() });
        }
        let op = match self.next() {
            Some(Tok::Eq | Tok::DoubleEq) => Op::Equals,
            Some(Tok::NotEq) => Op::NotEquals,
            Some(Tok::Gt) => Op::GreaterThan,
            Some(Tok::Lt) => Op::LessThan,
            Some(Tok::Ident(w)) if w == "in" => Op::In,
            Some(Tok::Ident(w)) if w == "notin" => Op::NotIn,
            Some(t) => {
                return Err(format!(
                    "expected an operator (=, ==, !=, in, notin) after key {key:?}, found {}",
                    t.describe()
                ));
            }
            None => return Err(format!("expected an operator after key {key:?}")),
        };
        let values = match op {
            Op::In | Op::NotIn => self.value_list(&key)?,
            Op::GreaterThan | Op::LessThan => {
                let v = self.single_value(&key)?;
                if v.parse::<i64>().is_err() {
                    return Err(format!("value for key {key:?} must be an integer for '<' or '>', got {v:?}"));
                }
                vec![v]
            }
            _ => vec![self.single_value(&key)?],
        };
        Ok(Requirement { key, op, values })
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Ident(k)) => {
                validate_key(&k)?;
                Ok(k)
            }
            Some(t) => Err(format!("expected a label key, found {}", t.describe())),
            None => Err("expected a label key, found end of selector".into()),
        }
    }

    /// Value after `=`/`==`/`!=`; may be empty (`key=` selects the empty value).
    fn single_value(&mut self, key: &str) -> Result<String, String> {
        if self.at_requirement_end() {
            return Ok(String::new());
        }
        match self.next() {
            Some(Tok::Ident(v)) => {
                validate_value(key, &v)?;
                Ok(v)
            }
            Some(t) => Err(format!("expected a value for key {key:?}, found {}", t.describe())),
            None => Ok(String::new()),
        }
    }

    fn value_list(&mut self, key: &str) -> Result<Vec<String>, String> {
        match self.next() {
            Some(Tok::Open) => {}
            Some(t) => {
                return Err(format!("expected '(' after set operator for key {key:?}, found {}", t.describe()));
            }
            None => {
                return Err(format!("expected '(' after set operator for key {key:?}, found end of selector"));
            }
        }
        let mut values = Vec::new();
        // `expect_value` is true right after '(' or ','; an empty slot is "".
        let mut expect_value = true;
        loop {
            match self.next() {
                Some(Tok::Ident(v)) if expect_value => {
                    validate_value(key, &v)?;
                    values.push(v);
                    expect_value = false;
                }
                Some(Tok::Comma) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    expect_value = true;
                }
                Some(Tok::Close) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                None => return Err("missing ')'".into()),
                Some(t) => {
                    return Err(format!("unexpected {} in value list for key {key:?}", t.describe()));
                }
            }
        }
    }
}

fn validate_key(k: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
    if k.is_empty() {
        return Err("empty label key".into());
    }
    if !k.chars().all(ok_char) {
        return Err(format!(
            "invalid label key {k:?}: only letters, digits, '.', '_', '-' and a '/' prefix separator are allowed"
        ));
    }
    if let Some((prefix, name)) = k.split_once('/')
        && (prefix.is_empty() || name.is_empty() || name.contains('/'))
    {
        return Err(format!("invalid label key {k:?}: expected 'prefix/name' with a single '/'"));
    }
    Ok(())
}

fn validate_value(key: &str, v: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !v.chars().all(ok_char) {
        return Err(format!(
            "invalid value {v:?} for label key {key:?}: only letters, digits, '.', '_' and '-' are allowed"
        ));
    }
    Ok(())
}

/// A parsed field selector: a conjunction of `path=value` / `path!=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    path: String,
    value: String,
    equal: bool,
}

impl FieldSelector {
    /// Parses `metadata.name=foo,status.phase!=Running`. Like Kubernetes,
    /// `\,`, `\=` and `\\` escape those characters inside values.
    pub fn parse(s: &str) -> Result<Self, String> {
        let fail = |msg: String| format!("invalid field selector {s:?}: {msg}");
        let mut terms = Vec::new();
        for raw in split_unescaped(s, ',') {
            if raw.trim().is_empty() {
                continue;
            }
            let Some((lhs, op_len, equal)) = find_operator(raw) else {
                return Err(fail(format!("term {:?} has no operator (expected '=', '==' or '!=')", raw.trim())));
            };
            let path = raw[..lhs].trim();
            if path.is_empty() {
                return Err(fail(format!("term {:?} has an empty field path", raw.trim())));
            }
            if path.contains(char::is_whitespace) || path.contains('\\') {
                return Err(fail(format!("invalid field path {path:?}")));
            }
            let value = unescape(raw[lhs + op_len..].trim()).map_err(fail)?;
            terms.push(FieldTerm { path: path.to_string(), value, equal });
        }
        Ok(Self { terms })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let actual = lookup_string(obj, &t.path);
            (actual == t.value) == t.equal
        })
    }

    /// `(path, value, equal)` for each term, so a caller can reject
    /// unsupported paths or translate them before matching.
    pub fn terms(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.terms.iter().map(|t| (t.path.as_str(), t.value.as_str(), t.equal))
    }

    pub fn map_paths(self, f: impl Fn(&str) -> String) -> Self {
        let terms = self.terms.into_iter().map(|t| FieldTerm { path: f(&t.path), ..t }).collect();
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on `sep` where it is not preceded by an escaping backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// Finds the first unescaped `!=`, `==` or `=`: (byte offset, length, is_equal).
fn find_operator(term: &str) -> Option<(usize, usize, bool)> {
    let bytes = term.as_bytes();
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' => escaped = true,
            b'!' if bytes.get(i + 1) == Some(&b'=') => return Some((i, 2, false)),
            b'=' if bytes.get(i + 1) == Some(&b'=') => return Some((i, 2, true)),
            b'=' => return Some((i, 1, true)),
            _ => {}
        }
    }
    None
}

fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\\' | ',' | '=')) => out.push(e),
            Some(e) => return Err(format!("invalid escape sequence '\\{e}' in value {v:?}")),
            None => return Err(format!("trailing '\\' in value {v:?}")),
        }
    }
    Ok(out)
}

/// Field value as Kubernetes compares it: strings as-is, numbers/bools in
/// their JSON form, absent or null as "".
fn lookup_string(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = sel("");
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
        assert!(sel("   ").is_empty());
    }

    #[test]
    fn equality_operators() {
        for s in ["app=web", "app==web", " app = web "] {
            let s = sel(s);
            assert!(s.matches(&labels(&[("app", "web")])));
            assert!(!s.matches(&labels(&[("app", "db")])));
            assert!(!s.matches(&labels(&[])));
        }
    }

    #[test]
    fn not_equals_matches_missing_key() {
        let s = sel("app!=web");
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert!(s.matches(&labels(&[("app", "db")])));
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn in_and_notin() {
        let s = sel("env in (prod, staging)");
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "staging")])));
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[])));

        let s = sel("env notin (prod,staging)");
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "dev")])));
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn exists_and_does_not_exist() {
        let s = sel("app");
        assert!(s.matches(&labels(&[("app", "")])));
        assert!(!s.matches(&labels(&[("x", "y")])));

        for s in ["!app", "! app"] {
            let s = sel(s);
            assert!(!s.matches(&labels(&[("app", "x")])));
            assert!(s.matches(&labels(&[("x", "y")])));
        }
    }

    #[test]
    fn numeric_comparisons() {
        let s = sel("tier>2");
        assert!(s.matches(&labels(&[("tier", "3")])));
        assert!(!s.matches(&labels(&[("tier", "2")])));
        assert!(!s.matches(&labels(&[("tier", "x")])));
        assert!(sel("tier<2").matches(&labels(&[("tier", "1")])));
        assert!(LabelSelector::parse("tier>x").is_err());
    }

    #[test]
    fn conjunction_and_prefixed_keys() {
        let s = sel("app.kubernetes.io/name=web, tier in (fe), !legacy,env");
        let mut l = labels(&[("app.kubernetes.io/name", "web"), ("tier", "fe"), ("env", "x")]);
        assert!(s.matches(&l));
        l.insert("legacy".into(), "true".into());
        assert!(!s.matches(&l));
    }

    #[test]
    fn empty_values() {
        assert!(sel("a=").matches(&labels(&[("a", "")])));
        assert!(!sel("a=").matches(&labels(&[("a", "x")])));
        assert!(sel("a=,b").matches(&labels(&[("a", ""), ("b", "1")])));
        assert!(sel("a in ()").matches(&labels(&[("a", "")])));
    }

    #[test]
    fn keyword_named_keys_still_work() {
        assert!(sel("in=x").matches(&labels(&[("in", "x")])));
        assert!(sel("notin").matches(&labels(&[("notin", "")])));
    }

    #[test]
    fn parse_errors_are_actionable() {
        assert_eq!(LabelSelector::parse("a in (b").unwrap_err(), "invalid label selector \"a in (b\": missing ')'");
        for bad in
            ["a in b", "a b", "=b", "a,", ",a", "a=b c", "a=(b)", "a/b/c=d", "/a", "a@b=c", "a=b/c", "!", "a in (b c)"]
        {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert!(err.starts_with(&format!("invalid label selector {bad:?}: ")), "{err}");
        }
    }

    #[test]
    fn matches_object_uses_metadata_labels() {
        let obj = json!({"metadata": {"name": "x", "labels": {"app": "web"}}});
        assert!(sel("app=web").matches_object(&obj));
        assert!(!sel("app=db").matches_object(&obj));
        let bare = json!({"metadata": {"name": "x"}});
        assert!(sel("app!=web").matches_object(&bare));
        assert!(sel("!app").matches_object(&bare));
        assert!(!sel("app").matches_object(&bare));
        assert!(sel("").matches_object(&json!({})));
    }

    fn fsel(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap()
    }

    #[test]
    fn field_selector_operators() {
        let pod = json!({
            "metadata": {"name": "p1", "namespace": "default"},
            "status": {"phase": "Running"},
            "spec": {"replicas": 3, "paused": false}
        });
        assert!(fsel("metadata.name=p1").matches(&pod));
        assert!(fsel("metadata.name==p1").matches(&pod));
        assert!(!fsel("metadata.name!=p1").matches(&pod));
        assert!(fsel("metadata.name=p1,status.phase!=Pending").matches(&pod));
        assert!(!fsel("metadata.name=p1,status.phase=Pending").matches(&pod));
        assert!(fsel("spec.replicas=3").matches(&pod));
        assert!(fsel("spec.paused=false").matches(&pod));
        // Absent fields compare as the empty string.
        assert!(fsel("spec.nodeName=").matches(&pod));
        assert!(fsel("spec.nodeName!=n1").matches(&pod));
        assert!(!fsel("spec.nodeName=n1").matches(&pod));
    }

    #[test]
    fn field_selector_parsing() {
        let s = fsel(" metadata.name = a , , status.phase!=b");
        let terms: Vec<_> = s.terms().collect();
        assert_eq!(terms, vec![("metadata.name", "a", true), ("status.phase", "b", false)]);
        assert!(fsel("").is_empty());
        let s = fsel(r"metadata.name=a\,b\=c\\d");
        assert_eq!(s.terms().next(), Some(("metadata.name", r"a,b=c\d", true)));
        // The first operator wins, so '=' may appear unescaped in the value.
        assert_eq!(fsel("a.b=c=d").terms().next(), Some(("a.b", "c=d", true)));

        for bad in ["metadata.name", "=x", r"a=\x", "a b=c"] {
            let err = FieldSelector::parse(bad).unwrap_err();
            assert!(err.starts_with("invalid field selector"), "{err}");
        }
    }

    #[test]
    fn field_selector_map_paths() {
        let ev = json!({"regarding": {"uid": "u1", "name": "n"}});
        let s = fsel("involvedObject.uid=u1,involvedObject.name=n");
        assert!(!s.matches(&ev));
        let s = s.map_paths(|p| match p.strip_prefix("involvedObject.") {
            Some(rest) => format!("regarding.{rest}"),
            None => p.to_string(),
        });
        assert!(s.matches(&ev));
        assert_eq!(s.terms().next(), Some(("regarding.uid", "u1", true)));
    }
}
