//! `kairon-agent watch` as the api runs it: a recursive watch of a real directory, its events as
//! they come on stdout.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

#[test]
fn a_recursive_watch_sees_create_modify_rename_and_remove_below() {
    let dir = std::env::temp_dir().join(format!("kairon-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kairon-agent"))
        .args(["watch", "--recursive", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> (String, String, Value) {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        (v["type"].as_str().unwrap().to_string(), v["path"].as_str().unwrap_or_default().to_string(), v)
    };
    assert_eq!(next().0, "ready");
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (kind, at, v) = next();
    assert_eq!((kind.as_str(), at, v["isDir"].as_bool()), ("create", path(&sub), Some(true)));
    // The new directory is watched as it appears: a file made in it is seen.
    std::thread::sleep(Duration::from_millis(100));
    let file = sub.join("f.txt");
    std::fs::write(&file, b"one").unwrap();
    assert_eq!(next().0.as_str(), "create");
    let (kind, at, _) = next();
    assert_eq!((kind.as_str(), at), ("modify", path(&file)));
    let renamed = sub.join("g.txt");
    std::fs::rename(&file, &renamed).unwrap();
    let (kind, at, v) = next();
    assert_eq!((kind.as_str(), at, v["from"].as_str()), ("rename", path(&renamed), file.to_str()));
    std::fs::remove_file(&renamed).unwrap();
    let (kind, at, _) = next();
    assert_eq!((kind.as_str(), at), ("remove", path(&renamed)));
    // The watched directory going ends the watch.
    std::fs::remove_dir_all(&dir).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_path_that_is_no_directory_is_an_error_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_kairon-agent")).args(["watch", "/no/such/dir"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "error");
    assert!(v["message"].as_str().unwrap().contains("/no/such/dir is not a directory"), "{v}");
    assert_eq!(out.status.code(), Some(2));
}
