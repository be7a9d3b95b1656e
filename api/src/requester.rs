//! Who the api writes for, on a real cluster. The api writes Kairon's objects with its own
//! ServiceAccount, so without more the cluster (its audit log, Kairon's own admission webhook)
//! sees only "the api". A write made for a caller therefore impersonates the api's own
//! ServiceAccount with one extra, [`EXTRA`], holding the caller's Kairon identity: RBAC lets the
//! api impersonate only itself and only that extra (`deploy/kustomize/rbac.yaml`), and the
//! webhook believes the extra only on requests of that ServiceAccount
//! (`webhook::identity`), then holds the write to the caller's own rules. Nothing a client
//! sends can set it: it is a header between the api and the API server, never an annotation.
//!
//! The Machines service adds the headers ([`name`]) to the writes it makes for a caller (a
//! kube client's layers run in its buffer's task, so they cannot know the caller).

use k8s_openapi::api::authentication::v1::SelfSubjectReview;

use crate::auth::Identity;

/// The `userInfo.extra` key that names the caller of a write the api makes for one.
pub const EXTRA: &str = "kairon.zyvor.dev/requester";

/// The extra's value: the identity as JSON, non-ASCII escaped (a header value is ASCII).
pub fn encode(id: &Identity) -> String {
    let json = serde_json::to_string(id).unwrap_or_default();
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// The identity in an extra's value.
pub fn decode(value: &str) -> Result<Identity, String> {
    serde_json::from_str(value).map_err(|e| format!("unreadable {EXTRA}: {e}"))
}

/// The api's own Kubernetes user, when writes made for a caller can name it: a ServiceAccount
/// (impersonating a user by name alone would drop its groups, an admin's `system:masters`; a
/// ServiceAccount's groups follow from its name). None elsewhere, or when the cluster cannot say.
pub async fn own_user(client: &kube::Client) -> Option<String> {
    let review =
        kube::Api::<SelfSubjectReview>::all(client.clone()).create(&Default::default(), &Default::default()).await;
    let user = match review {
        Ok(r) => r.status.and_then(|s| s.user_info).and_then(|u| u.username).unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "could not learn the api's own Kubernetes user; its writes name no requester");
            return None;
        }
    };
    if !user.starts_with("system:serviceaccount:") {
        tracing::info!(%user, "the api is not a ServiceAccount; its writes name no requester");
        return None;
    }
    tracing::info!(%user, "writes made for a caller impersonate the api with {EXTRA}");
    Some(user)
}

/// `req` made for `id`: impersonating `own` (the api's user, [`own_user`]) with `id` as
/// [`EXTRA`]. Unchanged without `own`.
pub fn name<B>(mut req: http::Request<B>, own: Option<&str>, id: &Identity) -> http::Request<B> {
    if let Some(own) = own
        && let (Ok(user), Ok(value)) = (http::HeaderValue::from_str(own), http::HeaderValue::from_str(&encode(id)))
    {
        let headers = req.headers_mut();
        headers.insert("impersonate-user", user);
        // The extra's key goes percent-encoded in the header's name.
        headers.insert("impersonate-extra-kairon.zyvor.dev%2frequester", value);
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    #[test]
    fn a_requester_travels_as_ascii_and_reads_back() {
        let id = Identity {
            sub: "zoë \"ops\"".into(),
            role: Role::Operator,
            namespaces: vec!["team".into()],
            legacy: false,
        };
        let value = encode(&id);
        assert!(value.is_ascii() && http::HeaderValue::from_str(&value).is_ok(), "{value}");
        let back = decode(&value).unwrap();
        assert_eq!(
            (back.sub.as_str(), back.role, back.namespaces),
            ("zoë \"ops\"", Role::Operator, vec!["team".into()])
        );
        assert!(decode("bob").unwrap_err().contains(EXTRA));
        let req = name(http::Request::new(()), Some("system:serviceaccount:kairon-system:kairon-api"), &id);
        assert_eq!(req.headers()["impersonate-user"], "system:serviceaccount:kairon-system:kairon-api");
        assert_eq!(req.headers()["impersonate-extra-kairon.zyvor.dev%2frequester"], value.as_str());
        assert!(name(http::Request::new(()), None, &id).headers().is_empty(), "none where the api names no one");
    }
}
