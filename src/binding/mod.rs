//! The only napi code: converts between JS values and the core, nothing else.

mod command;
mod constants;
mod docker;
mod errors;
mod export_batch;
mod files;
mod heap;
mod host_walk;
mod js_driver;
mod js_value;
#[cfg(target_os = "linux")]
mod kubernetes;
mod owner;
mod parsers;
mod pool_member;
mod process_feed;
mod process_streams;
mod reaper;
mod reconcile_desk;
mod runtime;
mod staging_writer;
mod transfers;
mod workspace_archive;
