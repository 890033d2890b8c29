//! The staging writer for JavaScript drivers' exports (`exportSandboxDirectory` on a sandbox
//! without native transfers): the very writer the Docker backend's native export uses
//! (`transfer::staging_tree`), fed entry by entry. Every call that touches the file system runs
//! on a blocking thread, never on the JS thread or the async workers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::outcome;
use super::js_value::JsData;
use crate::input::Value;
use crate::lifecycle::error::OwnerError;
use crate::transfer::staging_tree::{Identities, TreeWriter};

#[napi]
pub struct NativeStagingWriter {
    tree: Arc<Mutex<TreeWriter>>,
}

impl NativeStagingWriter {
    /// Runs `work` on the writer on a blocking thread: `null` or an error descriptor.
    async fn blocking(
        &self,
        work: impl FnOnce(&mut TreeWriter) -> std::result::Result<(), OwnerError> + Send + 'static,
    ) -> JsData {
        let tree = Arc::clone(&self.tree);
        let result = tokio::task::spawn_blocking(move || {
            let mut tree = tree.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut tree)
        })
        .await
        .unwrap_or_else(|e| {
            Err(OwnerError::driver(format!(
                "the export writer ended abnormally: {e}"
            )))
        });
        JsData(outcome(result.map(|()| Value::Null)))
    }
}

#[napi]
impl NativeStagingWriter {
    /// A writer into `staging` (an existing private directory), recording the directories it
    /// makes in `identities` (another, outside `staging`). Touches nothing yet.
    #[napi(constructor)]
    pub fn new(staging: String, identities: String) -> Self {
        Self {
            tree: Arc::new(Mutex::new(TreeWriter::new(
                PathBuf::from(staging),
                Identities::new(PathBuf::from(identities)),
            ))),
        }
    }

    /// The directory `path` (a checked relative path) and its missing ancestors.
    #[napi]
    pub async fn directory(&self, path: String) -> JsData {
        self.blocking(move |tree| tree.directory(&path)).await
    }

    /// Starts the file `path` (a checked relative path), created exclusively.
    #[napi]
    pub async fn file(&self, path: String, executable: bool) -> JsData {
        self.blocking(move |tree| tree.file(&path, executable))
            .await
    }

    /// Writes `chunk` to the open file.
    #[napi]
    pub async fn write(&self, chunk: Buffer) -> JsData {
        let bytes = Bytes::copy_from_slice(&chunk);
        self.blocking(move |tree| {
            tree.chunk(bytes)?;
            tree.flush()
        })
        .await
    }

    /// Ends the open file (its descriptor is closed).
    #[napi(js_name = "fileEnd")]
    pub async fn file_end(&self) -> JsData {
        self.blocking(TreeWriter::file_end).await
    }
}
