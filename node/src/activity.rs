//! What counts as activity, as a pure function of two samples: guest CPU above
//! `idleCPUMillicores`, disk I/O above 256 KiB/s, or a new VMM process.

use kairon_model::machine::IDLE_DISK_BYTES_PER_SECOND;

/// One reading of an instance's counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds on a monotonic clock.
    pub at: f64,
    pub cpu_nanos: u64,
    pub disk_bytes: u64,
    pub pid: Option<u32>,
}

/// Why a sample pair counts as activity (for logs and tests), or None when idle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activity {
    NewProcess,
    Cpu { millicores: f64 },
    Disk { bytes_per_second: f64 },
}

/// Compares two readings taken `cur.at - prev.at` seconds apart.
pub fn activity(prev: &Sample, cur: &Sample, idle_cpu_millicores: i64) -> Option<Activity> {
    // A new VMM process, or counters that went backwards (the instance restarted).
    if prev.pid != cur.pid || cur.cpu_nanos < prev.cpu_nanos || cur.disk_bytes < prev.disk_bytes {
        return Some(Activity::NewProcess);
    }
    let dt = cur.at - prev.at;
    if dt <= 0.0 {
        return None;
    }
    let millicores = (cur.cpu_nanos - prev.cpu_nanos) as f64 / 1e6 / dt;
    if millicores > idle_cpu_millicores as f64 {
        return Some(Activity::Cpu { millicores });
    }
    let bytes_per_second = (cur.disk_bytes - prev.disk_bytes) as f64 / dt;
    if bytes_per_second > IDLE_DISK_BYTES_PER_SECOND as f64 {
        return Some(Activity::Disk { bytes_per_second });
    }
    None
}

/// `lastActivityTime` is written at most once per `interval_seconds`.
pub fn should_write(last_written_unix: Option<i64>, now_unix: i64, interval_seconds: i64) -> bool {
    last_written_unix.is_none_or(|last| now_unix - last >= interval_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at: f64, cpu_ms: u64, disk: u64) -> Sample {
        Sample { at, cpu_nanos: cpu_ms * 1_000_000, disk_bytes: disk, pid: Some(7) }
    }

    #[test]
    fn cpu_against_the_threshold() {
        // 20 ms of CPU per second = 20 millicores.
        let (a, b) = (s(0.0, 1000, 0), s(10.0, 1200, 0));
        assert_eq!(activity(&a, &b, 50), None, "20m under a 50m threshold is idle");
        assert_eq!(activity(&a, &b, 10), Some(Activity::Cpu { millicores: 20.0 }), "20m over 10m is active");
        assert_eq!(activity(&a, &s(10.0, 1500, 0), 50), None, "exactly 50m is not above 50m");
        assert!(matches!(activity(&a, &s(1.0, 2000, 0), 50), Some(Activity::Cpu { .. })), "a busy loop");
    }

    #[test]
    fn disk_above_256_kib_per_second() {
        let a = s(0.0, 0, 0);
        assert_eq!(activity(&a, &s(4.0, 0, 1024 * 1024), 50), None, "exactly 256 KiB/s is idle");
        assert!(matches!(activity(&a, &s(2.0, 0, 1024 * 1024), 50), Some(Activity::Disk { .. })));
    }

    #[test]
    fn a_new_process_is_activity() {
        let a = s(0.0, 5000, 0);
        let b = Sample { pid: Some(8), ..s(10.0, 5000, 0) };
        assert_eq!(activity(&a, &b, 50), Some(Activity::NewProcess));
        assert_eq!(activity(&a, &s(10.0, 10, 0), 50), Some(Activity::NewProcess), "counters reset");
        assert_eq!(activity(&a, &s(0.0, 9000, 0), 50), None, "no time passed");
    }

    #[test]
    fn writes_are_throttled() {
        assert!(should_write(None, 100, 30));
        assert!(!should_write(Some(100), 129, 30));
        assert!(should_write(Some(100), 130, 30));
    }
}
