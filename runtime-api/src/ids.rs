//! Typed path parameters of the runtime API. Each refuses, at construction, a value that would
//! change which route a URL reaches: empty, `.`, `..`, anything with `/`, and control
//! characters. A value that passed is still percent-encoded as one segment by the client.

use std::fmt;

/// Why a string is not a valid runtime path parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} is not valid: {why}")]
pub struct IdError {
    pub what: &'static str,
    pub value: String,
    pub why: &'static str,
}

/// Longest value accepted: runtime names are `kairon-<namespace>-<name>` (63 + 253 + 7).
const MAX_LEN: usize = 330;

fn check_segment(what: &'static str, value: &str) -> Result<(), IdError> {
    let refuse = |why| Err(IdError { what, value: value.chars().take(80).collect(), why });
    if value.is_empty() {
        return refuse("it is empty");
    }
    if value == "." || value == ".." {
        return refuse("`.` and `..` are not names");
    }
    if value.contains('/') {
        return refuse("it contains `/`");
    }
    if value.chars().any(char::is_control) {
        return refuse("it contains a control character");
    }
    if value.len() > MAX_LEN {
        return refuse("it is too long");
    }
    Ok(())
}

macro_rules! segment_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                check_segment($what, &value)?;
                Ok($name(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Reads as the plain string it was validated from.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(value: &str) -> Result<Self, IdError> {
                $name::new(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                $name::new(value)
            }
        }
    };
}

segment_id!(
    /// The runtime's ID of an instance (a VM or sandbox), as in `Vm::id`. Never a name: the
    /// runtime does not resolve names where an ID is expected.
    InstanceId,
    "instance ID"
);
impl InstanceId {
    /// A fresh random ID, as the runtime gives each new instance.
    pub fn random() -> Self {
        InstanceId(uuid::Uuid::new_v4().to_string())
    }
}

impl Pid {
    /// A fresh random process ID (12 hex digits).
    pub fn random() -> Self {
        Pid(uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
    }

    /// A guest's own numeric pid.
    pub fn number(pid: i64) -> Self {
        Pid(pid.to_string())
    }
}

segment_id!(
    /// A template's name on a node.
    TemplateName,
    "template name"
);
segment_id!(
    /// A node pool's name.
    PoolName,
    "pool name"
);
segment_id!(
    /// A background process's ID inside an instance, as in `Process::id`.
    Pid,
    "process ID"
);

/// The path of a request relayed to a server in the guest (the sandbox HTTP proxy), without
/// its leading `/`. Split into segments, each encoded on its own; `.` and `..` segments are
/// refused so nothing can climb out of the proxy prefix, whatever the runtime's URL handling.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestPath(Vec<String>);

impl GuestPath {
    pub fn new(path: &str) -> Result<Self, IdError> {
        let refuse = |why| Err(IdError { what: "guest path", value: path.chars().take(80).collect(), why });
        if path.chars().any(char::is_control) {
            return refuse("it contains a control character");
        }
        let path = path.strip_prefix('/').unwrap_or(path);
        if path.is_empty() {
            return Ok(GuestPath(Vec::new()));
        }
        let segments: Vec<String> = path.split('/').map(str::to_string).collect();
        if segments.iter().any(|s| s == "." || s == "..") {
            return refuse("`.` and `..` segments are not allowed");
        }
        Ok(GuestPath(segments))
    }

    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_what_changes_a_route() {
        for bad in ["", ".", "..", "../v1/vms", "a/b", "/", "a\0b", "a\nb", "a\u{7f}"] {
            assert!(InstanceId::new(bad).is_err(), "{bad:?} accepted");
            assert!(TemplateName::new(bad).is_err(), "{bad:?} accepted");
            assert!(PoolName::new(bad).is_err(), "{bad:?} accepted");
            assert!(Pid::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(InstanceId::new("x".repeat(MAX_LEN + 1)).is_err());
        for good in ["kairon-agents-web", "0f9c2e", "a..b", "...", "p%2F", "x y"] {
            assert_eq!(InstanceId::new(good).unwrap().as_str(), good);
        }
        let e = InstanceId::new("..").unwrap_err();
        assert_eq!(e.to_string(), "instance ID \"..\" is not valid: `.` and `..` are not names");
    }

    #[test]
    fn guest_paths_keep_segments_and_refuse_dot_segments() {
        assert_eq!(GuestPath::new("").unwrap().segments().count(), 0);
        assert_eq!(GuestPath::new("/a/b/").unwrap().segments().collect::<Vec<_>>(), ["a", "b", ""]);
        assert_eq!(GuestPath::new("a%2Fb").unwrap().segments().collect::<Vec<_>>(), ["a%2Fb"]);
        for bad in ["..", "../v1/vms", "a/../../v1", "a/./b", "a\r\nb"] {
            assert!(GuestPath::new(bad).is_err(), "{bad:?} accepted");
        }
    }
}
