//! The fixed bounds and defaults of the contract (`SANDBOX_LIMITS`, the default buffers).

/// Startup observation bound (`deadlines.startupMs`).
pub const STARTUP_MS_MAX: u64 = 60_000;
/// Cleanup observation bound (`deadlines.cleanupMs`).
pub const CLEANUP_MS_MAX: u64 = 30_000;

/// Relative and guest paths: total bytes, components, bytes per component.
pub const PATH_BYTES_MAX: usize = 1_024;
pub const PATH_COMPONENTS_MAX: usize = 64;
pub const PATH_COMPONENT_BYTES_MAX: usize = 255;

/// Process recipes.
pub const PROCESS_ARGS_MAX: usize = 128;
pub const PROCESS_ENV_ENTRIES_MAX: usize = 128;
pub const PROCESS_ENV_VALUE_BYTES_MAX: usize = 16 * 1_024;
pub const PROCESS_RECIPE_BYTES_MAX: usize = 256 * 1_024;

/// Recovery records.
pub const RECOVERY_RECORD_BYTES_MAX: usize = 64 * 1_024;
pub const RECOVERY_RESOURCES_MAX: usize = 4;
/// Identifier-like fields of a record (backend id and revision, resource names and ids).
pub const IDENTITY_BYTES_MAX: usize = 256;
/// A verified backend identity may carry more (an engine ID plus its address, say).
pub const BACKEND_IDENTITY_BYTES_MAX: usize = 1_024;
/// Sandbox, process and operation identifiers, and namespaces.
pub const ID_BYTES_MAX: usize = 128;

/// Transfer buffer bounds (`policy.transfers`).
pub const CHUNK_BYTES_MAX: u64 = 16 * 1_024 * 1_024;
pub const METADATA_BATCH_BYTES_MIN: u64 = 4 * 1_024;
pub const METADATA_BATCH_BYTES_MAX: u64 = 256 * 1_024 * 1_024;
pub const MERGE_FAN_IN_MIN: u64 = 2;
pub const MERGE_FAN_IN_MAX: u64 = 1_024;

/// Stream staging bounds (`policy.streams`): staging is working memory, so it has a ceiling.
pub const STREAM_BUFFER_BYTES_MAX: u64 = 1_024 * 1_024 * 1_024;

/// `SANDBOX_DEFAULT_TRANSFER_BUFFERS`.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 * 1_024;
pub const DEFAULT_METADATA_BATCH_BYTES: u64 = 64 * 1_024;
pub const DEFAULT_MERGE_FAN_IN: u64 = 8;

/// `SANDBOX_DEFAULT_STREAM_LIMITS`.
pub const DEFAULT_MAX_BUFFERED_INPUT_BYTES: u64 = 1_024 * 1_024;
pub const DEFAULT_MAX_BUFFERED_OUTPUT_BYTES: u64 = 1_024 * 1_024;
pub const DEFAULT_HIGH_WATER_MARK: u64 = 64 * 1_024;

/// What one call's input capture reads at most (`SANDBOX_LIMITS.capture*`): values in total,
/// objects and arrays, UTF-8 bytes of strings and keys in total, and bytes of one string.
/// The totals admit the largest exact-file export selection.
pub const CAPTURE_VALUES_MAX: usize = 1_048_576;
pub const CAPTURE_OBJECTS_MAX: usize = 4_096;
pub const CAPTURE_STRING_BYTES_MAX: usize = 384 * 1_024 * 1_024;
pub const CAPTURE_STRING_BYTES_ONE_MAX: usize = 1_024 * 1_024;

/// Paths in one `{ kind: 'files', paths }` export selection (`SANDBOX_LIMITS.exportFilePaths`).
pub const EXPORT_FILE_PATHS_MAX: usize = 262_144;

/// The recovery record format this version reads and writes.
pub const RECOVERY_FORMAT: &str = "agenai.sandbox-recovery.v2";
