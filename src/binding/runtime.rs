//! The async runtime the addon's work runs on. Its work relays bytes between JavaScript, the
//! engine and the host's files; the copying of the same bytes is done by the engine's own
//! processes (the engine, its shim, the guest) on the same cores. So the runtime takes at most
//! half the cores (at least one worker): on a 2-core machine one worker spent less CPU per GiB
//! of stdout than two in every round measured, and moved large files faster (no byte handed
//! from one worker to another). `TOKIO_WORKER_THREADS`, when set, decides instead.

use napi::bindgen_prelude::create_custom_tokio_runtime;

/// Workers for `cores` cores.
fn workers(cores: usize) -> usize {
    (cores / 2).max(1)
}

#[napi_derive::module_init]
fn init() {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        builder.worker_threads(workers(cores));
    }
    // A runtime that cannot be built leaves napi's own (built on first use) in its place.
    if let Ok(runtime) = builder.build() {
        create_custom_tokio_runtime(runtime);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_cores_and_at_least_one_worker() {
        assert_eq!(workers(1), 1);
        assert_eq!(workers(2), 1);
        assert_eq!(workers(3), 1);
        assert_eq!(workers(16), 8);
    }
}
