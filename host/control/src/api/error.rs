//! The one place the control plane's errors become HTTP answers: each [`Error`] variant's
//! status and stable `code` (docs/api.md, "Errors"). The message is the error's own text.

use axum::http::StatusCode;

use crate::Error;
use tessera_http::error::ApiError;

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Invalid(_) | Error::User(_) | Error::PluginRefused(_) => {
                ApiError::bad_request(message)
            }
            Error::NotFound(_) => ApiError::not_found(message),
            // A server that cannot be worked on is a state of the cluster the caller must
            // change first (start it, give it the user), as a non-empty group is.
            Error::Conflict(_)
            | Error::ServerUnreachable { .. }
            | Error::ServerRefused { .. }
            | Error::AdminUser(_) => ApiError::conflict(message),
            Error::StoreUnavailable(_)
            | Error::DocumentUnusable(_)
            | Error::CatalogUnavailable(_)
            | Error::Busy(_) => ApiError::unavailable(message),
            Error::PushIncomplete(_) | Error::ProxyUnreachable { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "push_incomplete", message)
            }
            Error::Internal(_) => ApiError::internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_the_status_and_code_the_api_documents() {
        let cases = [
            (Error::invalid("x"), 400, "bad_request"),
            (Error::not_found("x"), 404, "not_found"),
            (Error::conflict("x"), 409, "conflict"),
            (
                Error::ServerRefused {
                    addr: "h:1".into(),
                    command: "REPLICAOF".into(),
                    reply: "ERR".into(),
                },
                409,
                "conflict",
            ),
            (Error::DocumentUnusable("x".into()), 503, "unavailable"),
            (Error::Busy("x".into()), 503, "unavailable"),
            (
                Error::StoreUnavailable(tessera_store::StoreError::Unavailable("down".into())),
                503,
                "unavailable",
            ),
            (
                Error::ProxyUnreachable {
                    token: "p".into(),
                    failure: crate::dashboard::ProxyFailure::Unreachable("refused".into()),
                },
                502,
                "push_incomplete",
            ),
            (Error::Internal("x".into()), 500, "internal"),
        ];
        for (e, status, code) in cases {
            let text = e.to_string();
            let a = ApiError::from(e);
            assert_eq!((a.status.as_u16(), a.code), (status, code), "{text}");
            assert_eq!(a.message, text);
        }
    }
}
