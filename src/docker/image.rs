//! The backend's image: an ID is pinned at once; a reference is resolved in the background to
//! the immutable ID every sandbox of the backend then runs and records. A resolution that
//! failed (the engine not up yet, the image not there yet) is asked again by the next start.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bollard::Docker;
use futures::future::{BoxFuture, FutureExt, Shared};

use super::engine::{engine_error, engine_label};
use super::layout::{BACKEND_ID, BACKEND_REVISION};
use super::options::{DockerOptions, Engine};
use crate::digest::sha256_of;
use crate::input::Value;
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::is_sha256_digest;

/// How long the engine may take to resolve a reference.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(30);

/// The image digest a reservation carries until its start resolves the reference: well-formed,
/// and visibly no image. It is never persisted (startup completes the record first).
pub const UNRESOLVED_IMAGE: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The image ID with the configuration digest derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub image_id: String,
    pub configuration_digest: String,
}

impl Pinned {
    pub fn new(image_id: String, options: &DockerOptions) -> Self {
        let configuration = Value::object([
            ("backend", Value::string(BACKEND_ID)),
            ("revision", Value::string(BACKEND_REVISION)),
            ("image", Value::string(image_id.as_str())),
            ("namespace", Value::string(options.namespace.as_str())),
            ("user", Value::string(options.user.as_str())),
            (
                "runtime",
                options
                    .runtime
                    .as_deref()
                    .map_or(Value::Null, Value::string),
            ),
        ]);
        Self {
            configuration_digest: sha256_of(&configuration),
            image_id,
        }
    }
}

/// One resolution, shared by every sandbox that waits for it.
type Resolution = Shared<BoxFuture<'static, Result<Pinned, OwnerError>>>;

/// A reference's resolutions: the current one, and what starts the next when it failed.
pub struct Resolver {
    docker: Docker,
    options: DockerOptions,
    current: Mutex<Resolution>,
}

impl Resolver {
    /// Starts resolving now, as its own task (so it needs a tokio runtime context), bounded by
    /// `RESOLVE_TIMEOUT`.
    fn start(docker: &Docker, options: &DockerOptions) -> Resolution {
        let docker = docker.clone();
        let options = options.clone();
        let task = tokio::spawn(async move {
            let id = resolve(&docker, &options.image, &options.engine).await?;
            Ok(Pinned::new(id, &options))
        });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(OwnerError::driver(format!(
                    "resolving the image ended abnormally: {e}"
                )))
            })
        }
        .boxed()
        .shared()
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Resolution> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pinned image, if known now. (`now_or_never`, not `peek`: a resolution nobody
    /// awaited yet has an outcome only once it is polled.)
    pub fn now(&self) -> Option<Pinned> {
        let current = self.current().clone();
        current.now_or_never().and_then(Result::ok)
    }

    /// The pinned image, waiting for the resolution; one that failed is started again first
    /// (every start waiting at that moment shares the new one).
    pub async fn pinned(&self) -> Result<Pinned, OwnerError> {
        let resolution = {
            let mut current = self.current();
            if matches!(current.clone().now_or_never(), Some(Err(_))) {
                *current = Self::start(&self.docker, &self.options);
            }
            current.clone()
        };
        resolution.await
    }
}

#[derive(Clone)]
pub enum ImageSource {
    Pinned(Pinned),
    Resolving(Arc<Resolver>),
}

impl ImageSource {
    /// An ID needs no engine call. A reference starts resolving now (see `Resolver::start`).
    pub fn new(docker: &Docker, options: &DockerOptions) -> Self {
        if is_sha256_digest(&options.image) {
            return Self::Pinned(Pinned::new(options.image.clone(), options));
        }
        Self::Resolving(Arc::new(Resolver {
            docker: docker.clone(),
            options: options.clone(),
            current: Mutex::new(Resolver::start(docker, options)),
        }))
    }

    /// The pinned image, if known now.
    pub fn now(&self) -> Option<Pinned> {
        match self {
            Self::Pinned(pinned) => Some(pinned.clone()),
            Self::Resolving(resolver) => resolver.now(),
        }
    }

    /// The pinned image, waiting for the resolution if needed.
    pub async fn pinned(&self) -> Result<Pinned, OwnerError> {
        match self {
            Self::Pinned(pinned) => Ok(pinned.clone()),
            Self::Resolving(resolver) => resolver.pinned().await,
        }
    }
}

/// The immutable ID a reference names now, asked once with a bounded wait.
async fn resolve(docker: &Docker, reference: &str, engine: &Engine) -> Result<String, OwnerError> {
    let image = tokio::time::timeout(RESOLVE_TIMEOUT, docker.inspect_image(reference))
        .await
        .map_err(|_| {
            OwnerError::driver(format!(
                "the engine did not resolve image {reference} within {RESOLVE_TIMEOUT:?}"
            ))
        })?
        .map_err(|e| {
            engine_error(
                &format!(
                    "resolving image {reference} (the engine: {})",
                    engine_label(engine)
                ),
                e,
            )
        })?;
    image
        .id
        .filter(|id| is_sha256_digest(id))
        .ok_or_else(|| OwnerError::driver(format!("image {reference} has no sha256 image ID")))
}
