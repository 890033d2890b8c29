//! The untrusted tar reader over arbitrary archives arriving in arbitrary pieces: no panic, no
//! hang, no allocation past its bounds (run with -malloc_limit_mb), and it never reports more
//! bytes consumed than arrived.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use native_sandbox::transfer::tar_read::TarReader;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, archive)) = data.split_first() else {
        return;
    };
    let piece = usize::from(shape % 64) * 16 + 1;
    let chunks: Vec<Result<Bytes, String>> = archive
        .chunks(piece)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let total = archive.len() as u64;
    runtime().block_on(async {
        let mut reader = TarReader::new(futures::stream::iter(chunks).boxed());
        for _ in 0..10_000 {
            match reader.next_entry().await {
                Ok(Some(_)) => loop {
                    match reader.read_body(usize::from(shape) * 97 + 1).await {
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => break,
                    }
                },
                Ok(None) | Err(_) => break,
            }
        }
        assert!(reader.consumed <= total, "consumed more than arrived");
    });
});
