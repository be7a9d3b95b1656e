//! Lingering reads of unread request bodies.
//!
//! A request can be answered before its body is read: a refused token, an unknown route, a
//! forbidden caller. Over HTTP/2, dropping that body unread resets its stream. The reset is
//! legal (RST_STREAM NO_ERROR after a complete response), but curl 7.88 (Debian 12's) reports
//! it as `(92) Stream error in the HTTP/2 framing layer` and drops the answer: 4 in 10 of its
//! unauthenticated POSTs to /mcp never saw their 401. So a body dropped unread is read to its end
//! in the background first, up to a small bound. That is what nginx calls a lingering close.
//! A large body is still cut off: a client sending one to be refused hears the reset.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt as _;

/// The most a dropped body is read for: a refused JSON request fits many times over.
const LINGER_BYTES: usize = 64 * 1024;
/// How long a dropped body is waited for.
const LINGER_TIME: Duration = Duration::from_secs(5);

/// Wraps every request body so that one dropped unread is read to its end first.
pub async fn linger(req: Request, next: Next) -> Response {
    next.run(req.map(|b| Body::new(Lingering(Some(b))))).await
}

struct Lingering(Option<Body>);

impl http_body::Body for Lingering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.0.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.0.as_ref().map(Body::size_hint).unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(body) = self.0.take().filter(|b| !b.is_end_stream()) else { return };
        if body.size_hint().lower() > LINGER_BYTES as u64 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let _ = tokio::time::timeout(LINGER_TIME, read_to_end(body)).await;
        });
    }
}

/// Reads `body` to its end, or until it has sent more than [`LINGER_BYTES`].
async fn read_to_end(mut body: Body) {
    let mut read = 0;
    while let Some(Ok(frame)) = body.frame().await {
        read += frame.data_ref().map_or(0, Bytes::len);
        if read > LINGER_BYTES {
            return;
        }
    }
}
