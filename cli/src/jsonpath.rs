//! `-o jsonpath=TEMPLATE`, as kubectl reads it: literal text, and `{...}` actions holding a path
//! (`.metadata.name`, `.items[*].metadata.name`, `.items[0]`, `['a.b/c']`,
//! `.status.conditions[?(@.type=="Ready")].status`), a quoted literal (`{"\n"}`), or
//! `{range PATH}...{end}`. Several results of one path are printed space-separated; strings
//! print bare, anything else as compact JSON.

use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Node {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.a.b OP literal)]`; without OP, that the field exists.
    Filter(Vec<Step>, Option<(bool, Value)>),
}

/// A parsed template.
#[derive(Debug, PartialEq)]
pub struct Template(Vec<Node>);

impl Template {
    pub fn parse(src: &str) -> Result<Self, String> {
        let mut tokens = Tokens { src, pos: 0 };
        let nodes = parse_nodes(&mut tokens, false)?;
        Ok(Self(nodes))
    }

    /// The template applied to `v`.
    pub fn render(&self, v: &Value) -> String {
        let mut out = String::new();
        render(&self.0, v, &mut out);
        out
    }
}

struct Tokens<'a> {
    src: &'a str,
    pos: usize,
}

/// The template's pieces up to its end (or `{end}` when `in_range`).
fn parse_nodes(t: &mut Tokens<'_>, in_range: bool) -> Result<Vec<Node>, String> {
    let mut nodes = Vec::new();
    loop {
        let rest = &t.src[t.pos..];
        if rest.is_empty() {
            if in_range {
                return Err("a {range} has no {end}".into());
            }
            return Ok(nodes);
        }
        let Some(open) = rest.find('{') else {
            nodes.push(Node::Text(rest.to_string()));
            t.pos = t.src.len();
            continue;
        };
        if open > 0 {
            nodes.push(Node::Text(rest[..open].to_string()));
        }
        let body_start = t.pos + open + 1;
        let close = action_end(&t.src[body_start..])
            .ok_or_else(|| format!("the action at byte {} has no closing }}", t.pos + open))?;
        let body = t.src[body_start..body_start + close].trim();
        t.pos = body_start + close + 1;
        if body == "end" {
            if in_range {
                return Ok(nodes);
            }
            return Err("{end} without a {range}".into());
        }
        if let Some(path) = body.strip_prefix("range ") {
            let steps = parse_path(path.trim())?;
            let inner = parse_nodes(t, true)?;
            nodes.push(Node::Range(steps, inner));
        } else if let Some(lit) = quoted(body) {
            nodes.push(Node::Text(lit));
        } else {
            nodes.push(Node::Path(parse_path(body)?));
        }
    }
}

/// Where an action's `}` is, skipping quoted text.
fn action_end(s: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), c) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(i),
            _ => {}
        }
        escaped = false;
    }
    None
}

/// A quoted literal's text, with `\n`, `\t`, `\\` and the quote unescaped.
fn quoted(s: &str) -> Option<String> {
    let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = s.strip_prefix(q)?.strip_suffix(q)?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Some(out)
}

fn parse_path(src: &str) -> Result<Vec<Step>, String> {
    let s = src.strip_prefix('$').unwrap_or(src);
    let bytes = s.as_bytes();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'.' => {
                let start = i + 1;
                let end = s[start..].find(['.', '[']).map_or(s.len(), |e| start + e);
                if end == start {
                    if start == s.len() {
                        break; // `.` alone: the object itself.
                    }
                    return Err(format!("{src:?}: an empty field name at byte {start}"));
                }
                steps.push(Step::Field(s[start..end].to_string()));
                i = end;
            }
            b'[' => {
                let end = bracket_end(&s[i..]).ok_or_else(|| format!("{src:?}: a [ without its ]"))? + i;
                steps.push(parse_bracket(src, &s[i + 1..end])?);
                i = end + 1;
            }
            _ if i == 0 => {
                // `metadata.name`: kubectl takes a path without its leading dot too.
                let end = s.find(['.', '[']).unwrap_or(s.len());
                steps.push(Step::Field(s[..end].to_string()));
                i = end;
            }
            _ => return Err(format!("{src:?}: unexpected {:?} at byte {i}", bytes[i] as char)),
        }
    }
    Ok(steps)
}

/// Where the `]` closing the `[` at the start of `s` is, skipping quoted text and parentheses.
fn bracket_end(s: &str) -> Option<usize> {
    let mut quote = None;
    let mut depth = 0;
    for (i, c) in s.char_indices().skip(1) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ']') if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn parse_bracket(src: &str, inner: &str) -> Result<Step, String> {
    let inner = inner.trim();
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Some(lit) = quoted(inner) {
        return Ok(Step::Field(lit));
    }
    if let Ok(n) = inner.parse::<i64>() {
        return Ok(Step::Index(n));
    }
    let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) else {
        return Err(format!("{src:?}: [{inner}] is not an index, [*], a quoted name or a filter [?(@.a==\"b\")]"));
    };
    let (lhs, cmp) = match filter.find("==").map(|i| (i, true)).or_else(|| filter.find("!=").map(|i| (i, false))) {
        Some((i, eq)) => {
            let rhs = filter[i + 2..].trim();
            let value = quoted(rhs)
                .map(Value::String)
                .or_else(|| serde_json::from_str(rhs).ok())
                .ok_or_else(|| format!("{src:?}: {rhs} is not a quoted string, a number or true/false"))?;
            (filter[..i].trim(), Some((eq, value)))
        }
        None => (filter.trim(), None),
    };
    let path =
        lhs.strip_prefix('@').ok_or_else(|| format!("{src:?}: a filter starts with @, e.g. ?(@.type==\"Ready\")"))?;
    Ok(Step::Filter(parse_path(path)?, cmp))
}

/// Every value `steps` reaches from `v`.
fn select<'a>(steps: &[Step], v: &'a Value) -> Vec<&'a Value> {
    let mut here = vec![v];
    for step in steps {
        let mut next = Vec::new();
        for v in here {
            match step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(n) => {
                    if let Some(a) = v.as_array() {
                        let i = if *n < 0 { a.len() as i64 + n } else { *n };
                        next.extend(usize::try_from(i).ok().and_then(|i| a.get(i)));
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(o) => next.extend(o.values()),
                    _ => {}
                },
                Step::Filter(path, cmp) => {
                    for item in v.as_array().into_iter().flatten() {
                        let found = select(path, item);
                        let keep = match cmp {
                            None => !found.is_empty(),
                            Some((eq, want)) => found.contains(&want) == *eq,
                        };
                        if keep {
                            next.push(item);
                        }
                    }
                }
            }
        }
        here = next;
    }
    here
}

fn render(nodes: &[Node], v: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Path(steps) => {
                let found: Vec<String> = select(steps, v).into_iter().map(show).collect();
                out.push_str(&found.join(" "));
            }
            Node::Range(steps, inner) => {
                for item in select(steps, v) {
                    // `range .items` walks the list's elements as `range .items[*]` does.
                    match item {
                        Value::Array(a) => a.iter().for_each(|i| render(inner, i, out)),
                        other => render(inner, other, out),
                    }
                }
            }
        }
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(t: &str, v: &Value) -> String {
        Template::parse(t).unwrap_or_else(|e| panic!("{t}: {e}")).render(v)
    }

    #[test]
    fn paths_ranges_filters_and_literals() {
        let list = json!({"items": [
            {"metadata": {"name": "a", "labels": {"kairon.zyvor.dev/pool": "p"}},
             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "cpu": 2}},
            {"metadata": {"name": "b"}, "status": {"phase": "Paused", "conditions": [{"type": "Ready", "status": "False"}]}}
        ]});
        assert_eq!(run("{.items[*].metadata.name}", &list), "a b");
        assert_eq!(run("{.items[0].status.phase}", &list), "Running");
        assert_eq!(run("{.items[-1].metadata.name}", &list), "b");
        assert_eq!(run("{$.items[1].metadata.name}", &list), "b");
        assert_eq!(
            run("{range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}", &list),
            "a=Running\nb=Paused\n"
        );
        assert_eq!(run("{range .items}{.metadata.name};{end}", &list), "a;b;");
        assert_eq!(run("{.items[?(@.status.phase==\"Paused\")].metadata.name}", &list), "b", "a filter on a field");
        assert_eq!(run("{.items[?(@.status.phase!='Paused')].metadata.name}", &list), "a");
        assert_eq!(run("{.items[?(@.status.cpu)].metadata.name}", &list), "a", "a filter on existence");
        assert_eq!(run("{.items[0].status.conditions[?(@.type==\"Ready\")].status}", &list), "True");
        assert_eq!(run("{.items[0].metadata.labels['kairon.zyvor.dev/pool']}", &list), "p");
        assert_eq!(run("{.items[0].status.cpu}", &list), "2");
        assert_eq!(run("{.items[1].status.conditions[0]}", &list), r#"{"status":"False","type":"Ready"}"#);
        assert_eq!(run("name: {.items[0].metadata.name}\t{'x}y'}", &list), "name: a\tx}y");
        assert_eq!(run("{.nothing.here}", &list), "", "a missing field prints nothing");
        assert_eq!(run("{items[0].metadata.name}", &list), "a", "the leading dot is optional");
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        assert!(Template::parse("{.items").unwrap_err().contains("no closing"));
        assert!(Template::parse("{range .items[*]}{.x}").unwrap_err().contains("no {end}"));
        assert!(Template::parse("{end}").unwrap_err().contains("without a {range}"));
        assert!(Template::parse("{.items[x]}").unwrap_err().contains("is not an index"));
        assert!(Template::parse("{.items[?(.a==1)]}").unwrap_err().contains("starts with @"));
    }
}
