//! The Docker driver: one hardened container per sandbox process through bollard.

pub mod address;
pub mod attach;
pub mod backend;
pub mod context;
pub mod demux;
pub mod dialer;
pub mod engine;
pub mod engine_time;
pub mod exit_status;
pub mod frames;
pub mod freezer;
pub mod gvisor;
pub mod hardening;
pub mod image;
pub mod keepalive;
pub mod later_socket;
pub mod layout;
pub mod objects;
pub mod oom_events;
pub mod options;
pub mod output_end;
pub mod prepare_image;
pub mod reaper;
pub mod reservation;
pub mod seed;
pub mod tls;
