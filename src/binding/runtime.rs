//! The async runtime the addon's work runs on. Its work relays bytes between JavaScript, the
//! engine and the host's files; the copying of the same bytes is done by the engine's own
//! processes (the engine, its shim, the guest) on the same cores. So the runtime takes at most
//! half the cores (at least one worker): on a 2-core machine one worker spent less CPU per GiB
//! of stdout than two in every round measured, and moved large files faster (no byte handed
//! from one worker to another). `TOKIO_WORKER_THREADS`, when set to a positive integer, decides
//! instead; any other value is ignored (tokio itself would panic on it while the addon loads,
//! aborting the host process).

use napi::bindgen_prelude::create_custom_tokio_runtime;

/// Workers for `cores` cores.
fn workers(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// Workers for `cores` cores unless `requested` (the value of `TOKIO_WORKER_THREADS`) is a
/// positive integer.
fn worker_count(requested: Option<&std::ffi::OsStr>, cores: usize) -> usize {
    requested
        .and_then(|value| value.to_str())
        .and_then(|value| value.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| workers(cores))
}

#[napi_derive::module_init]
fn init() {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Always set: a builder left to read the variable itself panics on a value it cannot use.
    builder.worker_threads(worker_count(
        std::env::var_os("TOKIO_WORKER_THREADS").as_deref(),
        cores,
    ));
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

    #[test]
    fn a_positive_worker_count_in_the_environment_decides_anything_else_is_ignored() {
        let requested = |value: &str| worker_count(Some(std::ffi::OsStr::new(value)), 4);
        assert_eq!(requested("3"), 3);
        assert_eq!(requested(" 5 "), 5);
        for ignored in ["0", "-1", "abc", "", "2.5", "99999999999999999999999"] {
            assert_eq!(requested(ignored), 2, "{ignored:?}");
        }
        assert_eq!(worker_count(None, 4), 2);
        assert_eq!(worker_count(None, 1), 1);
    }
}
