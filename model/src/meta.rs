//! Small shared status types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A status condition, as Kubernetes writes them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's name, e.g. `Scheduled`, `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable CamelCase reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What happened and what to do about it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition of `type_` with `status`, keeping `old`'s transition time while the status
    /// stays (Kubernetes' rule: the time says when the status last changed), else `now`.
    pub fn keeping_transition(
        type_: &str,
        status: &str,
        reason: &str,
        message: String,
        old: Option<&Condition>,
        now: Time,
    ) -> Condition {
        let since = old.filter(|c| c.type_ == type_ && c.status == status).and_then(|c| c.last_transition_time.clone());
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: Some(since.unwrap_or(now)),
            observed_generation: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_stays() {
        let t = |s: &str| Time(s.parse().unwrap());
        let first = Condition::keeping_transition("A", "False", "Low", "1".into(), None, t("2026-01-01T00:00:00Z"));
        assert_eq!(first.last_transition_time, Some(t("2026-01-01T00:00:00Z")));
        let same =
            Condition::keeping_transition("A", "False", "Low", "2".into(), Some(&first), t("2026-01-01T00:05:00Z"));
        assert_eq!((same.last_transition_time, same.message.as_str()), (first.last_transition_time.clone(), "2"));
        let flipped =
            Condition::keeping_transition("A", "True", "Met", "3".into(), Some(&first), t("2026-01-01T00:09:00Z"));
        assert_eq!(flipped.last_transition_time, Some(t("2026-01-01T00:09:00Z")));
    }
}
