//! Modes the helper widened (`fs::open_as_owner`) are put back even when the helper is told to
//! stop: the host ends an abandoned transfer with SIGTERM first (then SIGKILL if the helper is
//! still running), and this module's handler puts back every mode still widened, then exits.
//! The registry is fixed-size and lock-free, so the handler only reads atomics and calls
//! `chmod` and `_exit`, both async-signal-safe. Sound because the helper is single-threaded: a
//! guard clears its slot before its path string is freed, and the handler runs on that same
//! thread, between two of its steps. A second thread would need the strings kept for the
//! process's life.

use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// Entries widened at once, at most: the tree's depth bound plus a path's components, with room.
const SLOTS: usize = 192;

static PATHS: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
static MODES: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
/// Slots below this may be in use.
static USED: AtomicUsize = AtomicUsize::new(0);

/// The exit status after a stop request, with the modes put back.
const STOPPED: i32 = 3;

extern "C" fn on_stop(_signal: libc::c_int) {
    let used = USED.load(Ordering::SeqCst).min(SLOTS);
    for slot in (0..used).rev() {
        let path = PATHS[slot].load(Ordering::SeqCst);
        if !path.is_null() {
            // SAFETY: a registered path is a NUL-terminated string its guard keeps alive until
            // it unregisters (which clears the slot first); chmod is async-signal-safe.
            unsafe { libc::chmod(path, MODES[slot].load(Ordering::SeqCst) as libc::mode_t) };
        }
    }
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(STOPPED) };
}

/// Installs the SIGTERM handler; the helper calls it once, before widening anything.
pub fn install() {
    // SAFETY: an all-zero sigaction is a valid value of this plain C struct; the handler only
    // uses async-signal-safe calls, and the mask is empty.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Registers `path` (a `/proc/self/fd` link of the widened entry, kept alive by the caller until
/// `unregister`) to be put back to `mode` on a stop request. `None` when every slot is in use:
/// the mode is then put back only by the guard.
pub fn register(path: &CStr, mode: libc::mode_t) -> Option<usize> {
    let slot = USED.load(Ordering::SeqCst);
    if slot >= SLOTS {
        return None;
    }
    MODES[slot].store(mode, Ordering::SeqCst);
    PATHS[slot].store(path.as_ptr().cast_mut(), Ordering::SeqCst);
    USED.store(slot + 1, Ordering::SeqCst);
    Some(slot)
}

/// Forgets `slot` (its mode is back, or is being put back by its guard).
pub fn unregister(slot: usize) {
    if let Some(path) = PATHS.get(slot) {
        path.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
    // The trailing free slots are given back, so a walk's stack of directories reuses them.
    let mut used = USED.load(Ordering::SeqCst);
    while used > 0 && PATHS[used - 1].load(Ordering::SeqCst).is_null() {
        used -= 1;
    }
    USED.store(used, Ordering::SeqCst);
}
