//! The one error of the Machines service: a [`Reason`] a program can switch on and a message a
//! person can act on. Every failure below (the Kubernetes API, a node's runtime, the usage
//! database) is turned into one here, and [`Reason::status`] is the one place a reason meets
//! HTTP.

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Why a request was refused or failed. Published as an enum in the OpenAPI document, so the
/// generated clients and the SDKs' typed errors switch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Reason {
    // What the request says.
    /// The request is malformed: a bad name, path, query or JSON.
    BadRequest,
    /// No bearer token, or one that is not valid.
    Unauthorized,
    /// The caller may not do this here (role, namespace, or a guarded field).
    Forbidden,
    /// The namespace's KaironQuota does not allow this much: the message names the limit and
    /// the use.
    QuotaExceeded,
    /// No such object, node, file or process.
    NotFound,
    /// The route does not take this method.
    MethodNotAllowed,
    /// The body is larger than this route takes.
    PayloadTooLarge,
    /// The body is larger than the Kubernetes API takes (a patched object).
    RequestEntityTooLarge,
    /// The body is not JSON (or a type read as JSON).
    UnsupportedMediaType,
    /// A field is invalid, or the body does not fit the route.
    Invalid,
    /// The server is refusing load.
    TooManyRequests,
    /// This token already holds the most long-lived connections it may.
    TooManyConnections,

    // The object's state.
    /// Changed meanwhile: read it again and retry.
    Conflict,
    /// An object of that name exists.
    AlreadyExists,
    /// The resourceVersion asked for is too old.
    Gone,
    /// A power request older than one the runtime already applied.
    Stale,
    /// The object is being deleted.
    Terminating,
    /// The Machine is not on a node yet.
    NotScheduled,
    /// The Machine has no runtime instance of its own yet.
    NotProvisioned,
    /// The power transition is not possible from the current state.
    InvalidTransition,
    /// The power state needs a VM.
    PowerStateUnsupported,
    /// The Machine is suspended and is not woken on connect.
    MachineSuspended,
    /// The Machine has no guest agent.
    GuestAgentDisabled,
    /// Filesystem freeze needs a VM.
    FreezeUnsupported,
    /// A streamed exec needs a sandbox.
    ExecStreamUnsupported,
    /// VNC needs a VM.
    VncUnsupported,
    /// No other node to migrate to.
    NoTargetNode,
    /// Live migration is not available.
    MigrationUnsupported,
    /// The Machine is moving to another node already.
    MigrationInProgress,
    /// The Machine has no deadline to extend (or, a warm pool member, none yet).
    NoDeadline,
    /// The process's stdin is not open: start it with `keepStdinOpen`; it may have been closed
    /// or have exited, or the node's runtime restarted since.
    StdinClosed,

    // Waiting.
    /// A wait did not see what it waited for in time.
    Timeout,
    /// A wake-on-connect did not finish within `wakeTimeoutSeconds`.
    WakeTimeout,

    // What is below the API.
    /// The node's runtime does not support this.
    NotSupported,
    /// This server serves no preview links (its api has no `--preview-domain`).
    PreviewsUnavailable,
    /// The node's runtime failed.
    RuntimeError,
    /// The node's runtime could not be reached.
    RuntimeUnreachable,
    /// A migration failed part-way (a node's runtime failed or went away): the Machine stays
    /// on its node, running as before.
    MigrationFailed,
    /// The guest did not answer on that port.
    GuestUnreachable,
    /// The guest closed the connection.
    GuestClosed,
    /// The Kubernetes API or the usage database is unreachable, or the server is not ready.
    ServiceUnavailable,
    /// A failure of the server itself.
    InternalError,
}

impl Reason {
    /// The HTTP status of an answer with this reason.
    pub fn status(self) -> StatusCode {
        use Reason::*;
        match self {
            BadRequest => StatusCode::BAD_REQUEST,
            Unauthorized => StatusCode::UNAUTHORIZED,
            Forbidden | QuotaExceeded => StatusCode::FORBIDDEN,
            NotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            PayloadTooLarge | RequestEntityTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            TooManyRequests | TooManyConnections => StatusCode::TOO_MANY_REQUESTS,
            Conflict
            | AlreadyExists
            | Stale
            | Terminating
            | NotScheduled
            | NotProvisioned
            | InvalidTransition
            | PowerStateUnsupported
            | MachineSuspended
            | GuestAgentDisabled
            | FreezeUnsupported
            | ExecStreamUnsupported
            | VncUnsupported
            | NoTargetNode
            | MigrationUnsupported
            | MigrationInProgress
            | NoDeadline
            | StdinClosed => StatusCode::CONFLICT,
            Gone => StatusCode::GONE,
            Timeout | WakeTimeout => StatusCode::GATEWAY_TIMEOUT,
            NotSupported | RuntimeError | RuntimeUnreachable | MigrationFailed | GuestUnreachable | GuestClosed => {
                StatusCode::BAD_GATEWAY
            }
            PreviewsUnavailable => StatusCode::NOT_IMPLEMENTED,
            ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            InternalError => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The reason for an answer of this status when nothing more specific is known (what the
    /// router and axum's extractors answer, an upstream reason this API does not know).
    pub fn for_status(status: StatusCode) -> Reason {
        match status {
            StatusCode::BAD_REQUEST => Reason::BadRequest,
            StatusCode::UNAUTHORIZED => Reason::Unauthorized,
            StatusCode::FORBIDDEN => Reason::Forbidden,
            StatusCode::NOT_FOUND => Reason::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Reason::MethodNotAllowed,
            StatusCode::CONFLICT => Reason::Conflict,
            StatusCode::GONE => Reason::Gone,
            StatusCode::PAYLOAD_TOO_LARGE => Reason::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Reason::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => Reason::Invalid,
            StatusCode::TOO_MANY_REQUESTS => Reason::TooManyRequests,
            StatusCode::SERVICE_UNAVAILABLE => Reason::ServiceUnavailable,
            StatusCode::GATEWAY_TIMEOUT => Reason::Timeout,
            StatusCode::BAD_GATEWAY => Reason::RuntimeError,
            s if s.is_server_error() => Reason::InternalError,
            _ => Reason::BadRequest,
        }
    }

    /// The reason an upstream answer (the Kubernetes API, a runtime) named, when it has the
    /// status this API gives that reason; else the reason for its status.
    fn of_upstream(name: &str, status: StatusCode) -> Reason {
        serde_json::from_value::<Reason>(serde_json::Value::String(name.to_string()))
            .ok()
            .filter(|r| r.status() == status)
            .unwrap_or_else(|| Reason::for_status(status))
    }
}

/// A refusal or failure of the Machines service.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason:?}: {message}")]
pub struct Error {
    pub reason: Reason,
    /// What went wrong and what to do about it.
    pub message: String,
}

/// The service's result; `E` stays open for helpers that fail with something else.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Error { reason, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(Reason::Forbidden, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Reason::NotFound, message)
    }
    pub fn conflict(reason: Reason, message: impl Into<String>) -> Self {
        Self::new(reason, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Reason::ServiceUnavailable, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Reason::InternalError, message)
    }
    pub fn status(&self) -> StatusCode {
        self.reason.status()
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        match e {
            // The Kubernetes API's own reason and message are already meant for a person.
            kube::Error::Api(s) => {
                let status = StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY);
                // A quota's refusal is a 403 (Forbidden, as Kubernetes' ResourceQuota says) that
                // is not about the caller's rights: its own reason, for the clients to tell.
                if status == StatusCode::FORBIDDEN && kairon_model::quota::is_refusal(&s.message) {
                    return Error::new(Reason::QuotaExceeded, s.message.clone());
                }
                Error::new(Reason::of_upstream(&s.reason, status), s.message.clone())
            }
            other => Error::unavailable(format!("the Kubernetes API is unreachable: {other}")),
        }
    }
}

impl From<kairon_runtime_api::ClientError> for Error {
    fn from(e: kairon_runtime_api::ClientError) -> Self {
        use kairon_runtime_api::ClientError;
        match e {
            // The runtime's refusals are the caller's to act on; its own failures are, to the
            // caller, a gateway's (502), whatever the runtime called them.
            ClientError::Api { status, reason, message } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                let reason = if status.is_client_error() {
                    Reason::of_upstream(&reason, status)
                } else {
                    Reason::of_upstream(&reason, StatusCode::BAD_GATEWAY)
                };
                Error::new(reason, message)
            }
            ClientError::Unreachable { .. } => {
                Error::new(Reason::RuntimeUnreachable, format!("{e}; is the node agent up?"))
            }
            ClientError::Decode(m) => Error::new(Reason::RuntimeError, m),
            ClientError::BadEndpoint(_) => {
                Error::new(Reason::RuntimeUnreachable, format!("{e}: fix the node's registration"))
            }
        }
    }
}

/// A path parameter that cannot name a runtime object (`..`, `/`, empty) is the caller's error.
impl From<kairon_runtime_api::IdError> for Error {
    fn from(e: kairon_runtime_api::IdError) -> Self {
        Error::bad_request(e.to_string())
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::unavailable(format!("the usage database failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_reasons_keep_their_name_only_with_their_status() {
        assert_eq!(Reason::of_upstream("AlreadyExists", StatusCode::CONFLICT), Reason::AlreadyExists);
        assert_eq!(Reason::of_upstream("Invalid", StatusCode::UNPROCESSABLE_ENTITY), Reason::Invalid);
        // A name this API gives another status, or does not know, falls back to the status.
        assert_eq!(Reason::of_upstream("NotFound", StatusCode::CONFLICT), Reason::Conflict);
        assert_eq!(Reason::of_upstream("Expired", StatusCode::GONE), Reason::Gone);
        assert_eq!(Reason::of_upstream("", StatusCode::NOT_FOUND), Reason::NotFound);
    }

    #[test]
    fn runtime_failures_are_a_gateways() {
        let e = |status, reason: &str| {
            Error::from(kairon_runtime_api::ClientError::Api { status, reason: reason.into(), message: "m".into() })
        };
        assert_eq!(e(404, "NotFound").reason, Reason::NotFound);
        assert_eq!(e(409, "Stale").reason, Reason::Stale);
        assert_eq!(e(502, "GuestUnreachable").reason, Reason::GuestUnreachable);
        assert_eq!(e(501, "NotSupported").reason, Reason::NotSupported);
        assert_eq!(e(500, "InternalError").reason, Reason::RuntimeError);
        assert_eq!(e(500, "InternalError").status(), StatusCode::BAD_GATEWAY);
    }

    #[test]
    fn every_reason_reads_back_from_its_name() {
        for status in 400..600u16 {
            let Ok(status) = StatusCode::from_u16(status) else { continue };
            let r = Reason::for_status(status);
            let name = serde_json::to_value(r).unwrap();
            assert_eq!(serde_json::from_value::<Reason>(name).unwrap(), r);
        }
    }
}
