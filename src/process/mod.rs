//! The one native process of a sandbox: its recipe and the owner's side of its streams.

pub mod io;
pub mod output_pump;
pub mod spec;
pub mod staged;
pub mod stdin_lane;

/// Semaphore permits for `n` bytes of staging (a staging larger than the semaphore's maximum is
/// clamped where the semaphore is made).
fn permits(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
