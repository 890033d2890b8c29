//! `prepareDockerSandboxImage`: any local image made admissible. Admission takes an image whose
//! environment holds only `HOME`, `TMPDIR` and `PATH` with the guest's fixed values (the
//! original's rule), and no `ENV` in a Dockerfile can remove a variable, so official images
//! (Docker's default `PATH`, `NODE_VERSION`, `JAVA_HOME`, `LANG`, …) are all refused. The
//! engine builds a new image here: the source's whole filesystem copied onto an empty one
//! (`FROM scratch`, `COPY --from=<source ID> / /`), with exactly the admitted `PATH` and a label
//! naming the source. The variables left out are returned, for a caller to pass in a process
//! recipe. Entrypoint, command, user and working directory are left out too: every sandbox
//! process sets its own. The same source ID gives the same result without a second build.

use bollard::body_full;
use bollard::query_parameters::{BuildImageOptionsBuilder, TagImageOptionsBuilder};
use bollard::Docker;
use futures::StreamExt;
use tar_framing::write::{ustar_entry, Meta, END};

use super::engine::{engine_error, is_not_found};
use super::layout::{fixed_environment, PATH};
use crate::lifecycle::error::OwnerError;

/// The label naming the image a prepared image was made from (its ID).
pub const LABEL_PREPARED_FROM: &str = "dev.native-sandbox.prepared-from";
/// The label naming how it was made; a new recipe makes new images.
pub const LABEL_PREPARED_BY: &str = "dev.native-sandbox.prepared-by";
const RECIPE: &str = "1";
/// How long the engine's build (the copy of the whole source filesystem) may take.
const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// A prepared image: the tag asked for, its ID, and the source's variables it does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub image: String,
    pub id: String,
    pub dropped_env: Vec<(String, String)>,
}

/// The source's environment entries admission refuses, as `(name, value)`.
pub fn refused_environment(env: &[String]) -> Vec<(String, String)> {
    let admitted: Vec<String> = fixed_environment()
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    env.iter()
        .filter(|entry| !admitted.contains(entry))
        .map(|entry| match entry.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => (entry.clone(), String::new()),
        })
        .collect()
}

/// The build context: one Dockerfile.
fn build_context(source_id: &str) -> Result<Vec<u8>, OwnerError> {
    let dockerfile = format!(
        "FROM scratch\nCOPY --from={source_id} / /\nENV PATH={PATH}\nLABEL {LABEL_PREPARED_FROM}=\"{source_id}\" {LABEL_PREPARED_BY}=\"{RECIPE}\"\n"
    );
    let failed =
        |e: std::io::Error| OwnerError::driver(format!("building the image's build context: {e}"));
    let meta = Meta {
        typeflag: b'0',
        mode: 0o644,
        ..Meta::default()
    };
    let mut context = Vec::new();
    ustar_entry(&mut context, b"Dockerfile", &meta, dockerfile.as_bytes()).map_err(failed)?;
    context.extend_from_slice(&END);
    Ok(context)
}

/// What the engine says of `image`: its ID, environment and labels; `None` when it has none.
async fn inspect(
    docker: &Docker,
    image: &str,
) -> Result<Option<(String, Vec<String>, Vec<(String, String)>)>, OwnerError> {
    match docker.inspect_image(image).await {
        Ok(found) => {
            let config = found.config.unwrap_or_default();
            let labels = config.labels.unwrap_or_default().into_iter().collect();
            Ok(Some((
                found.id.unwrap_or_default(),
                config.env.unwrap_or_default(),
                labels,
            )))
        }
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(&format!("inspecting image {image}"), e)),
    }
}

fn label<'a>(labels: &'a [(String, String)], name: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Makes `tag` an admissible image of `from` (a local image reference or ID).
pub async fn prepare_image(docker: &Docker, from: &str, tag: &str) -> Result<Prepared, OwnerError> {
    let Some((source_id, env, _)) = inspect(docker, from).await? else {
        return Err(OwnerError::state(format!(
            "prepareDockerSandboxImage: from: the engine has no image {from} (pull or build it first)"
        )));
    };
    let dropped_env = refused_environment(&env);
    let done = |id: String| Prepared {
        image: tag.to_owned(),
        id,
        dropped_env: dropped_env.clone(),
    };
    // Already admissible: the source itself, under the tag.
    if dropped_env.is_empty() {
        let (repo, version) = split_tag(tag);
        let options = TagImageOptionsBuilder::default()
            .repo(repo)
            .tag(version)
            .build();
        docker
            .tag_image(&source_id, Some(options))
            .await
            .map_err(|e| engine_error(&format!("tagging image {source_id} as {tag}"), e))?;
        return Ok(done(source_id));
    }
    // Prepared before from this very source: nothing to build.
    if let Some((id, env, labels)) = inspect(docker, tag).await? {
        if label(&labels, LABEL_PREPARED_FROM) == Some(source_id.as_str())
            && label(&labels, LABEL_PREPARED_BY) == Some(RECIPE)
            && refused_environment(&env).is_empty()
        {
            return Ok(done(id));
        }
    }
    let options = BuildImageOptionsBuilder::default()
        .t(tag)
        .rm(true)
        .forcerm(true)
        .pull("false")
        .build();
    let context = build_context(&source_id)?;
    // A large image's copy takes longer than one ordinary request may.
    let builder = docker.clone().with_timeout(BUILD_TIMEOUT);
    let mut progress = builder.build_image(options, None, Some(body_full(context.into())));
    let mut said = Vec::new();
    while let Some(step) = progress.next().await {
        let step =
            step.map_err(|e| engine_error(&format!("building image {tag} from {from}"), e))?;
        if let Some(detail) = step.error_detail.and_then(|d| d.message) {
            return Err(OwnerError::driver(format!(
                "building image {tag} from {from}: {detail}"
            )));
        }
        if let Some(line) = step.stream {
            said.push(line);
            if said.len() > 8 {
                said.remove(0);
            }
        }
    }
    match inspect(docker, tag).await? {
        Some((id, env, labels))
            if label(&labels, LABEL_PREPARED_FROM) == Some(source_id.as_str())
                && refused_environment(&env).is_empty() =>
        {
            Ok(done(id))
        }
        _ => Err(OwnerError::driver(format!(
            "building image {tag} from {from} ended without an admissible image ({})",
            said.concat().trim()
        ))),
    }
}

/// `repo:tag` as the engine's tag call wants it (a missing tag is `latest`; a registry's port is
/// not a tag).
fn split_tag(reference: &str) -> (&str, &str) {
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (reference, "latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_environment_is_everything_but_the_fixed_entries() {
        let env = vec![
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            "HOME=/sandbox/home".to_owned(),
            "JAVA_HOME=/opt/java".to_owned(),
            "EMPTY=".to_owned(),
        ];
        assert_eq!(
            refused_environment(&env),
            vec![
                (
                    "PATH".to_owned(),
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned()
                ),
                ("JAVA_HOME".to_owned(), "/opt/java".to_owned()),
                ("EMPTY".to_owned(), String::new()),
            ]
        );
        assert!(refused_environment(&[format!("PATH={PATH}")]).is_empty());
    }

    #[test]
    fn a_tag_splits_as_the_engine_reads_it() {
        assert_eq!(split_tag("team/agent:1"), ("team/agent", "1"));
        assert_eq!(split_tag("team/agent"), ("team/agent", "latest"));
        assert_eq!(
            split_tag("registry.local:5000/agent"),
            ("registry.local:5000/agent", "latest")
        );
        assert_eq!(
            split_tag("registry.local:5000/agent:2"),
            ("registry.local:5000/agent", "2")
        );
    }

    #[test]
    fn the_context_copies_the_source_by_id_with_only_the_admitted_path() {
        let context = build_context("sha256:abc").expect("context");
        let text = String::from_utf8_lossy(&context);
        assert!(text.contains(
            "FROM scratch\nCOPY --from=sha256:abc / /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n"
        ));
        // One Dockerfile, as a third party's reader reads it.
        let mut archive = tar::Archive::new(context.as_slice());
        let entries: Vec<(String, u32, String)> = archive
            .entries()
            .expect("entries")
            .map(|entry| {
                let mut entry = entry.expect("an entry");
                let mut body = String::new();
                std::io::Read::read_to_string(&mut entry, &mut body).expect("its body");
                (
                    entry.path().expect("a path").display().to_string(),
                    entry.header().mode().expect("a mode"),
                    body,
                )
            })
            .collect();
        assert_eq!(entries.len(), 1);
        assert_eq!((entries[0].0.as_str(), entries[0].1), ("Dockerfile", 0o644));
        assert!(entries[0].2.starts_with("FROM scratch\n"));
        assert_eq!(context.len() % 512, 0);
    }
}
