//! One workspace archive call on a running sandbox as JavaScript holds it (an agent framework's
//! persist and hydrate): made per call (so the caller's signal cancels exactly it), then
//! `persist` or `hydrate`. The work is `transfer::workspace_archive`'s.

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, outcome};
use super::js_value::{Captured, JsData};
use crate::input::ToValue;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::transfer::workspace_archive::limits::parse_archive_options;
use crate::transfer::workspace_archive::{hydrate_workspace, persist_workspace};

#[napi]
pub struct NativeWorkspaceArchive {
    owner: SandboxOwner,
    /// The caller's signal.
    cancel: Cancel,
}

impl NativeWorkspaceArchive {
    pub fn new(owner: SandboxOwner) -> Self {
        Self {
            owner,
            cancel: Cancel::new(),
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

    /// Replaces the workspace's contents with the tar archive `archive` (`options`:
    /// `{ archiveLimits }`); resolves the import's summary or an error descriptor.
    #[napi]
    pub async fn hydrate(&self, archive: Buffer, options: Captured) -> JsData {
        let archive = Bytes::from(archive.to_vec());
        let result = async {
            let options = parse_archive_options(&options.0).map_err(OwnerError::Validation)?;
            hydrate_workspace(&self.owner, archive, options, self.cancel.clone()).await
        }
        .await;
        JsData(outcome(result.map(|summary| summary.to_value())))
    }
}
