//! The untrusted tar reader over arbitrary archives arriving in arbitrary pieces: no panic, no
//! hang, no allocation past its bounds (run with -malloc_limit_mb), and it never reports more
//! bytes consumed than arrived. Then the shared framing under it (`tar-framing`, which every
//! reader of an archive runs, the helper's included), fed directly with options the first byte
//! picks: it always makes progress, never takes more than it was given, and gives the same
//! events whether the bytes arrive whole or in pieces.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use native_sandbox::transfer::tar_read::TarReader;
use tar_framing::{Error, Event, Framer, Options, Trailer};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

/// The options `shape` picks, one bit each.
fn options(shape: u8) -> Options {
    Options {
        checksums: shape & 1 != 0,
        pax: shape & 2 != 0,
        pax_global: shape & 4 != 0,
        gnu_long_names: shape & 8 != 0,
        gnu_long_links: shape & 16 != 0,
        markers: shape & 32 != 0,
        extended_max: if shape & 64 != 0 { 4_096 } else { 64 * 1_024 },
        trailer: if shape & 128 != 0 {
            Trailer::Zeros { max: 1 << 20 }
        } else {
            Trailer::Any
        },
    }
}

/// What one stretch of bytes was: the same whatever the pieces they arrived in.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Event(Event, usize),
    Failed(Error),
}

/// Whether two events are pieces of one stretch (body, padding, extension body, trailer).
fn same_stretch(a: &Event, b: &Event) -> bool {
    matches!(
        (a, b),
        (Event::Body { .. }, Event::Body { .. })
            | (Event::Padding { .. }, Event::Padding { .. })
            | (Event::ExtensionBody { .. }, Event::ExtensionBody { .. })
            | (Event::Trailer, Event::Trailer)
    )
}

/// The events of `pieces` fed in turn: a header's with its whole block, a stretch's joined.
fn events(options: Options, pieces: &[&[u8]]) -> Vec<Seen> {
    let mut framer = Framer::new(options);
    let mut seen = Vec::new();
    let mut partial = 0;
    for piece in pieces {
        let mut rest = *piece;
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            assert!(fed.consumed <= rest.len(), "took more than it was given");
            rest = &rest[fed.consumed..];
            let event = match fed.event {
                Ok(Event::Partial) => {
                    assert!(fed.consumed > 0, "no progress");
                    partial += fed.consumed;
                    continue;
                }
                Ok(event) => event,
                Err(error) => {
                    // What the failing stretch took before the failure depends on the pieces.
                    if let Some(Seen::Event(Event::ExtensionBody { .. } | Event::Trailer, _)) =
                        seen.last()
                    {
                        seen.pop();
                    }
                    seen.push(Seen::Failed(error));
                    assert_eq!(framer.finish(), Err(error), "a failure stays");
                    return seen;
                }
            };
            let bytes = std::mem::take(&mut partial) + fed.consumed;
            assert!(bytes > 0, "no progress");
            match seen.last_mut() {
                Some(Seen::Event(last, joined)) if same_stretch(last, &event) => {
                    *last = event;
                    *joined += bytes;
                }
                _ => seen.push(Seen::Event(event, bytes)),
            }
        }
    }
    seen
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
    let options = options(shape);
    let whole = events(options, &[archive]);
    let pieces: Vec<&[u8]> = archive.chunks(piece).collect();
    assert_eq!(
        events(options, &pieces),
        whole,
        "the events depend on how the bytes arrive"
    );
});
