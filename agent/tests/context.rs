//! `kairon-agent context` as the SDKs run it: requests on stdin, answers after the marker on
//! stdout, against the host's own python3 and node (the sandbox tests run Python in a template).

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

const MARK: &str = "\x1ekairon-context ";

struct Context {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    asked: u32,
}

impl Context {
    fn start(language: &str) -> (Context, Value) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kairon-agent"))
            .args(["context", language])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut ctx = Context { child, lines, asked: 0 };
        let hello = ctx.answer();
        (ctx, hello)
    }

    fn answer(&mut self) -> Value {
        loop {
            let line = self.lines.next().expect("the context answers").unwrap();
            if let Some(json) = line.strip_prefix(MARK) {
                return serde_json::from_str(json).unwrap();
            }
        }
    }

    fn run(&mut self, code: &str, timeout: u32) -> Value {
        self.asked += 1;
        let req = json!({"id": self.asked.to_string(), "code": code, "timeoutSeconds": timeout});
        writeln!(self.child.stdin.as_mut().unwrap(), "{req}").unwrap();
        let got = self.answer();
        assert_eq!(got["id"], self.asked.to_string(), "{got}");
        got
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

#[test]
fn a_python_context_keeps_its_state_and_reports_output_values_and_tracebacks() {
    let (mut py, hello) = Context::start("python");
    assert_eq!((hello["ready"].as_bool(), hello["language"].as_str()), (Some(true), Some("python")));
    let first = py.run("x = 21\nprint('hi')\nimport os; _ = os.system('echo from-a-child >&2')", 0);
    assert_eq!((first["stdout"].as_str(), first["stderr"].as_str()), (Some("hi\n"), Some("from-a-child\n")));
    assert_eq!(first["text"], Value::Null);
    assert_eq!(py.run("x * 2", 0)["text"], "42");
    let err = py.run("def f():\n    return 1 / 0\nf()", 0);
    assert_eq!(err["error"]["name"], "ZeroDivisionError");
    let tb = err["error"]["traceback"].as_str().unwrap();
    assert!(tb.starts_with("Traceback") && tb.contains("line 2, in f") && tb.contains("return 1 / 0"), "{tb}");
    assert!(!tb.contains("driver"), "the driver's frames are left out: {tb}");
    assert_eq!(py.run("x =", 0)["error"]["name"], "SyntaxError");
    let slow = py.run("import time\ntime.sleep(30)", 1);
    assert_eq!(slow["error"]["name"], "TimeoutError", "{slow}");
    // input() reads nothing: the protocol's stdin is not the code's.
    assert_eq!(py.run("input()", 0)["error"]["name"], "EOFError");
    assert_eq!(py.run("x", 0)["text"], "21", "the context outlives its errors");
}

#[test]
fn a_javascript_context_keeps_lexical_state_and_awaits_a_promise() {
    let (mut js, hello) = Context::start("javascript");
    assert_eq!((hello["ready"].as_bool(), hello["language"].as_str()), (Some(true), Some("javascript")));
    let first = js.run("const x = 21; console.log('hi')", 0);
    assert_eq!((first["stdout"].as_str(), first["text"].clone()), (Some("hi\n"), Value::Null));
    assert_eq!(js.run("x * 2", 0)["text"], "42");
    assert_eq!(js.run("Promise.resolve([1, 2])", 0)["text"], "[ 1, 2 ]");
    let err = js.run("function f() { throw new TypeError('bad') }\nf()", 0);
    assert_eq!((err["error"]["name"].as_str(), err["error"]["value"].as_str()), (Some("TypeError"), Some("bad")));
    let tb = err["error"]["traceback"].as_str().unwrap();
    assert!(tb.contains("at f (<cell 4>:1:") && !tb.contains("runInThisContext"), "{tb}");
    assert!(js.run("while (true) {}", 1)["error"]["value"].as_str().unwrap().contains("timed out"));
    assert_eq!(js.run("x", 0)["text"], "21");
}

#[test]
fn an_unknown_language_is_refused_in_the_protocol() {
    let (_ctx, hello) = Context::start("cobol");
    assert_eq!(hello["ready"], false);
    assert!(hello["error"]["value"].as_str().unwrap().contains("use python or javascript"), "{hello}");
}
