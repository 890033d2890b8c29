//! The fixed guest layout (`DOCKER_SANDBOX_GUEST`) and the names and labels of engine objects.

use std::collections::HashMap;

pub use crate::guest_layout::{fixed_environment, GUEST_ROOTS, HOME, PATH, TMPDIR, WORKSPACE};

pub const BACKEND_ID: &str = "native-sandbox.docker";
pub const BACKEND_REVISION: &str = "1";

const LABEL_PREFIX: &str = "dev.native-sandbox";
pub const LABEL_NAMESPACE: &str = "dev.native-sandbox.namespace";
pub const LABEL_SANDBOX: &str = "dev.native-sandbox.sandbox";
pub const LABEL_OPERATION: &str = "dev.native-sandbox.operation";
pub const LABEL_ROLE: &str = "dev.native-sandbox.role";
pub const LABEL_CONFIGURATION: &str = "dev.native-sandbox.configuration";

/// The engine names of one sandbox's objects, assigned at reservation, before any effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub storage: String,
    pub export: String,
    pub compute: String,
    pub network: String,
}

impl Names {
    pub fn new(namespace: &str, sandbox_id: &str) -> Self {
        let prefix = format!("nsbx-{namespace}-{sandbox_id}");
        Self {
            storage: format!("{prefix}-workspace"),
            export: format!("{prefix}-holder"),
            compute: format!("{prefix}-process"),
            network: format!("{prefix}-net"),
        }
    }
}

/// The labels every object of a sandbox carries; `role` names which one it is.
pub fn labels(
    namespace: &str,
    sandbox_id: &str,
    operation_id: &str,
    configuration: &str,
    role: &str,
) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_NAMESPACE.to_owned(), namespace.to_owned()),
        (LABEL_SANDBOX.to_owned(), sandbox_id.to_owned()),
        (LABEL_OPERATION.to_owned(), operation_id.to_owned()),
        (LABEL_ROLE.to_owned(), role.to_owned()),
        (LABEL_CONFIGURATION.to_owned(), configuration.to_owned()),
        (
            format!("{LABEL_PREFIX}.version"),
            BACKEND_REVISION.to_owned(),
        ),
    ])
}
