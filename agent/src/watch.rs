//! `kairon-agent watch [--recursive] PATH`: the changes under the directory PATH as they happen,
//! from inotify, one JSON object a line on stdout, until the directory goes or stdout closes (the
//! api runs it over the exec stream for `GET …/files/watch`):
//!
//! `{"type":"create"|"modify"|"remove"|"rename","path":"/abs/path","isDir":bool}`, a rename with
//! `"from"`; a move out of the watched tree is a `remove`, a move into it a `create`. First comes
//! `{"type":"ready"}` once every watch is in place, so a caller knows what follows is seen. A
//! problem is `{"type":"error","message":…}`, and the exit code is not 0.
//!
//! Recursive: each directory below gets its own watch, and one made later is watched as it
//! appears (what was made inside it before its watch took is announced as created).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use serde_json::{Value, json};

const USAGE: &str = "usage: kairon-agent watch [--recursive] PATH";

/// Runs the watch; the process's exit code.
pub fn run(args: &[String]) -> i32 {
    let (recursive, path) = match args {
        [flag, path] if flag == "--recursive" => (true, path),
        [path] if !path.starts_with('-') => (false, path),
        _ => return fail(USAGE),
    };
    let root = PathBuf::from(path);
    if !root.is_dir() {
        return fail(&format!("{path} is not a directory"));
    }
    let fd = match inotify::init(CreateFlags::CLOEXEC) {
        Ok(fd) => fd,
        Err(e) => return fail(&format!("inotify: {e}")),
    };
    let mut w = Watcher { fd, recursive, dirs: HashMap::new(), out: std::io::stdout().lock() };
    if let Err(e) = w.add_tree(&root, false) {
        return fail(&format!("watching {path}: {e}"));
    }
    if w.say(&json!({"type": "ready"})).is_err() {
        return 0;
    }
    w.follow()
}

fn fail(message: &str) -> i32 {
    let line = json!({"type": "error", "message": message});
    let _ = writeln!(std::io::stdout(), "{line}");
    2
}

struct Watcher<W: Write> {
    fd: OwnedFd,
    recursive: bool,
    /// Each watch descriptor's directory.
    dirs: HashMap<i32, PathBuf>,
    out: W,
}

impl<W: Write> Watcher<W> {
    fn mask() -> WatchFlags {
        WatchFlags::CREATE
            | WatchFlags::MODIFY
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::DONT_FOLLOW
    }

    /// Watches `dir` and, recursively, the directories below; with `announce`, says what is
    /// already inside as created (a directory made a moment ago may hold files already).
    fn add_tree(&mut self, dir: &Path, announce: bool) -> std::io::Result<()> {
        let wd = inotify::add_watch(&self.fd, dir, Self::mask())?;
        self.dirs.insert(wd, dir.to_path_buf());
        if !self.recursive && !announce {
            return Ok(());
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
        for e in entries.flatten() {
            let path = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if announce {
                self.say(&event("create", &path, is_dir))?;
            }
            if is_dir && self.recursive {
                // A directory gone meanwhile is no error.
                let _ = self.add_tree(&path, announce);
            }
        }
        Ok(())
    }

    fn say(&mut self, v: &Value) -> std::io::Result<()> {
        writeln!(self.out, "{v}")
    }

    fn follow(&mut self) -> i32 {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        // A rename's first half, by cookie, until its second half comes in the same read.
        let mut moved_from: HashMap<u32, (PathBuf, bool)> = HashMap::new();
        loop {
            let mut batch = Vec::new();
            {
                let mut reader = inotify::Reader::new(&self.fd, &mut buf);
                loop {
                    match reader.next() {
                        Ok(e) => {
                            let name = e.file_name().map(|n| OsStr::from_bytes(n.to_bytes()).to_os_string());
                            batch.push((e.wd(), e.events(), e.cookie(), name));
                        }
                        Err(rustix::io::Errno::INTR) => continue,
                        Err(e) if batch.is_empty() => {
                            let _ = self.say(&json!({"type": "error", "message": format!("inotify: {e}")}));
                            return 2;
                        }
                        Err(_) => break,
                    }
                    if reader.is_buffer_empty() {
                        break;
                    }
                }
            }
            let mut last: Option<(String, PathBuf)> = None;
            for (wd, flags, cookie, name) in batch {
                let Some(dir) = self.dirs.get(&wd).cloned() else { continue };
                if flags.contains(ReadFlags::DELETE_SELF) || flags.contains(ReadFlags::IGNORED) {
                    self.dirs.remove(&wd);
                    if self.dirs.is_empty() {
                        // The watched directory itself is gone: nothing more will come.
                        let _ = self.out.flush();
                        return 0;
                    }
                    continue;
                }
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    let _ = self.say(&json!({"type": "error", "message": "too many changes at once: some were lost"}));
                    continue;
                }
                let Some(name) = name else { continue };
                let path = dir.join(name);
                let is_dir = flags.contains(ReadFlags::ISDIR);
                let kind = if flags.contains(ReadFlags::CREATE) {
                    "create"
                } else if flags.contains(ReadFlags::MODIFY) {
                    "modify"
                } else if flags.contains(ReadFlags::DELETE) {
                    "remove"
                } else if flags.contains(ReadFlags::MOVED_FROM) {
                    moved_from.insert(cookie, (path, is_dir));
                    continue;
                } else if flags.contains(ReadFlags::MOVED_TO) {
                    let ok = match moved_from.remove(&cookie) {
                        Some((from, _)) => {
                            self.forget(&from);
                            let mut v = event("rename", &path, is_dir);
                            v["from"] = json!(from.to_string_lossy());
                            self.say(&v)
                        }
                        None => self.say(&event("create", &path, is_dir)),
                    };
                    if ok.is_err() {
                        return 0;
                    }
                    if is_dir && self.recursive {
                        let _ = self.add_tree(&path, false);
                    }
                    continue;
                } else {
                    continue;
                };
                // A write in many pieces is one modify per read.
                if kind == "modify" && last.as_ref().is_some_and(|(k, p)| k == kind && *p == path) {
                    continue;
                }
                if self.say(&event(kind, &path, is_dir)).is_err() {
                    return 0;
                }
                if kind == "create" && is_dir && self.recursive {
                    let _ = self.add_tree(&path, true);
                }
                last = Some((kind.to_string(), path));
            }
            // What moved out of the tree (no second half in this read) is gone from it.
            for (_, (from, is_dir)) in moved_from.drain() {
                self.forget(&from);
                if self.say(&event("remove", &from, is_dir)).is_err() {
                    return 0;
                }
            }
            if self.out.flush().is_err() {
                return 0;
            }
        }
    }

    /// Drops the watches of `dir` and below (moved away: its events would name old paths).
    fn forget(&mut self, dir: &Path) {
        let gone: Vec<i32> = self.dirs.iter().filter(|(_, d)| d.starts_with(dir)).map(|(wd, _)| *wd).collect();
        for wd in gone {
            let _ = inotify::remove_watch(&self.fd, wd);
            self.dirs.remove(&wd);
        }
    }
}

fn event(kind: &str, path: &Path, is_dir: bool) -> Value {
    json!({"type": kind, "path": path.to_string_lossy(), "isDir": is_dir})
}
