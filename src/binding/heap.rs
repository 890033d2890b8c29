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
    // `mallinfo`, not `mallinfo2`: the latter needs glibc 2.33, above the addon's 2.28 floor.
    // Its counters are C ints, enough for a diagnostic of a heap under 2 GiB; read as unsigned.
    // SAFETY: mallinfo takes no arguments and only reads the allocator's own statistics.
    #[allow(deprecated)]
    let info = unsafe { libc::mallinfo() };
    let bytes = |count: libc::c_int| f64::from(count as u32);
    let mapped = bytes(info.hblkhd);
    Some(NativeHeap {
        in_use_bytes: bytes(info.uordblks) + mapped,
        held_bytes: bytes(info.arena) + mapped,
        free_bytes: bytes(info.fordblks),
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
