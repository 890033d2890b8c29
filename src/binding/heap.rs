//! The C heap of this process as glibc's allocator sees it: a diagnostic the soak benchmark reads
//! to tell a leak (bytes in use growing) from fragmentation (bytes held growing while those in use
//! stay flat). Elsewhere (musl, macOS) it reports nothing.

use napi_derive::napi;

/// Bytes of the C heap, all arenas together.
#[napi(object)]
pub struct NativeHeap {
    /// Allocated and not freed (small blocks in arenas plus large mapped blocks).
    pub in_use_bytes: f64,
    /// Held from the system by the arenas (in use or free) plus the mapped blocks.
    pub held_bytes: f64,
    /// Free but kept by the arenas (fragmentation, or memory kept for reuse).
    pub free_bytes: f64,
}

/// The heap now, or `null` where the allocator does not report it.
#[napi(js_name = "nativeHeap")]
pub fn native_heap() -> Option<NativeHeap> {
    heap()
}

/// Returns the arenas' free memory at their tops to the system (`malloc_trim(0)`); `false`
/// where there is no such call or nothing was returned.
#[napi(js_name = "trimNativeHeap")]
pub fn trim_native_heap() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> Option<NativeHeap> {
    // SAFETY: mallinfo2 takes no arguments and only reads the allocator's own statistics.
    let info = unsafe { libc::mallinfo2() };
    let arena = info.arena as f64;
    let mapped = info.hblkhd as f64;
    let in_use = info.uordblks as f64 + mapped;
    Some(NativeHeap {
        in_use_bytes: in_use,
        held_bytes: arena + mapped,
        free_bytes: info.fordblks as f64,
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap() -> Option<NativeHeap> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only releases free memory the allocator holds; it touches no live block.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}
