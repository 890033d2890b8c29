//! The workspace seed image: a filesystem of one directory, `/sandbox/workspace`, owned by the
//! sandbox user. A fresh named volume mounted there by a container of this image takes that
//! ownership, so the non-root process can write its workspace even when nothing was imported.
//! Built locally from a tar stream (no registry), once per uid:gid and helper build, and kept as
//! a cache. It also carries the workspace helper (`helper/`, embedded in the addon), the holder's
//! entrypoint: run, it writes workspace files as one archive, or extracts an import archive.

use bollard::body_full;
use bollard::query_parameters::CreateImageOptionsBuilder;
use bollard::Docker;
use futures::StreamExt;

use super::engine::{engine_error, is_not_found};
use crate::lifecycle::error::OwnerError;

const SEED_REPOSITORY: &str = "native-sandbox/workspace-seed";
/// The workspace helper, a static Linux executable built by `build.rs` from `helper/`.
const HELPER: &[u8] = include_bytes!(env!("NATIVE_SANDBOX_HELPER"));
/// Where the seed image holds the workspace helper (owned by root, read-only like the whole
/// root filesystem of the holder). A holder whose entrypoint is anything else (one made by a
/// version whose helper did not extract imports) is used through the engine's archive endpoint.
pub const HELPER_PATH: &str = "/native-sandbox-helper";

/// The seed image's tag for `uid`:`gid`: a new helper build makes a new image.
fn seed_tag(uid: u64, gid: u64) -> String {
    let digest = crate::digest::sha256(HELPER);
    let short = digest
        .trim_start_matches("sha256:")
        .get(..12)
        .unwrap_or_default();
    format!("{uid}-{gid}-{short}")
}

/// The seed image's ID for `user` (`uid:gid`), importing it when it is missing.
pub async fn ensure_seed_image(docker: &Docker, user: &str) -> Result<String, OwnerError> {
    let (uid, gid) = numeric_user(user)?;
    let tag = seed_tag(uid, gid);
    let reference = format!("{SEED_REPOSITORY}:{tag}");
    match docker.inspect_image(&reference).await {
        Ok(image) => {
            if let Some(id) = image.id {
                return Ok(id);
            }
        }
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(engine_error("inspecting the workspace seed image", e)),
    }
    let archive = seed_archive(uid, gid)?;
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(SEED_REPOSITORY)
        .tag(&tag)
        .build();
    let mut progress = docker.create_image(Some(options), Some(body_full(archive.into())), None);
    while let Some(step) = progress.next().await {
        step.map_err(|e| engine_error("importing the workspace seed image", e))?;
    }
    docker
        .inspect_image(&reference)
        .await
        .map_err(|e| engine_error("inspecting the imported workspace seed image", e))?
        .id
        .ok_or_else(|| OwnerError::driver("the workspace seed image has no ID"))
}

pub fn numeric_user(user: &str) -> Result<(u64, u64), OwnerError> {
    user.split_once(':')
        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)))
        .ok_or_else(|| {
            OwnerError::state(format!("the sandbox user {user} is not a numeric uid:gid"))
        })
}

fn seed_archive(uid: u64, gid: u64) -> Result<Vec<u8>, OwnerError> {
    let failed =
        |e: std::io::Error| OwnerError::driver(format!("building the workspace seed archive: {e}"));
    let mut builder = tar::Builder::new(Vec::new());
    for (path, owner) in [("sandbox/", (0, 0)), ("sandbox/workspace/", (uid, gid))] {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_uid(owner.0);
        header.set_gid(owner.1);
        header.set_size(0);
        header.set_mtime(0);
        builder
            .append_data(&mut header, path, std::io::empty())
            .map_err(failed)?;
    }
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o755);
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(HELPER.len() as u64);
    header.set_mtime(0);
    builder
        .append_data(&mut header, HELPER_PATH.trim_start_matches('/'), HELPER)
        .map_err(failed)?;
    builder.into_inner().map_err(failed)
}
