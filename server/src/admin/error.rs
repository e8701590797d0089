//! JSON errors of the admin API: `{"error": "..."}` with the matching HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer. Build it with one of the constructors and return it from a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    /// 404: the route, session or other named thing does not exist.
    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 400: a malformed body, parameter or path segment.
    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 400: a `what` named `name` that the route does not know; `expected` lists the ones it
    /// does.
    pub(crate) fn unknown(what: &str, name: &str, expected: &str) -> ApiError {
        ApiError::bad_request(format!("unknown {what} {name:?}; expected {expected}"))
    }

    /// 409: the request is well formed but the server's state forbids it.
    #[allow(dead_code)]
    pub(crate) fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// The result type of admin handlers.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

impl From<crate::engine::CoreFailed> for ApiError {
    fn from(_: crate::engine::CoreFailed) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::control::ControlError::Failed.to_string(),
        )
    }
}
