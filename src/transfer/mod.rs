//! Transfers of workspace trees: per-call options (the streaming machinery arrives later).

pub mod options;
