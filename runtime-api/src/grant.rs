//! Per-node runtime credentials for a cluster. One shared runtime token would let a node that is
//! taken over reach every other node's runtime. Instead the api signs, for each node, a
//! short-lived grant (an EdDSA JWT whose audience is that node's runtime) and a runtime accepts
//! only grants for itself, checked with the api's public key. A node holds the public key and a
//! secret of its own runtime's (for its own agent): nothing another runtime accepts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// How long a grant is valid; a signer hands out a new one once half of it has passed.
pub const GRANT_SECONDS: u64 = 600;
const ISSUER: &str = "kairon-api";

#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("the runtime grant key {what}: {detail}")]
    BadKey { what: &'static str, detail: String },
    #[error("runtime grant refused: {0}")]
    Refused(String),
}

#[derive(Serialize, Deserialize)]
struct Claims {
    iss: String,
    aud: String,
    iat: u64,
    exp: u64,
}

/// The audience of the grants for `node`'s runtime.
pub fn audience(node: &str) -> String {
    format!("kairon-runtime:{node}")
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

/// The api's side: signs grants with its Ed25519 private key (PKCS#8 PEM), one per node, reused
/// until half their life has passed.
pub struct GrantSigner {
    key: EncodingKey,
    issued: Mutex<HashMap<String, (Arc<str>, u64)>>,
}

impl GrantSigner {
    pub fn from_pem(private_pem: &[u8]) -> Result<Self, GrantError> {
        let key = EncodingKey::from_ed_pem(private_pem)
            .map_err(|e| GrantError::BadKey { what: "(private, Ed25519 PKCS#8 PEM)", detail: e.to_string() })?;
        Ok(GrantSigner { key, issued: Mutex::new(HashMap::new()) })
    }

    /// A grant for `node`'s runtime, valid for at least half of [`GRANT_SECONDS`].
    pub fn grant(&self, node: &str) -> Arc<str> {
        let now = now();
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((token, exp)) = issued.get(node)
            && *exp > now + GRANT_SECONDS / 2
        {
            return token.clone();
        }
        // Bounded by the nodes there are; a grant of a node gone expires unused.
        issued.retain(|_, (_, exp)| *exp > now);
        let claims = Claims { iss: ISSUER.into(), aud: audience(node), iat: now, exp: now + GRANT_SECONDS };
        let token: Arc<str> = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims, &self.key)
            .expect("an Ed25519 key signs")
            .into();
        issued.insert(node.to_string(), (token.clone(), claims.exp));
        token
    }
}

/// A runtime's side: accepts grants the api signed for this node and no other.
pub struct GrantVerifier {
    key: DecodingKey,
    audience: String,
}

impl GrantVerifier {
    /// `public_pem`: the api's Ed25519 public key (SPKI PEM); `node`: this runtime's node.
    pub fn from_pem(public_pem: &[u8], node: &str) -> Result<Self, GrantError> {
        let key = DecodingKey::from_ed_pem(public_pem)
            .map_err(|e| GrantError::BadKey { what: "(public, Ed25519 PEM)", detail: e.to_string() })?;
        Ok(GrantVerifier { key, audience: audience(node) })
    }

    pub fn verify(&self, token: &str) -> Result<(), GrantError> {
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_issuer(&[ISSUER]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.leeway = 30;
        jsonwebtoken::decode::<Claims>(token, &self.key, &v).map(drop).map_err(|e| GrantError::Refused(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Made once with `openssl genpkey -algorithm ed25519`; only for these tests.
    const PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIL9KxUo8jddzWcecwozoDOOWl5lvV/GJtQloH5lS1sT5
-----END PRIVATE KEY-----
";
    const PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAvcmS1f6wuHe4JT3aa6VyZwVrqjREh/d7SEM66l+Cqy0=
-----END PUBLIC KEY-----
";

    #[test]
    fn a_grant_opens_its_own_nodes_runtime_only() {
        let signer = GrantSigner::from_pem(PRIVATE.as_bytes()).unwrap();
        let a = GrantVerifier::from_pem(PUBLIC.as_bytes(), "node-a").unwrap();
        let b = GrantVerifier::from_pem(PUBLIC.as_bytes(), "node-b").unwrap();
        let grant = signer.grant("node-a");
        a.verify(&grant).unwrap();
        assert!(b.verify(&grant).is_err(), "node-b accepted node-a's grant");
        // Reused while fresh.
        assert_eq!(signer.grant("node-a"), grant);
        // Expired, unsigned or tampered grants are refused.
        let key = EncodingKey::from_ed_pem(PRIVATE.as_bytes()).unwrap();
        let old = Claims { iss: ISSUER.into(), aud: audience("node-a"), iat: 1, exp: now() - 120 };
        let expired = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &old, &key).unwrap();
        assert!(a.verify(&expired).is_err(), "an expired grant was accepted");
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &Claims { iss: ISSUER.into(), aud: audience("node-a"), iat: now(), exp: now() + 60 },
            &EncodingKey::from_secret(PUBLIC.as_bytes()).unwrap(),
        )
        .unwrap();
        assert!(a.verify(&hs).is_err(), "an HMAC token keyed with the public key was accepted");
        let mut tampered = grant.to_string();
        tampered.insert(tampered.len() - 3, 'A');
        assert!(a.verify(&tampered).is_err());
        assert!(a.verify("").is_err());
    }
}
