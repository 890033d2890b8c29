//! The supervisor's connection as the host reads it: its stdout carries frames; its stderr only
//! its last words (why it could not start, or went), kept bounded, so a connection that ends
//! after any fails with them and the calls it fails say why. Any driver's attach stream (the
//! engine's multiplexed attach, a cluster's attach channels) comes in as `Chunks`.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::last_words::LastWords;
use crate::lifecycle::driver::OutputStream;
use crate::lifecycle::error::OwnerError;

/// Both streams of one connection, in the order they came.
pub type Chunks = BoxStream<'static, Result<(OutputStream, Bytes), OwnerError>>;

/// The supervisor's frames: its stdout. Its stderr carries only its last words (why it could not
/// start, or went), kept bounded: a connection that ends after any fails with them, so the calls
/// it fails say why.
pub fn frames_of(output: Chunks) -> BoxStream<'static, Result<Bytes, OwnerError>> {
    let words = Arc::new(LastWords::default());
    let keeper = Arc::clone(&words);
    let frames = output.filter_map(move |chunk| {
        futures::future::ready(match chunk {
            Ok((OutputStream::Stdout, bytes)) => Some(Ok(bytes)),
            Ok((OutputStream::Stderr, bytes)) => {
                keeper.keep(&bytes);
                None
            }
            Err(error) => Some(Err(error)),
        })
    });
    let said = futures::stream::once(async move {
        let last = words.last();
        (!last.is_empty()).then(|| {
            Err(OwnerError::driver(format!(
                "it ended; its last stderr: {last}"
            )))
        })
    })
    .filter_map(futures::future::ready);
    frames.chain(said).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(items: Vec<Result<(OutputStream, &'static [u8]), OwnerError>>) -> Chunks {
        futures::stream::iter(
            items
                .into_iter()
                .map(|item| item.map(|(stream, bytes)| (stream, Bytes::from_static(bytes)))),
        )
        .boxed()
    }

    #[tokio::test]
    async fn a_connection_that_ends_after_stderr_fails_with_the_supervisors_last_words() {
        let frames: Vec<_> = frames_of(chunks(vec![
            Ok((OutputStream::Stdout, b"frame")),
            Ok((
                OutputStream::Stderr,
                b"native-sandbox supervisor: setgroups: ",
            )),
            Ok((OutputStream::Stderr, b"Operation not permitted\n")),
        ]))
        .collect()
        .await;
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].as_ref().ok(), Some(&Bytes::from_static(b"frame")));
        let why = frames[1].as_ref().err().map(ToString::to_string);
        assert!(
            why.as_deref().is_some_and(|why| why.ends_with(
                "it ended; its last stderr: native-sandbox supervisor: setgroups: Operation not permitted"
            )),
            "{why:?}"
        );
    }

    #[tokio::test]
    async fn a_quiet_supervisors_connection_simply_ends() {
        let frames: Vec<_> = frames_of(chunks(vec![Ok((OutputStream::Stdout, b"frame"))]))
            .collect()
            .await;
        assert_eq!(frames.len(), 1);
        assert!(frames[0].is_ok());
    }
}
