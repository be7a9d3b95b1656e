//! The bounded-work flags of `kairon up` and `kairon api` (SECURITY.md, "Bounded work").

use std::time::Duration;

use kairon_api::limits::Limits;

#[derive(clap::Args, Clone)]
pub struct LimitArgs {
    /// Largest request body on every route except file uploads (--max-upload-bytes); larger
    /// answers 413. A byte count: 3MiB, 64KiB, 1048576.
    #[arg(long, env = "KAIRON_MAX_BODY_BYTES", default_value = "3MiB", value_parser = parse_bytes)]
    pub max_body_bytes: u64,
    /// Largest file upload (PUT …/files); larger answers 413. Uploads stream to the guest, so
    /// this bounds the disk one request may fill, not memory.
    #[arg(long, env = "KAIRON_MAX_UPLOAD_BYTES", default_value = "1GiB", value_parser = parse_bytes)]
    pub max_upload_bytes: u64,
    /// Most operations in one JSON Patch; more answers 413.
    #[arg(long, env = "KAIRON_MAX_PATCH_OPERATIONS", default_value_t = 10_000)]
    pub max_patch_operations: usize,
    /// Largest object a patch (JSON, merge or apply) may produce; larger answers 413.
    #[arg(long, env = "KAIRON_MAX_PATCHED_OBJECT_BYTES", default_value = "1.5MiB", value_parser = parse_bytes)]
    pub max_patched_object_bytes: u64,
    /// Most output kept of each exec stream (stdout, stderr); past it the output is cut and
    /// the result says `truncated: true`.
    #[arg(long, env = "KAIRON_MAX_EXEC_OUTPUT_BYTES", default_value = "16MiB", value_parser = parse_bytes)]
    pub max_exec_output_bytes: u64,
    /// The timeout of an exec whose request gives none.
    #[arg(long, env = "KAIRON_EXEC_DEFAULT_TIMEOUT", default_value = "300s", value_parser = parse_duration)]
    pub exec_default_timeout: Duration,
    /// The longest timeout an exec may ask for; more answers 400.
    #[arg(long, env = "KAIRON_EXEC_MAX_TIMEOUT", default_value = "3600s", value_parser = parse_duration)]
    pub exec_max_timeout: Duration,
    /// Most long-lived connections (watches, process waits, WebSockets, log follows) one token
    /// subject may hold at once; one more answers 429 TooManyConnections.
    #[arg(long, env = "KAIRON_MAX_CONNECTIONS_PER_SUBJECT", default_value_t = 32)]
    pub max_connections_per_subject: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            max_body_bytes: usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX),
            max_upload_bytes: self.max_upload_bytes,
            max_patch_operations: self.max_patch_operations,
            max_patched_object_bytes: usize::try_from(self.max_patched_object_bytes).unwrap_or(usize::MAX),
            max_exec_output_bytes: self.max_exec_output_bytes,
            exec_default_timeout: self.exec_default_timeout,
            exec_max_timeout: self.exec_max_timeout,
            max_connections_per_subject: self.max_connections_per_subject,
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    kairon_model::duration::parse_seconds(s).map(|s| Duration::from_secs(s as u64))
}

/// A byte count: a whole number of bytes, or a number with KiB, MiB or GiB (`1.5MiB`).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a byte count: write e.g. 1048576, 64KiB, 3MiB or 1.5MiB");
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (t[..i].trim(), &t[i..]),
        None => (t, ""),
    };
    let mult: u64 = match unit {
        "" | "B" => 1,
        "KiB" | "K" | "Ki" => 1 << 10,
        "MiB" | "M" | "Mi" => 1 << 20,
        "GiB" | "G" | "Gi" => 1 << 30,
        _ => return Err(bad()),
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult).ok_or_else(bad);
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    if !f.is_finite() || f < 0.0 || unit.is_empty() {
        return Err(bad());
    }
    Ok((f * mult as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("3MiB"), Ok(3 << 20));
        assert_eq!(parse_bytes("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("1.5").is_err());
        assert!(parse_bytes("-1MiB").is_err());
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            l: LimitArgs,
        }
        let l = T::parse_from(["t"]).l.limits();
        let d = Limits::default();
        assert_eq!(l.max_body_bytes, d.max_body_bytes);
        assert_eq!(l.max_patch_operations, d.max_patch_operations);
        assert_eq!(l.max_patched_object_bytes, d.max_patched_object_bytes);
        assert_eq!(l.max_exec_output_bytes, d.max_exec_output_bytes);
        assert_eq!(l.exec_default_timeout, d.exec_default_timeout);
        assert_eq!(l.exec_max_timeout, d.exec_max_timeout);
        assert_eq!(l.max_connections_per_subject, d.max_connections_per_subject);
    }
}
