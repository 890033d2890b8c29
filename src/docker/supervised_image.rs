//! The process container's image: the sandbox's image with the guest helper added at
//! `HELPER_PATH`, so the helper can be the container's supervisor (its PID 1) under a read-only
//! root filesystem, which the engine's archive upload cannot write. Made locally (no registry)
//! once per image and helper build by committing a never-started container of the image with
//! the helper uploaded into it, and kept as a cache like the workspace seed image.

use bollard::body_full;
use bollard::models::{ContainerConfig, ContainerCreateBody};
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, CreateContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bollard::Docker;

use super::engine::{engine_error, is_not_found};
use super::seed::{GuestHelper, HELPER_PATH};
use crate::lifecycle::error::OwnerError;

const SUPERVISED_REPOSITORY: &str = "native-sandbox/supervised";

/// The image's tag: the image's and the helper build's short digests.
fn supervised_tag(image_id: &str, helper: &GuestHelper) -> String {
    let image = image_id.trim_start_matches("sha256:");
    let image = image.get(..12).unwrap_or(image);
    format!("{image}-{}", helper.short_digest())
}

/// The ID of `image_id` with `helper` added, made when it is missing. The making runs as a task
/// of its own: a caller that stops waiting (a stop during a start) never leaves the container it
/// made behind.
pub async fn ensure_supervised_image(
    docker: &Docker,
    image_id: &str,
    helper: &'static GuestHelper,
) -> Result<String, OwnerError> {
    let tag = supervised_tag(image_id, helper);
    let reference = format!("{SUPERVISED_REPOSITORY}:{tag}");
    if let Some(id) = existing(docker, &reference).await? {
        return Ok(id);
    }
    let making = tokio::spawn(make(
        docker.clone(),
        image_id.to_owned(),
        helper,
        tag,
        reference,
    ));
    making
        .await
        .map_err(|e| OwnerError::driver(format!("making the image with the guest helper: {e}")))?
}

async fn make(
    docker: Docker,
    image_id: String,
    helper: &'static GuestHelper,
    tag: String,
    reference: String,
) -> Result<String, OwnerError> {
    let docker = &docker;
    // Never started, so nothing of the image runs: the command is only what the engine needs to
    // create a container of an image that names none.
    let body = ContainerCreateBody {
        image: Some(image_id),
        entrypoint: Some(vec![HELPER_PATH.to_owned()]),
        cmd: Some(Vec::new()),
        network_disabled: Some(true),
        ..Default::default()
    };
    let name = crate::digest::fresh_id(&format!("nsbx-supervised-{tag}"));
    let created = docker
        .create_container(
            Some(CreateContainerOptionsBuilder::default().name(&name).build()),
            body,
        )
        .await
        .map_err(|e| engine_error("creating the container that adds the guest helper", e))?;
    let made = commit_with_helper(docker, &created.id, &tag, helper).await;
    let removed = remove_maker(docker, &created.id).await;
    made?;
    removed?;
    existing(docker, &reference)
        .await?
        .ok_or_else(|| OwnerError::driver("the image with the guest helper has no ID"))
}

/// Removes the never-started container made here, by the ID its creation returned.
async fn remove_maker(docker: &Docker, id: &str) -> Result<(), OwnerError> {
    let options = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(engine_error(
            "removing the container that added the guest helper",
            e,
        )),
    }
}

async fn existing(docker: &Docker, reference: &str) -> Result<Option<String>, OwnerError> {
    match docker.inspect_image(reference).await {
        Ok(image) => Ok(image.id),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(
            "inspecting the image with the guest helper",
            e,
        )),
    }
}

async fn commit_with_helper(
    docker: &Docker,
    id: &str,
    tag: &str,
    helper: &GuestHelper,
) -> Result<(), OwnerError> {
    let archive = helper.archive()?;
    docker
        .upload_to_container(
            id,
            Some(UploadToContainerOptionsBuilder::default().path("/").build()),
            body_full(archive.into()),
        )
        .await
        .map_err(|e| engine_error("adding the guest helper to the process image", e))?;
    let options = CommitContainerOptionsBuilder::default()
        .container(id)
        .repo(SUPERVISED_REPOSITORY)
        .tag(tag)
        .pause(false)
        .build();
    docker
        .commit_container(options, ContainerConfig::default())
        .await
        .map_err(|e| engine_error("committing the process image with the guest helper", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_names_the_image_and_the_helper_build() {
        let helper = super::super::seed::helper_for(Some("x86_64")).expect("an amd64 helper");
        let tag = supervised_tag("sha256:0123456789abcdef0123", helper);
        assert_eq!(tag, format!("0123456789ab-{}", helper.short_digest()));
        assert_eq!(helper.short_digest().len(), 12);
    }
}
