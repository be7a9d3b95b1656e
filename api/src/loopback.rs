//! A Kubernetes client of this very server that hands its requests straight to the router,
//! in-process: in the embedded mode the REST layer reaches the store through the same handlers
//! (authentication, the write guard, admission) as any client, without TLS, TCP and HTTP
//! parsing on loopback for every read and write it makes.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use tower::{Service, ServiceExt};

/// Where the router goes once it is built: it holds the state that holds the client, so the
/// client comes first and is pointed at the router after.
#[derive(Clone, Default)]
pub struct RouterSlot(Arc<OnceLock<Router>>);

impl RouterSlot {
    pub fn serve(&self, router: Router) {
        let _ = self.0.set(router);
    }
}

/// Marks a request the in-process client made (a request extension, which no remote client can
/// set): such requests serve a remote caller who already holds a connection slot of their own,
/// so they take no per-subject slot of the server's token.
#[derive(Clone, Copy, Debug)]
pub struct InProcessRequest;

/// A client acting with `token`, served by whatever router `slot` is given. Its requests are
/// served on the runtime it is made on (the server's), whichever runtime sends them: a process's
/// background work runs at a lower priority (`kairon::workers`), and a request it makes must
/// not hold the store's write lock at that priority while the server's own requests wait.
pub fn client(slot: &RouterSlot, token: &str) -> Result<kube::Client, header::InvalidHeaderValue> {
    let mut auth = HeaderValue::from_str(&format!("Bearer {token}"))?;
    auth.set_sensitive(true);
    let server = tokio::runtime::Handle::try_current().ok();
    Ok(kube::Client::new(InProcess { router: slot.0.clone(), auth, server }, "default"))
}

#[derive(Clone)]
struct InProcess {
    router: Arc<OnceLock<Router>>,
    auth: HeaderValue,
    server: Option<tokio::runtime::Handle>,
}

impl Service<Request<kube::client::Body>> for InProcess {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let mut req = req.map(Body::new);
        req.headers_mut().insert(header::AUTHORIZATION, self.auth.clone());
        req.extensions_mut().insert(InProcessRequest);
        let router = self.router.get().cloned();
        let server = self.server.clone();
        Box::pin(async move {
            match (router, server) {
                (Some(router), Some(server)) => match server.spawn(router.oneshot(req)).await {
                    Ok(served) => served,
                    Err(e) => {
                        let mut failed = Response::new(Body::from(format!("serving the request failed: {e}")));
                        *failed.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                        Ok(failed)
                    }
                },
                (Some(router), None) => router.oneshot(req).await,
                (None, _) => {
                    let status = serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503,
                        "reason": "ServiceUnavailable", "message": "the server is still starting; try again",
                    });
                    let mut unavailable = Response::new(Body::from(status.to_string()));
                    *unavailable.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    unavailable
                        .headers_mut()
                        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    Ok(unavailable)
                }
            }
        })
    }
}
