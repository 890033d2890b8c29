//! One workspace archive call on a running sandbox as JavaScript holds it (an agent framework's
//! persist and hydrate): made per call (so the caller's signal cancels exactly it), then
//! `persist` or `hydrate`. The work is `transfer::workspace_archive`'s.

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, outcome};
use super::js_value::{Captured, JsData};
use std::sync::{Mutex, PoisonError};

use crate::input::{ToValue, Value};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::transfer::workspace_archive::limits::{parse_archive_options, ArchiveOptions, Limit};
use crate::transfer::workspace_archive::{hydrate_workspace, persist_workspace};

#[napi]
pub struct NativeWorkspaceArchive {
    owner: SandboxOwner,
    /// The caller's signal.
    cancel: Cancel,
    /// The archive `prepareHydrate` took, with its options, until `hydrate` runs.
    prepared: Mutex<Option<(Bytes, ArchiveOptions)>>,
}

impl NativeWorkspaceArchive {
    pub fn new(owner: SandboxOwner) -> Self {
        Self {
            owner,
            cancel: Cancel::new(),
            prepared: Mutex::new(None),
        }
    }
}

#[napi]
impl NativeWorkspaceArchive {
    /// The caller's signal fired: the call ends with `cancelled`.
    #[napi]
    pub fn abort(&self) {
        self.cancel.cancel(OwnerError::cancelled(
            "the workspace archive was aborted through its signal",
        ));
    }

    /// The workspace as one tar archive (`options`: `{ archiveLimits, exclude }`), or an error
    /// descriptor.
    #[napi]
    pub async fn persist(&self, options: Captured) -> Either<Buffer, JsData> {
        let result = async {
            let options = parse_archive_options(&options.0).map_err(OwnerError::Validation)?;
            persist_workspace(&self.owner, options, self.cancel.clone()).await
        }
        .await;
        match result {
            Ok(archive) => Either::A(Buffer::from(archive)),
            Err(error) => Either::B(JsData(failed(&error))),
        }
    }

    /// Takes the archive for `hydrate` (`options`: `{ archiveLimits }`), on the JavaScript
    /// thread: its options are judged and its size checked against `maxInputBytes` before it
    /// is copied, and the copy is made before the caller can change its bytes. `null`, or an
    /// error descriptor.
    #[napi(js_name = "prepareHydrate")]
    pub fn prepare_hydrate(&self, archive: &[u8], options: Captured) -> JsData {
        let taken = parse_archive_options(&options.0)
            .map_err(OwnerError::Validation)
            .and_then(|options| {
                options
                    .limits
                    .check(Limit::InputBytes, archive.len() as u64, None)?;
                Ok(options)
            })
            .map(|options| {
                *self.prepared.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((Bytes::copy_from_slice(archive), options));
                Value::Null
            });
        JsData(outcome(taken))
    }

    /// Replaces the workspace's contents with the archive `prepareHydrate` took; resolves the
    /// import's summary or an error descriptor.
    #[napi]
    pub async fn hydrate(&self) -> JsData {
        let prepared = self
            .prepared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let result = match prepared {
            Some((archive, options)) => {
                hydrate_workspace(&self.owner, archive, options, self.cancel.clone()).await
            }
            None => Err(OwnerError::state(
                "hydrate needs an archive prepareHydrate took",
            )),
        };
        JsData(outcome(result.map(|summary| summary.to_value())))
    }
}
