//! The one native process of a sandbox: its recipe and the owner's side of its streams.

pub mod io;
pub mod output_pump;
pub mod spec;
pub mod stdin_lane;
