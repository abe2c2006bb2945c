//! The process's one Prometheus recorder: the dashboard's, a proxy's and the console's
//! `/metrics` all render from it (`metrics` macros record into it wherever they run).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's Prometheus recorder, installed on first use.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // A second install (tests running several servers in one process) keeps the first.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}
