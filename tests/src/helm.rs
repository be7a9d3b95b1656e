//! A small renderer of Helm templates, for the chart's tests (no `helm` binary can be had on
//! these machines). It takes exactly what the chart may use: `{{ .Values.x }}` and `{{ . }}`,
//! `if`/`else`/`with`/`range`/`end`, `toYaml … | nindent N`, `include "name" . | nindent N` of
//! a `define`, and the `{{-`/`-}}` whitespace trims; anything else is an error, so the chart
//! cannot drift into what this renderer (and the test) would not check.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Out(String),
    If(String, Vec<Node>, Vec<Node>),
    With(String, Vec<Node>, Vec<Node>),
    Range(String, Vec<Node>),
}

/// Renders `templates` (name → text; `_*.tpl` only define) with `values`; the documents of
/// every template, in name order.
pub fn render(templates: &BTreeMap<String, String>, values: &Value) -> Result<String, String> {
    let mut defines = BTreeMap::new();
    let mut bodies = Vec::new();
    for (name, text) in templates {
        let nodes = parse(&tokens(text)?, &mut defines).map_err(|e| format!("{name}: {e}"))?;
        if !name.starts_with('_') {
            bodies.push((name.clone(), nodes));
        }
    }
    let root = json!({"Values": values});
    let mut out = String::new();
    for (name, nodes) in bodies {
        let text = eval(&nodes, &root, &defines).map_err(|e| format!("{name}: {e}"))?;
        out.push_str("---\n");
        out.push_str(&text);
        out.push('\n');
    }
    Ok(out)
}

/// Text and actions, with the trims applied.
fn tokens(text: &str) -> Result<Vec<(bool, String)>, String> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut rest = text;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut before = rest[..start].to_string();
        if trim_next {
            before = before.trim_start().to_string();
        }
        let end = rest[start..].find("}}").ok_or("an action without }}")? + start;
        let mut action = &rest[start + 2..end];
        if let Some(a) = action.strip_prefix('-') {
            before = before.trim_end().to_string();
            action = a;
        }
        trim_next = false;
        if let Some(a) = action.strip_suffix('-') {
            trim_next = true;
            action = a;
        }
        out.push((false, before));
        out.push((true, action.trim().to_string()));
        rest = &rest[end + 2..];
    }
    let last = if trim_next { rest.trim_start() } else { rest };
    out.push((false, last.to_string()));
    Ok(out)
}

fn parse(tokens: &[(bool, String)], defines: &mut BTreeMap<String, Vec<Node>>) -> Result<Vec<Node>, String> {
    let mut pos = 0;
    let (nodes, stop) = block(tokens, &mut pos, defines)?;
    match stop {
        None => Ok(nodes),
        Some(s) => Err(format!("{{{{ {s} }}}} without its opening action")),
    }
}

/// Nodes up to an `end` or `else` (which it answers) or the end of the tokens.
fn block(
    tokens: &[(bool, String)],
    pos: &mut usize,
    defines: &mut BTreeMap<String, Vec<Node>>,
) -> Result<(Vec<Node>, Option<String>), String> {
    let mut nodes = Vec::new();
    while *pos < tokens.len() {
        let (is_action, text) = &tokens[*pos];
        *pos += 1;
        if !is_action {
            if !text.is_empty() {
                nodes.push(Node::Text(text.clone()));
            }
            continue;
        }
        let (word, arg) =
            text.split_once(' ').map(|(w, a)| (w, a.trim().to_string())).unwrap_or((text.as_str(), String::new()));
        match word {
            "end" | "else" => return Ok((nodes, Some(word.to_string()))),
            "if" | "with" => {
                let (then, stop) = block(tokens, pos, defines)?;
                let otherwise = match stop.as_deref() {
                    Some("else") => {
                        let (o, stop) = block(tokens, pos, defines)?;
                        if stop.as_deref() != Some("end") {
                            return Err(format!("{word} {arg}: no end"));
                        }
                        o
                    }
                    Some("end") => Vec::new(),
                    _ => return Err(format!("{word} {arg}: no end")),
                };
                nodes.push(if word == "if" {
                    Node::If(arg, then, otherwise)
                } else {
                    Node::With(arg, then, otherwise)
                });
            }
            "range" => {
                let (body, stop) = block(tokens, pos, defines)?;
                if stop.as_deref() != Some("end") {
                    return Err(format!("range {arg}: no end"));
                }
                nodes.push(Node::Range(arg, body));
            }
            "define" => {
                let (body, stop) = block(tokens, pos, defines)?;
                if stop.as_deref() != Some("end") {
                    return Err(format!("define {arg}: no end"));
                }
                defines.insert(arg.trim_matches('"').to_string(), body);
            }
            _ => nodes.push(Node::Out(text.clone())),
        }
    }
    Ok((nodes, None))
}

fn eval(nodes: &[Node], dot: &Value, defines: &BTreeMap<String, Vec<Node>>) -> Result<String, String> {
    let mut out = String::new();
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Out(p) => out.push_str(&scalar(&pipeline(p, dot, defines)?)),
            Node::If(p, then, otherwise) | Node::With(p, then, otherwise) => {
                let v = pipeline(p, dot, defines)?;
                let inner = if matches!(n, Node::With(..)) { &v } else { dot };
                out.push_str(&if truthy(&v) { eval(then, inner, defines)? } else { eval(otherwise, dot, defines)? });
            }
            Node::Range(p, body) => {
                for item in pipeline(p, dot, defines)?.as_array().into_iter().flatten() {
                    out.push_str(&eval(body, item, defines)?);
                }
            }
        }
    }
    Ok(out)
}

/// `cmd | cmd …`; each later command takes the one before's output as its last argument.
fn pipeline(text: &str, dot: &Value, defines: &BTreeMap<String, Vec<Node>>) -> Result<Value, String> {
    let mut value: Option<Value> = None;
    for cmd in text.split('|').map(str::trim) {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        value = Some(match words.as_slice() {
            [field] if field.starts_with('.') => lookup(dot, field),
            ["toYaml", field] => {
                let v = lookup(dot, field);
                Value::String(serde_yaml::to_string(&v).map_err(|e| e.to_string())?.trim_end().to_string())
            }
            ["include", name, "."] => {
                let body = defines.get(name.trim_matches('"')).ok_or(format!("no define {name}"))?;
                Value::String(eval(body, dot, defines)?)
            }
            ["nindent", n] => {
                let n: usize = n.parse().map_err(|_| format!("nindent {n}"))?;
                let input = scalar(&value.take().ok_or("nindent of nothing")?);
                let pad = " ".repeat(n);
                Value::String(format!(
                    "\n{}",
                    input.lines().map(|l| format!("{pad}{l}")).collect::<Vec<_>>().join("\n")
                ))
            }
            _ => return Err(format!("{{{{ {text} }}}}: not something this chart may use")),
        });
    }
    value.ok_or_else(|| "an empty action".to_string())
}

fn lookup(dot: &Value, field: &str) -> Value {
    field.split('.').filter(|s| !s.is_empty()).fold(dot.clone(), |v, k| v.get(k).cloned().unwrap_or(Value::Null))
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(t: &str, values: Value) -> Result<String, String> {
        render(&[("t.yaml".to_string(), t.to_string())].into(), &values)
            .map(|s| s.trim_start_matches("---\n").to_string())
    }

    #[test]
    fn values_conditions_loops_yaml_and_trims() {
        let v = json!({"a": {"b": 3}, "on": true, "off": false, "list": ["x", "y"], "m": {"k": "v"}});
        assert_eq!(one("n: {{ .Values.a.b }}", v.clone()).unwrap(), "n: 3\n");
        assert_eq!(one("{{- if .Values.on }}\nyes\n{{- end }}", v.clone()).unwrap(), "\nyes\n");
        assert_eq!(one("{{- if .Values.off }}yes{{ else }}no{{ end }}", v.clone()).unwrap(), "no\n");
        assert_eq!(one("l:{{- range .Values.list }}\n- {{ . }}{{- end }}", v.clone()).unwrap(), "l:\n- x\n- y\n");
        assert_eq!(one("m:\n  {{- toYaml .Values.m | nindent 2 }}", v.clone()).unwrap(), "m:\n  k: v\n");
        assert_eq!(one("{{- with .Values.m }}k={{ .k }}{{- end }}", v.clone()).unwrap(), "k=v\n");
        assert!(one("{{ default 1 .Values.a }}", v).is_err(), "only what the chart may use");
    }
}
