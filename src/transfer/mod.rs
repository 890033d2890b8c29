//! Transfers of workspace trees: per-call options, the bounded-memory metadata ledger, and
//! streaming tar writing and reading.

pub mod batch;
pub mod export;
pub mod export_batch;
pub mod host_tree;
pub mod host_walk;
pub mod import;
pub mod ledger;
pub mod options;
pub mod progress;
pub mod selection;
pub mod staging_tree;
pub mod summary;
pub mod tar_read;
pub mod tar_write;
pub mod workspace_archive;
