//! A host directory's walk for JavaScript drivers' imports (`importSandboxDirectory` on a sandbox
//! without native transfers): the very walk the Docker backend's native import uses
//! (`transfer::host_walk`, by descriptors), entry by entry, each file's bytes read in Rust.
//! Every call that touches the file system runs on a blocking thread, never on the JS thread or
//! the async workers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, outcome};
use super::js_value::JsData;
use super::runtime::within;
use crate::input::Value;
use crate::lifecycle::error::OwnerError;
use crate::transfer::host_walk::{HostEntry, HostFile, HostWalk, SeenFile};

/// The walk, the files it handed out (by id) and those being read.
#[derive(Default)]
struct WalkState {
    walk: Option<HostWalk>,
    seen: HashMap<u32, SeenFile>,
    reading: HashMap<u32, HostFile>,
    next_id: u32,
}

#[napi]
pub struct NativeHostWalk {
    state: Arc<Mutex<WalkState>>,
}

/// Runs `work` on the state on a blocking thread.
async fn blocking<T: Send + 'static>(
    state: &Arc<Mutex<WalkState>>,
    work: impl FnOnce(&mut WalkState) -> std::result::Result<T, OwnerError> + Send + 'static,
) -> std::result::Result<T, OwnerError> {
    let state = Arc::clone(state);
    tokio::task::spawn_blocking(move || {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        work(&mut state)
    })
    .await
    .unwrap_or_else(|e| {
        Err(OwnerError::driver(format!(
            "the directory walk ended abnormally: {e}"
        )))
    })
}

#[napi]
impl NativeHostWalk {
    /// A walk that has opened nothing yet.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(WalkState::default())),
        }
    }

    /// Opens `root` (a directory, not a link): `null`, or an error descriptor.
    #[napi]
    pub async fn open(&self, root: String) -> JsData {
        let result = blocking(&self.state, move |state| {
            state.walk = Some(HostWalk::open(&PathBuf::from(root))?);
            Ok(Value::Null)
        })
        .await;
        JsData(outcome(result))
    }

    /// The next entry (`{ kind: 'directory', path }` or `{ kind: 'file', path, size, executable,
    /// id }`), `null` at the end, or an error descriptor.
    #[napi(js_name = "nextEntry")]
    pub async fn next_entry(&self) -> JsData {
        let result = blocking(&self.state, |state| {
            let walk = state
                .walk
                .as_mut()
                .ok_or_else(|| OwnerError::state("the directory walk is not open"))?;
            Ok(match walk.next_entry()? {
                None => Value::Null,
                Some(HostEntry::Directory { path }) => Value::object([
                    ("kind", Value::string("directory")),
                    ("path", Value::string(path)),
                ]),
                Some(HostEntry::File {
                    path,
                    executable,
                    file,
                }) => {
                    let id = state.next_id;
                    state.next_id = state.next_id.wrapping_add(1);
                    let size = file.size();
                    state.seen.insert(id, file);
                    Value::object([
                        ("kind", Value::string("file")),
                        ("path", Value::string(path)),
                        ("size", Value::BigInt(Some(i128::from(size)))),
                        ("executable", Value::Bool(executable)),
                        ("id", Value::number(id)),
                    ])
                }
            })
        })
        .await;
        JsData(outcome(result))
    }

    /// The next bytes of file `id` (opened and checked at its first read), at most `max`: a
    /// Buffer, `null` at its end (after checking it did not grow), or an error descriptor.
    #[napi(js_name = "readFile")]
    pub async fn read_file(&self, id: u32, max: u32) -> Either3<Buffer, Null, JsData> {
        let result = blocking(&self.state, move |state| {
            if !state.reading.contains_key(&id) {
                let seen = state
                    .seen
                    .remove(&id)
                    .ok_or_else(|| OwnerError::state("no such file in this walk"))?;
                state.reading.insert(id, seen.open()?);
            }
            let file = state
                .reading
                .get_mut(&id)
                .ok_or_else(|| OwnerError::state("no such file in this walk"))?;
            let chunk = file.read_chunk(max.max(1) as usize)?;
            if chunk.is_none() {
                state.reading.remove(&id);
            }
            Ok(chunk)
        })
        .await;
        match result {
            Ok(Some(bytes)) => Either3::A(Buffer::from(bytes)),
            Ok(None) => Either3::B(Null),
            Err(error) => Either3::C(JsData(failed(&error))),
        }
    }

    /// Lets go of file `id` (its descriptor, if it was opened). Never waits: the state's lock
    /// (a read may hold it) and the close are taken on a blocking thread.
    #[napi(js_name = "closeFile")]
    pub fn close_file(&self, id: u32) -> Result<()> {
        let state = Arc::clone(&self.state);
        within(|| {
            tokio::task::spawn_blocking(move || {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                drop((state.seen.remove(&id), state.reading.remove(&id)));
            });
        })
    }

    /// Lets go of the walk itself (its directories): the files it handed out stay readable
    /// until `closeFile` or `release` (a driver may read them after the walk ended). Never
    /// waits, as `closeFile`.
    #[napi(js_name = "closeWalk")]
    pub fn close_walk(&self) -> Result<()> {
        let state = Arc::clone(&self.state);
        within(|| {
            tokio::task::spawn_blocking(move || {
                let walk = state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .walk
                    .take();
                drop(walk);
            });
        })
    }

    /// The import this walk fed settled: the walk, the files never read (each holds its
    /// directory's descriptor) and those being read all go now, not when this object is
    /// collected. Never waits, as `closeFile`.
    #[napi]
    pub fn release(&self) -> Result<()> {
        let state = Arc::clone(&self.state);
        within(|| {
            tokio::task::spawn_blocking(move || {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                let held = (
                    state.walk.take(),
                    std::mem::take(&mut state.seen),
                    std::mem::take(&mut state.reading),
                );
                drop(state);
                drop(held);
            });
        })
    }
}
