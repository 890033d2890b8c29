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
use tar_framing::write::{ustar_entry, Meta, END};
use tar_framing::BLOCK;

use super::engine::{engine_error, is_not_found};
use crate::lifecycle::error::OwnerError;

const SEED_REPOSITORY: &str = "native-sandbox/workspace-seed";

pub use crate::guest_helper::{helper_for, GuestHelper};

/// Where the seed image holds the workspace helper (owned by root, read-only like the whole
/// root filesystem of the holder). A holder whose entrypoint is anything else (one made by a
/// version whose helper did not extract imports) is used through the engine's archive endpoint.
pub const HELPER_PATH: &str = "/native-sandbox-helper";

impl GuestHelper {
    /// The first 12 hex digits of the build's SHA-256: what names the images that carry it.
    pub fn short_digest(&self) -> String {
        let digest = crate::digest::sha256(self.bytes);
        digest
            .trim_start_matches("sha256:")
            .get(..12)
            .unwrap_or_default()
            .to_owned()
    }

    /// An archive of the helper alone, at `HELPER_PATH`, owned by root, mode 0755.
    pub fn archive(&self) -> Result<Vec<u8>, OwnerError> {
        let mut archive = Vec::with_capacity(self.bytes.len() + 4 * BLOCK);
        self.append_to(&mut archive)?;
        archive.extend_from_slice(&END);
        Ok(archive)
    }

    fn append_to(&self, archive: &mut Vec<u8>) -> Result<(), OwnerError> {
        let meta = Meta {
            typeflag: b'0',
            mode: 0o755,
            ..Meta::default()
        };
        let name = HELPER_PATH.trim_start_matches('/');
        ustar_entry(archive, name.as_bytes(), &meta, self.bytes).map_err(|e| {
            OwnerError::driver(format!("building an archive of the guest helper: {e}"))
        })
    }
}

/// The seed image's tag for `uid`:`gid`: a new helper build (or another architecture's) makes a
/// new image.
fn seed_tag(uid: u64, gid: u64, helper: &GuestHelper) -> String {
    format!("{uid}-{gid}-{}", helper.short_digest())
}

/// The seed image's ID for `user` (`uid:gid`) with `helper`, importing it when it is missing.
pub async fn ensure_seed_image(
    docker: &Docker,
    user: &str,
    helper: &GuestHelper,
) -> Result<String, OwnerError> {
    let (uid, gid) = numeric_user(user)?;
    let tag = seed_tag(uid, gid, helper);
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
    let archive = seed_archive(uid, gid, helper)?;
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .platform(helper.platform)
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

fn seed_archive(uid: u64, gid: u64, helper: &GuestHelper) -> Result<Vec<u8>, OwnerError> {
    let failed =
        |e: std::io::Error| OwnerError::driver(format!("building the workspace seed archive: {e}"));
    let mut archive = Vec::with_capacity(helper.bytes.len() + 8 * BLOCK);
    for (path, owner) in [("sandbox/", (0, 0)), ("sandbox/workspace/", (uid, gid))] {
        let meta = Meta {
            typeflag: b'5',
            mode: 0o755,
            uid: owner.0,
            gid: owner.1,
            ..Meta::default()
        };
        ustar_entry(&mut archive, path.as_bytes(), &meta, &[]).map_err(failed)?;
    }
    helper.append_to(&mut archive)?;
    archive.extend_from_slice(&END);
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest_helper::{AMD64, ARM64};

    /// The ELF header's machine field (`e_machine`, little-endian at offset 18).
    fn elf_machine(bytes: &[u8]) -> Option<u16> {
        let magic = bytes.get(..4)?;
        let machine = bytes.get(18..20)?;
        (magic == b"\x7fELF").then(|| u16::from_le_bytes([machine[0], machine[1]]))
    }

    /// The archive the `tar` crate's builder made before the shared framing wrote it: the
    /// engine imports the very same bytes.
    #[test]
    fn the_seed_archive_is_the_one_the_tar_crate_built() {
        let helper = GuestHelper {
            platform: "linux/amd64",
            bytes: b"\x7fELF and some more bytes of a helper",
        };
        let (uid, gid) = (65_532, 3_000_000);
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
                .expect("appended");
        }
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o755);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(helper.bytes.len() as u64);
        header.set_mtime(0);
        builder
            .append_data(
                &mut header,
                HELPER_PATH.trim_start_matches('/'),
                helper.bytes,
            )
            .expect("appended");
        let expected = builder.into_inner().expect("built");
        let written = seed_archive(uid, gid, &helper).expect("written");
        assert!(written == expected, "the seed archives differ");
    }

    #[test]
    fn each_engine_architecture_gets_its_own_static_helper() {
        const EM_X86_64: u16 = 62;
        const EM_AARCH64: u16 = 183;
        for (name, machine) in [
            ("x86_64", EM_X86_64),
            ("amd64", EM_X86_64),
            ("aarch64", EM_AARCH64),
            ("arm64", EM_AARCH64),
        ] {
            let helper = helper_for(Some(name)).expect("supported");
            assert_eq!(elf_machine(helper.bytes), Some(machine), "{name}");
        }
        assert_ne!(seed_tag(1, 1, &AMD64), seed_tag(1, 1, &ARM64));
    }

    #[test]
    fn any_other_engine_architecture_is_unsupported() {
        for other in [
            Some("s390x"),
            Some("armv7l"),
            Some("riscv64"),
            Some(""),
            None,
        ] {
            let refused = helper_for(other).expect_err("refused");
            assert!(
                matches!(&refused, OwnerError::Unsupported(message) if message.contains("linux/arm64")),
                "{refused:?}"
            );
        }
    }
}
