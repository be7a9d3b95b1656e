//! The one error type of the REST API: a status, a reason a program can switch on, and a message
//! a person can act on. Every failure below maps into it here, nowhere else.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error body of the REST API.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
pub struct ErrorBody {
    /// Machine-readable, e.g. `NotFound`, `Forbidden`, `WakeTimeout`, `GuestAgentDisabled`.
    pub reason: String,
    /// What went wrong and what to do about it.
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct RestError {
    pub status: StatusCode,
    pub reason: String,
    pub message: String,
}

pub type RestResult<T> = Result<T, RestError>;

impl RestError {
    pub fn new(status: StatusCode, reason: &str, message: impl Into<String>) -> Self {
        RestError { status, reason: reason.into(), message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }
    pub fn conflict(reason: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, reason, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { reason: self.reason, message: self.message })).into_response()
    }
}

impl From<kube::Error> for RestError {
    fn from(e: kube::Error) -> Self {
        match e {
            // The Kubernetes API's own status and message are already meant for a person.
            kube::Error::Api(s) => {
                let status = StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY);
                let reason = if s.reason.is_empty() { "Error".to_string() } else { s.reason.clone() };
                RestError { status, reason, message: s.message.clone() }
            }
            other => RestError::unavailable(format!("the Kubernetes API is unreachable: {other}")),
        }
    }
}

impl From<kairon_runtime_api::ClientError> for RestError {
    fn from(e: kairon_runtime_api::ClientError) -> Self {
        use kairon_runtime_api::ClientError;
        match e {
            // The runtime's refusals are the caller's to act on; its own failures are, to the
            // caller, a gateway's (502), whatever the runtime called them.
            ClientError::Api { status, reason, message } => {
                let status = StatusCode::from_u16(status)
                    .ok()
                    .filter(|s| s.is_client_error())
                    .unwrap_or(StatusCode::BAD_GATEWAY);
                RestError { status, reason, message }
            }
            ClientError::Unreachable { .. } => {
                RestError::new(StatusCode::BAD_GATEWAY, "RuntimeUnreachable", format!("{e}; is the node agent up?"))
            }
            ClientError::Decode(m) => RestError::new(StatusCode::BAD_GATEWAY, "RuntimeError", m),
            ClientError::BadEndpoint(_) => RestError::new(
                StatusCode::BAD_GATEWAY,
                "RuntimeUnreachable",
                format!("{e}: fix the node's registration"),
            ),
        }
    }
}

/// A path parameter that cannot name a runtime object (`..`, `/`, empty) is the caller's error.
impl From<kairon_runtime_api::IdError> for RestError {
    fn from(e: kairon_runtime_api::IdError) -> Self {
        RestError::bad_request(e.to_string())
    }
}

impl From<sqlx::Error> for RestError {
    fn from(e: sqlx::Error) -> Self {
        RestError::unavailable(format!("the usage database failed: {e}"))
    }
}
