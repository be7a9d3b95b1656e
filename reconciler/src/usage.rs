//! Not yet in this build.

pub async fn run(_client: kube::Client, _cfg: crate::ControllerConfig) {
    std::future::pending::<()>().await
}
