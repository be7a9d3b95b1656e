//! How the Machines service's [`Error`] answers over HTTP: its reason's status and the JSON
//! error body. The one place a refusal meets HTTP.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::machines::{Error, Reason};

/// Every error body of the REST API.
#[derive(Serialize, Deserialize, Debug, Clone, ToSchema)]
pub struct ErrorBody {
    /// Machine-readable: what a program switches on.
    pub reason: Reason,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        (self.status(), Json(ErrorBody { reason: self.reason, message: self.message })).into_response()
    }
}
