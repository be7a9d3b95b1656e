//! `metav1.Status` errors: every failure on the Kubernetes-compatible paths answers with one,
//! with a reason a program can switch on and a message a person can act on.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use kairon_db::StoreError;
use kairon_model::validate::FieldError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn not_found(kind: &Qualified, name: &str) -> Self {
        let mut e =
            Self::new(StatusCode::NOT_FOUND, "NotFound", format!("{} \"{name}\" not found", kind.resource_group()));
        e.details = Some(kind.details(name));
        e
    }

    pub fn no_route(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", what)
    }

    pub fn already_exists(kind: &Qualified, name: &str) -> Self {
        let mut e = Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", kind.resource_group()),
        );
        e.details = Some(kind.details(name));
        e
    }

    pub fn conflict(kind: &Qualified, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", kind.resource_group()),
        );
        e.details = Some(kind.details(name));
        e
    }

    pub fn stale(kind: &Qualified, name: &str) -> Self {
        Self::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(kind: &Qualified, name: &str, errors: &[FieldError]) -> Self {
        let list = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
        let message = if list.len() == 1 {
            format!("{} \"{name}\" is invalid: {}", kind.kind_group(), list[0])
        } else {
            format!("{} \"{name}\" is invalid: [{}]", kind.kind_group(), list.join(", "))
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| {
                // As Kubernetes does, a cause's message leaves out the field it names: kubectl
                // prints `field: message` for each cause.
                let full = e.to_string();
                let message = full.strip_prefix(&format!("{}: ", e.field)).unwrap_or(&full).to_string();
                json!({"reason": e.kind.cause_reason(), "message": message, "field": e.field})
            })
            .collect();
        let mut details = kind.details(name);
        details["kind"] = json!(kind.kind);
        details["causes"] = json!(causes);
        ApiError { code: StatusCode::UNPROCESSABLE_ENTITY, reason: "Invalid", message, details: Some(details) }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    pub fn unsupported_media(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// The `metav1.Status` body.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }

    /// Maps a store error for an object of `kind` named `name`.
    pub fn from_store(e: StoreError, kind: &Qualified, name: &str) -> Self {
        match e {
            StoreError::NotFound => Self::not_found(kind, name),
            StoreError::AlreadyExists => Self::already_exists(kind, name),
            StoreError::Conflict { .. } => Self::stale(kind, name),
            StoreError::Gone { compacted } => {
                Self::gone(format!("too old resource version: the oldest still available is {}", compacted + 1))
            }
            StoreError::Invalid(why) => Self::bad_request(why),
            StoreError::Refused(why) => Self::forbidden(why),
            other => {
                tracing::error!(error = %other, "store failure");
                Self::internal(format!("storage error: {other}"))
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.code, axum::Json(self.status())).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(why) => Self::bad_request(why),
            StoreError::Refused(why) => Self::forbidden(why),
            StoreError::Gone { compacted } => {
                Self::gone(format!("too old resource version: the oldest still available is {}", compacted + 1))
            }
            other => {
                tracing::error!(error = %other, "store failure");
                Self::internal(format!("storage error: {other}"))
            }
        }
    }
}

/// A resource named for messages: `machines.kairon.zyvor.dev` / `Machine.kairon.zyvor.dev`.
#[derive(Debug, Clone)]
pub struct Qualified {
    pub group: String,
    pub plural: String,
    pub kind: String,
}

impl Qualified {
    pub fn resource_group(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }
    pub fn kind_group(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }
    fn details(&self, name: &str) -> Value {
        json!({"name": name, "group": self.group, "kind": self.plural})
    }
}
