//! Children of the agent. As PID 1 the agent inherits every orphan of the guest, so one reaper
//! thread collects every exit (`wait(-1)`); children the agent cares about are registered under
//! the same lock they are spawned with, so no exit is missed and nothing else ever waits.

use std::collections::HashMap;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How a tracked child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

#[derive(Default)]
struct Table {
    /// Tracked children: `None` while running.
    exits: HashMap<u32, Option<Exit>>,
}

struct Reaper {
    table: Mutex<Table>,
    changed: Condvar,
    /// Signalled when a child is spawned, so a reaper idle for want of children waits for it
    /// at once (an exec's exit is seen when it happens, not at the next poll).
    spawned: Condvar,
}

/// Starts reaping now: as a container's init, orphans arrive before the agent spawns anything.
pub fn start_reaping() {
    reaper();
}

fn reaper() -> &'static Reaper {
    static R: OnceLock<Reaper> = OnceLock::new();
    R.get_or_init(|| {
        std::thread::Builder::new().name("reaper".into()).spawn(reap_forever).expect("the reaper thread starts");
        Reaper { table: Mutex::new(Table::default()), changed: Condvar::new(), spawned: Condvar::new() }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn reap_forever() {
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, status))) => {
                let r = reaper();
                let mut t = lock(&r.table);
                let pid = pid.as_raw_nonzero().get() as u32;
                if let Some(slot) = t.exits.get_mut(&pid) {
                    *slot = Some(Exit { code: status.exit_status(), signal: status.terminating_signal() });
                    r.changed.notify_all();
                }
            }
            // No children right now: until one is spawned (orphans re-parented to PID 1 are
            // picked up within the timeout).
            _ => {
                let r = reaper();
                let t = lock(&r.table);
                // A child spawned between the wait and this lock is already in the table.
                let idle = if t.exits.values().any(Option::is_none) { 1 } else { 50 };
                let _ = r.spawned.wait_timeout(t, Duration::from_millis(idle));
            }
        }
    }
}

/// Starts `cmd` and tracks its exit. The `Child` handle is returned for its pipes only: never
/// wait on it (the reaper does).
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    let r = reaper();
    let mut t = lock(&r.table);
    let child = cmd.spawn()?;
    t.exits.insert(child.id(), None);
    r.spawned.notify_all();
    Ok(child)
}

/// The exit of a tracked child, once it has ended (and forgets it then).
pub fn take_exit(pid: u32) -> Option<Exit> {
    let r = reaper();
    let mut t = lock(&r.table);
    let exit = (*t.exits.get(&pid)?)?;
    t.exits.remove(&pid);
    Some(exit)
}

pub fn is_tracked(pid: u32) -> bool {
    lock(&reaper().table).exits.contains_key(&pid)
}

/// Waits for a tracked child to end (at most `timeout`, forever when `None`).
pub fn wait(pid: u32, timeout: Option<Duration>) -> Option<Exit> {
    let r = reaper();
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut t = lock(&r.table);
    loop {
        match t.exits.get(&pid) {
            None => return None,
            Some(Some(exit)) => {
                let exit = *exit;
                t.exits.remove(&pid);
                return Some(exit);
            }
            Some(None) => {}
        }
        let wait = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                d - now
            }
            None => Duration::from_secs(3600),
        };
        t = r.changed.wait_timeout(t, wait).unwrap_or_else(std::sync::PoisonError::into_inner).0;
    }
}

/// Runs a command to completion with its output discarded; its exit.
pub fn run(program: &str, args: &[&str]) -> std::io::Result<Exit> {
    let child =
        spawn(Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()))?;
    Ok(wait(child.id(), None).unwrap_or(Exit { code: None, signal: None }))
}

/// What a capture holds: the bytes from offset `base` on (those before it were handed over and
/// let go), and whether some were cut off at the cap.
#[derive(Clone, Default)]
struct Held {
    bytes: Vec<u8>,
    cut: bool,
    base: usize,
}

/// A pipe drained on its own thread into a buffer capped at `cap` bytes.
pub struct Capture {
    buf: Arc<Mutex<Held>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Disconnected when the reading thread ends.
    ended: std::sync::mpsc::Receiver<()>,
}

impl Capture {
    /// Drains the pipe to its end, keeping the first `cap` bytes (qemu-ga's behaviour).
    pub fn start(pipe: impl Read + Send + 'static, cap: usize) -> Capture {
        Capture::spawn(pipe, cap, false)
    }

    /// Keeps the first `cap` bytes and then closes the pipe: the writer's next write fails with
    /// EPIPE/SIGPIPE, as under `| head -c`, so an endless writer ends instead of being drained.
    pub fn start_closing(pipe: impl Read + Send + 'static, cap: usize) -> Capture {
        Capture::spawn(pipe, cap, true)
    }

    fn spawn(mut pipe: impl Read + Send + 'static, cap: usize, close_at_cap: bool) -> Capture {
        let buf = Arc::new(Mutex::new(Held::default()));
        let b = buf.clone();
        let (end, ended) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _end = end;
            let mut chunk = [0u8; 16 * 1024];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut g = lock(&b);
                let room = cap.saturating_sub(g.bytes.len());
                if n > room {
                    g.cut = true;
                }
                g.bytes.extend_from_slice(&chunk[..n.min(room)]);
                if g.cut && close_at_cap {
                    break;
                }
            }
        });
        Capture { buf, thread: Some(thread), ended }
    }

    /// Waits for the pipe's end until `deadline`; whether it ended.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        !matches!(self.ended.recv_timeout(left), Err(std::sync::mpsc::RecvTimeoutError::Timeout))
    }

    /// What was read so far, without waiting for the end (a process that escaped may hold the
    /// pipe open for ever).
    pub fn so_far(self) -> (Vec<u8>, bool) {
        if self.done() {
            return self.finish();
        }
        let g = lock(&self.buf);
        (g.bytes.clone(), g.cut)
    }

    /// At most `max` of the bytes read so far from byte `from`, and the offset just past them.
    pub fn since(&self, from: usize, max: usize) -> (Vec<u8>, usize) {
        let g = lock(&self.buf);
        let from = from.saturating_sub(g.base).min(g.bytes.len());
        let to = from.saturating_add(max).min(g.bytes.len());
        (g.bytes[from..to].to_vec(), g.base + to)
    }

    /// Lets go of the bytes before offset `at` (its one reader has them): a terminal's output
    /// is then bounded by what is not yet read, not by all it ever showed.
    pub fn forget_before(&self, at: usize) {
        let mut g = lock(&self.buf);
        let n = at.saturating_sub(g.base).min(g.bytes.len());
        g.bytes.drain(..n);
        g.base += n;
    }

    /// Whether the pipe has reached its end.
    pub fn done(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The bytes and whether some were cut off.
    pub fn finish(mut self) -> (Vec<u8>, bool) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let g = std::mem::take(&mut *lock(&self.buf));
        (g.bytes, g.cut)
    }
}
