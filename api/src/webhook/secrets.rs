//! Secrets at the webhook, for Kairon on a real cluster. A Machine's `spec.secretEnv` (a pool
//! template's, a claim's) makes the api read those Secrets for the Machine's commands, with its
//! own rights: whoever may run a command there reads them. So a tenant who writes a reference
//! must be allowed to `get` that Secret itself, as the cluster's RBAC says, asked with a
//! SubjectAccessReview for the requesting user (as kube-apiserver asks its authorizer). Only
//! references the write adds are asked about: a label change on a Machine does not need the
//! rights its creator had. Kairon's own components and admins are not asked (the controllers
//! copy references that a tenant's pool or claim already carried).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::{Refusal, UserInfo};

/// The Secrets `obj` (of `plural`) names in a `secretEnv`, each with the first field naming it.
pub fn referenced(plural: &str, obj: &Value) -> BTreeMap<String, String> {
    let (pointer, field) = match plural {
        "machines" | "machineclaims" => ("/spec/secretEnv", "spec.secretEnv"),
        "machinepools" => ("/spec/template/spec/secretEnv", "spec.template.spec.secretEnv"),
        _ => return BTreeMap::new(),
    };
    let mut found = BTreeMap::new();
    if let Some(vars) = obj.pointer(pointer).and_then(Value::as_object) {
        for (var, r) in vars {
            if let Some(name) = r.get("name").and_then(Value::as_str) {
                found.entry(name.to_string()).or_insert_with(|| format!("{field}.{var}"));
            }
        }
    }
    found
}

/// Refuses the write unless `user` may `get` every Secret `new` references that `old` did not.
pub(crate) async fn check(
    kube: &kube::Client,
    user: &UserInfo,
    namespace: &str,
    plural: &str,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), Refusal> {
    let before: BTreeSet<String> = old.map(|o| referenced(plural, o).into_keys().collect()).unwrap_or_default();
    let reviews: Api<SubjectAccessReview> = Api::all(kube.clone());
    for (secret, field) in referenced(plural, new).into_iter().filter(|(s, _)| !before.contains(s)) {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                uid: user.uid.clone(),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_string()),
                    verb: Some("get".into()),
                    resource: Some("secrets".into()),
                    name: Some(secret.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = reviews.create(&PostParams::default(), &review).await.map_err(|e| {
            tracing::warn!(error = %e, %namespace, %secret, "webhook: asking whether a writer may read a Secret");
            (
                503,
                "ServiceUnavailable",
                format!("could not ask whether {} may read Secret {namespace}/{secret}; try again", user.username),
            )
        })?;
        if !answer.status.is_some_and(|s| s.allowed) {
            return Err((
                403,
                "Forbidden",
                format!(
                    "{field} names Secret {secret:?}, which {} may not read (get secrets in namespace {namespace}): a \
                     Machine's commands see its secretEnv, so referencing a Secret takes the right to read it \
                     (kubectl auth can-i get secret/{secret} -n {namespace})",
                    user.username
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_found_where_each_kind_keeps_them() {
        let env = json!({"TOKEN": {"name": "gh", "key": "token"}, "KEY": {"name": "aws", "key": "id"}, "OTHER": {"name": "gh", "key": "x"}});
        let machine = json!({"spec": {"secretEnv": env}});
        let got = referenced("machines", &machine);
        assert_eq!(got.keys().collect::<Vec<_>>(), ["aws", "gh"]);
        assert_eq!(got["aws"], "spec.secretEnv.KEY");
        let pool = json!({"spec": {"template": {"spec": {"secretEnv": {"T": {"name": "p", "key": "k"}}}}}});
        assert_eq!(referenced("machinepools", &pool)["p"], "spec.template.spec.secretEnv.T");
        assert_eq!(
            referenced("machineclaims", &json!({"spec": {"secretEnv": {"T": {"name": "c", "key": "k"}}}}))["c"],
            "spec.secretEnv.T"
        );
        assert!(referenced("kaironquotas", &machine).is_empty());
        assert!(referenced("machines", &json!({"spec": {}})).is_empty());
    }
}
