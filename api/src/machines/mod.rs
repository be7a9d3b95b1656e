//! The Machines service: every operation on Machines, pools, claims and nodes that the API
//! offers (objects, power, fork and clone, freeze, guest exec, processes and files with
//! wake-on-connect, node pools and claims), each taking the caller's [`Identity`] and answering
//! a typed result or an [`Error`]. The REST handlers and the MCP tools call it directly; they
//! only parse what comes in and map what goes out.
//!
//! It reads and writes objects through kube-rs (the embedded API, or a real cluster) with the
//! server's own rights, so every operation checks the caller itself first, and it reaches node
//! runtimes through `kairon-runtime-api`'s client only.

pub mod code;
pub mod error;
pub mod guest;
pub mod lifetime;
pub mod metrics;
pub mod migrate;
pub mod nodes;
pub mod objects;
pub mod power;
pub mod quota;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Api, Resource};

use kairon_model::{KaironNode, Machine};
use kairon_runtime_api::{CertificatePin, Credential, InstanceId, RuntimeClient, RuntimeConnector};

pub use error::{Error, Reason, Result};
pub use guest::{Needs, Session};
pub use objects::{Mirrored, check_name, check_namespace};

/// The service, one per server.
pub struct Machines {
    /// The Kubernetes API (the embedded one, or a real cluster), with the server's own rights:
    /// every operation checks the caller itself before using it.
    pub kube: kube::Client,
    /// On a cluster, the api's own ServiceAccount user: writes made for a caller impersonate it
    /// with the caller as `kairon.zyvor.dev/requester` (`crate::requester`).
    pub own_user: Option<String>,
    /// How the api proves itself to the nodes' runtimes: the one runtime token, or a grant per
    /// node (`kairon api --runtime-signing-key`).
    pub runtime_credential: Credential,
    /// The CA (PEM) that signs the runtimes' certificates, for nodes reached over `https` that
    /// registered no certificate of their own (`spec.runtimeCertificateSha256`, which wins).
    pub runtime_ca: Option<Vec<u8>>,
    /// `KAIRON_UI_SANDBOX_OPERATOR_EXEC`: named operators may use the guest of sandboxes.
    pub sandbox_operator_exec: bool,
    /// Guest sessions stamp `kairon.zyvor.dev/last-activity` at most this often per Machine.
    pub activity_stamp_interval: Duration,
    stamps: Mutex<HashMap<(String, String), Instant>>,
    reporter: Reporter,
    /// One set of connection pools for every node's runtime, made on first use.
    runtimes: tokio::sync::OnceCell<RuntimeConnector>,
    /// Each node's runtime endpoint and certificate as last read from its KaironNode, and
    /// when: guest operations reuse them for [`ENDPOINT_TTL`] instead of reading the node every
    /// time.
    endpoints: Mutex<HashMap<String, (RuntimeAddress, Instant)>>,
    /// Instances this server resumed itself, by Machine UID: the generation resumed, and when.
    /// Until the node agent reports the phase, a guest call need not resume them again.
    resumed: Mutex<HashMap<String, (i64, Instant)>>,
    /// Resumes under way for members a claim just took, by Machine UID: the generation and the
    /// resume (true once the instance runs), which the claimant's first guest call joins.
    resuming: Mutex<HashMap<String, (i64, Resuming)>>,
}

/// Where a node's runtime is, and the certificate it must present (over `https`).
#[derive(Clone)]
struct RuntimeAddress {
    endpoint: String,
    certificate: Option<CertificatePin>,
}

/// A resume that several callers may await: true once the instance runs.
pub(crate) type Resuming = futures::future::Shared<futures::future::BoxFuture<'static, bool>>;

/// How long a node's runtime endpoint is reused. A stale one can only send a request to where
/// the node was: the owner every guest request names (`machine_runtime`) still decides what is
/// reached.
const ENDPOINT_TTL: Duration = Duration::from_secs(5);

/// How long an instance this server resumed counts as running without the node agent's word.
const RESUMED_TTL: Duration = Duration::from_secs(10);

/// Size of the last-activity stamp map past which stale entries are dropped.
const STAMPS_PRUNE_AT: usize = 1024;

impl Machines {
    pub fn new(kube: kube::Client, runtime_credential: Credential) -> Self {
        Machines {
            kube,
            own_user: None,
            runtime_credential,
            runtime_ca: None,
            sandbox_operator_exec: false,
            activity_stamp_interval: Duration::from_secs(10),
            stamps: Mutex::new(HashMap::new()),
            reporter: Reporter { controller: "kairon-api".into(), instance: None },
            runtimes: tokio::sync::OnceCell::new(),
            endpoints: Mutex::new(HashMap::new()),
            resumed: Mutex::new(HashMap::new()),
            resuming: Mutex::new(HashMap::new()),
        }
    }

    /// The runtime of a node, from its registration.
    pub async fn runtime(&self, node: &str) -> Result<RuntimeClient> {
        let cached = {
            let endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
            endpoints.get(node).filter(|(_, at)| at.elapsed() < ENDPOINT_TTL).map(|(e, _)| e.clone())
        };
        let address = match cached {
            Some(a) => a,
            None => {
                let nodes: Api<KaironNode> = Api::all(self.kube.clone());
                let n = nodes.get_opt(node).await?.ok_or_else(|| {
                    Error::not_found(format!("node {node:?} is not registered (GET /api/v1/nodes lists the nodes)"))
                })?;
                let certificate = match &n.spec.runtime_certificate_sha256 {
                    Some(pin) => Some(pin.parse().map_err(|e| {
                        Error::unavailable(format!("node {node:?} registered an unusable runtime certificate: {e}"))
                    })?),
                    None => None,
                };
                let address = RuntimeAddress { endpoint: n.spec.runtime_endpoint, certificate };
                let mut endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
                // Bounded by the nodes there are; entries of nodes gone expire unused.
                endpoints.retain(|_, (_, at)| at.elapsed() < ENDPOINT_TTL);
                endpoints.insert(node.to_string(), (address.clone(), Instant::now()));
                address
            }
        };
        let conn = self
            .runtimes
            .get_or_try_init(|| async {
                RuntimeConnector::with_credential(self.runtime_credential.clone(), self.runtime_ca.as_deref())
            })
            .await?;
        conn.client_for(node, &address.endpoint, address.certificate).map_err(Error::from)
    }

    /// The runtime that runs a Machine, and the Machine's instance id there.
    pub async fn machine_runtime(&self, m: &Machine) -> Result<(RuntimeClient, InstanceId)> {
        let status = m.status.clone().unwrap_or_default();
        let name = m.metadata.name.clone().unwrap_or_default();
        let node = status.node_name.ok_or_else(|| {
            Error::conflict(
                Reason::NotScheduled,
                format!("Machine {name:?} is not on a node yet; wait for it to be scheduled"),
            )
        })?;
        let id = status.runtime_id.ok_or_else(|| {
            Error::conflict(
                Reason::NotProvisioned,
                format!("Machine {name:?} has no runtime instance yet; wait for it to start"),
            )
        })?;
        let id = InstanceId::new(id).map_err(|e| {
            Error::conflict(Reason::NotProvisioned, format!("Machine {name:?} has no usable runtime instance: {e}"))
        })?;
        let uid = m.metadata.uid.as_deref().ok_or_else(|| {
            Error::conflict(Reason::NotProvisioned, format!("Machine {name:?} has no UID yet; wait for it to start"))
        })?;
        // The id only says where to look: every request names this Machine's UID, and the
        // runtime refuses one on an instance that is not this Machine's, so no status that
        // points elsewhere (even for a moment) reaches another Machine's instance.
        let rt = self.runtime(&node).await?.for_owner(uid);
        Ok((rt, id))
    }

    /// Records an Event about an object, as the controllers do. A failure only logs: an Event is
    /// never worth failing the request for.
    pub async fn record<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, note: String) {
        self.publish(obj, EventType::Normal, reason, note).await
    }

    /// Records a Warning Event about an object (see [`Machines::record`]).
    pub async fn record_warning<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, note: String) {
        self.publish(obj, EventType::Warning, reason, note).await
    }

    async fn publish<K: Resource<DynamicType = ()>>(&self, obj: &K, type_: EventType, reason: &str, note: String) {
        let recorder = Recorder::new(self.kube.clone(), self.reporter.clone());
        let ev = KubeEvent { type_, reason: reason.into(), note: Some(note), action: reason.into(), secondary: None };
        if let Err(e) = recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "recording an event failed");
        }
    }

    /// Notes that this server resumed the instance of Machine `uid` at `generation`.
    pub(crate) fn note_resumed(&self, uid: &str, generation: i64) {
        let mut resumed = self.resumed.lock().unwrap_or_else(|p| p.into_inner());
        if resumed.len() >= STAMPS_PRUNE_AT {
            resumed.retain(|_, (_, at)| at.elapsed() < RESUMED_TTL);
        }
        resumed.insert(uid.to_string(), (generation, Instant::now()));
    }

    /// The resume under way for Machine `uid` at `generation`, if this server started one.
    pub(crate) fn resuming(&self, uid: &str, generation: i64) -> Option<Resuming> {
        let resuming = self.resuming.lock().unwrap_or_else(|p| p.into_inner());
        resuming.get(uid).filter(|(g, _)| *g == generation).map(|(_, r)| r.clone())
    }

    /// True when this server resumed Machine `uid`'s instance at `generation` moments ago: any
    /// later pause is a later generation.
    pub(crate) fn resumed_lately(&self, uid: &str, generation: i64) -> bool {
        let resumed = self.resumed.lock().unwrap_or_else(|p| p.into_inner());
        resumed.get(uid).is_some_and(|(g, at)| *g == generation && at.elapsed() < RESUMED_TTL)
    }

    /// True when this Machine's last-activity stamp is due (and marks it done).
    pub(crate) fn stamp_due(&self, ns: &str, name: &str) -> bool {
        let mut stamps = self.stamps.lock().unwrap_or_else(|p| p.into_inner());
        let key = (ns.to_string(), name.to_string());
        let now = Instant::now();
        match stamps.get(&key) {
            Some(t) if now.duration_since(*t) < self.activity_stamp_interval => false,
            _ => {
                // One entry per Machine ever connected to would grow for as long as the server
                // runs (pool members are new Machines every claim): entries past the interval
                // say no more than a missing one, so they go once the map is large.
                if stamps.len() >= STAMPS_PRUNE_AT {
                    let interval = self.activity_stamp_interval;
                    stamps.retain(|_, t| now.duration_since(*t) < interval);
                }
                stamps.insert(key, now);
                true
            }
        }
    }
}

/// An authorization rule's answer as the service's refusal.
pub(crate) fn allowed(r: std::result::Result<(), String>) -> Result<()> {
    r.map_err(Error::forbidden)
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    /// A client that is never called: stamp bookkeeping does no I/O.
    fn offline_client() -> kube::Client {
        let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("offline"))
        });
        kube::Client::new(svc, "default")
    }

    #[tokio::test]
    async fn stale_stamps_are_dropped_once_the_map_is_large() {
        let mut m = Machines::new(offline_client(), Credential::Token("".into()));
        m.activity_stamp_interval = Duration::from_millis(50);
        for i in 0..STAMPS_PRUNE_AT {
            assert!(m.stamp_due("ns", &format!("m-{i}")));
        }
        assert!(!m.stamp_due("ns", "m-0"), "a fresh stamp is not due again");
        std::thread::sleep(Duration::from_millis(60));
        assert!(m.stamp_due("ns", "new"));
        let stamps = m.stamps.lock().unwrap();
        assert_eq!(stamps.len(), 1, "the stale entries went when the map was full");
        assert!(stamps.contains_key(&("ns".to_string(), "new".to_string())));
    }
}
