//! The egress gateway of an allowlist sandbox: its workspace holder, started at once with the
//! helper's `--gateway` mode as its entrypoint (`helper/src/gateway/`), on the sandbox's
//! internal network (its only peer the guest) and on the upstream network the backend names.
//! The guest's resolver is the gateway. Transfers through such a holder run the workspace
//! helper by exec beside the gateway (`helper_run.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, HostConfig, NetworkConnectRequest,
    NetworkInspect,
};
use bollard::Docker;

use super::gateway_watch::{listen, stopped};
use super::helper_run::run_mode;
use super::DockerSandbox;
use crate::docker::attach::{attach_error, attach_streams};
use crate::docker::dialer::Dialer;
use crate::docker::engine::engine_error;
use crate::docker::seed::HELPER_PATH;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::egress_report::{EgressReport, GatewayStopped};
use crate::lifecycle::error::OwnerError;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::policy::resources::Resources;
use crate::recovery::record::Role;

/// The gateway's own budget: its holder's memory and task limits, whatever the guest's (a
/// guest with `pids: 24` must not leave its gateway one connection, nor a guest's small memory
/// limit starve its relays). Within it: up to 256 relays of two threads, 16 lookups, the
/// listeners and the execs beside it (`helper/src/gateway/config.rs`); its pipes are bounded
/// by the kernel's per-user pipe budget besides. The guest's own limits are read back on its
/// container (`process.rs`); the holder's CPU share stays the guest's.
pub(super) const GATEWAY_MEMORY_BYTES: u64 = 256 * 1_024 * 1_024;
pub(super) const GATEWAY_PIDS: u64 = 1_024;

/// How long a started gateway may take to serve.
const READY_WAIT: Duration = Duration::from_secs(15);
const READY_POLL: Duration = Duration::from_millis(50);
/// The most of a report read back.
const REPORT_BYTES: usize = 64 * 1_024;

/// What the internal network looks like once created: its subnet and the host's address on it.
pub(super) struct InternalNetwork {
    pub subnet: String,
    pub host_address: Option<String>,
}

/// The helper's mode that serves as the gateway: a holder whose entrypoint names it runs
/// transfers by exec (`helper_run.rs`).
pub(super) const GATEWAY_MODE: &str = "--gateway";

/// The gateway's command line (see `helper/src/gateway/config.rs`); each refused host address once.
pub(super) fn gateway_command(
    reservation: &DockerSandbox,
    internal: &InternalNetwork,
    denied: &[String],
) -> Vec<String> {
    let mut command = vec![
        HELPER_PATH.to_owned(),
        GATEWAY_MODE.to_owned(),
        "--subnet".to_owned(),
        internal.subnet.clone(),
        "--pids".to_owned(),
        GATEWAY_PIDS.to_string(),
    ];
    for resolver in &reservation.settings.egress.resolvers {
        command.extend(["--resolver".to_owned(), resolver.to_string()]);
    }
    let mut refused: Vec<&String> = Vec::new();
    for address in denied.iter().chain(internal.host_address.as_ref()) {
        if !refused.contains(&address) {
            refused.push(address);
            command.extend(["--deny".to_owned(), address.clone()]);
        }
    }
    for host in &reservation.request.policy.network.hosts {
        let mut entry = host.name.clone();
        if let Some(port) = host.port {
            entry.push_str(&format!(":{port}"));
        }
        if host.allow_private {
            entry.push_str("!private");
        }
        command.extend(["--host".to_owned(), entry]);
    }
    command
}

/// Makes a holder body the gateway's: its entrypoint (its sysctls and budget come with every
/// body of an allowlist sandbox's holder: `with_network_sysctls`, `with_gateway_budget`).
pub(super) fn as_gateway(body: &mut ContainerCreateBody, command: Vec<String>) {
    body.entrypoint = Some(command);
}

/// An allowlist sandbox's holder (its gateway) gets the gateway's own memory and task limits;
/// every other container keeps the request's.
pub(super) fn with_gateway_budget(
    mut host: HostConfig,
    kind: NetworkKind,
    role: Role,
) -> HostConfig {
    if kind == NetworkKind::Allowlist && role == Role::Holder {
        host.memory = Some(GATEWAY_MEMORY_BYTES as i64);
        host.memory_swap = Some(GATEWAY_MEMORY_BYTES as i64);
        host.pids_limit = Some(GATEWAY_PIDS as i64);
    }
    host
}

/// The sandbox's effective policy from its gateway holder's read-back (`read`): the holder must
/// hold exactly the gateway's budget and the guest's CPU share; the guest's own memory and task
/// limits are the request's, read back on the guest's container when it is made (a process
/// start refuses any other).
pub(super) fn guest_policy_from_gateway(
    read: SandboxEffectivePolicy,
    asked: &Resources,
) -> Result<SandboxEffectivePolicy, OwnerError> {
    let held = &read.resources;
    if held.memory_bytes != GATEWAY_MEMORY_BYTES
        || held.pids != GATEWAY_PIDS
        || held.cpus != asked.cpus
    {
        return Err(OwnerError::Unsupported(format!(
            "the engine did not apply the egress gateway's budget: memory {} bytes, pids {}, cpus {} instead of {GATEWAY_MEMORY_BYTES}, {GATEWAY_PIDS} and {}",
            held.memory_bytes, held.pids, held.cpus, asked.cpus
        )));
    }
    Ok(SandboxEffectivePolicy {
        resources: *asked,
        ..read
    })
}

/// Makes the gateway the guest's only resolver: a lookup it does not answer never leaves the
/// sandbox's internal network. Nothing of the host's resolver settings reaches the guest: the
/// engine copies the host's search domains and options when none are given. `.` is the
/// engine's word for no search domain. The one option is glibc's and musl's default timeout,
/// not `ndots`: an `ndots` of the container's own makes the engine's embedded resolver answer
/// dotless names itself instead of asking the gateway; without one it adds its `ndots:0`.
pub(super) fn resolved_by(host: &mut HostConfig, gateway: String) {
    host.dns = Some(vec![gateway]);
    host.dns_search = Some(vec![".".to_owned()]);
    host.dns_options = Some(vec!["timeout:5".to_owned()]);
}

/// The namespaced sysctls of an allowlist sandbox's containers, read back with the rest of the
/// hardening: no IPv6 at all (the internal network is IPv4 only, and link-local IPv6 must not
/// reach the host), and for the gateway no forwarding between its networks and the low ports
/// bindable by the sandbox user (no capability is added).
pub(super) fn with_network_sysctls(
    mut host: HostConfig,
    kind: NetworkKind,
    role: Role,
) -> HostConfig {
    if kind != NetworkKind::Allowlist {
        return host;
    }
    let mut sysctls = HashMap::from([
        ("net.ipv6.conf.all.disable_ipv6".to_owned(), "1".to_owned()),
        (
            "net.ipv6.conf.default.disable_ipv6".to_owned(),
            "1".to_owned(),
        ),
    ]);
    if role == Role::Holder {
        sysctls.insert(
            "net.ipv4.ip_unprivileged_port_start".to_owned(),
            "0".to_owned(),
        );
        sysctls.insert("net.ipv4.ip_forward".to_owned(), "0".to_owned());
    }
    host.sysctls = Some(sysctls);
    host
}

/// The subnet and host address of the internal network, as the engine's inspection right
/// after its creation reports them.
pub(super) fn internal_network(inspect: &NetworkInspect) -> Result<InternalNetwork, OwnerError> {
    if inspect.internal != Some(true) {
        return Err(OwnerError::Unsupported(
            "the engine did not make the sandbox network internal".into(),
        ));
    }
    // The host must hold no address on the internal network (else the guest reaches the host's
    // services directly, past the gateway): the option that asks for it is read back, and an
    // engine that did not keep it is refused before any container exists.
    let inhibited = inspect
        .options
        .as_ref()
        .and_then(|options| options.get(super::INHIBIT_HOST_ADDRESS));
    if inhibited.map(String::as_str) != Some("true") {
        return Err(OwnerError::Unsupported(format!(
            "the engine did not apply the sandbox hardening: network option {} is {} instead of \"true\" (the host would have an address on the sandbox's internal network)",
            super::INHIBIT_HOST_ADDRESS,
            inhibited.map_or_else(|| "absent".to_owned(), |value| format!("{value:?}")),
        )));
    }
    let config = inspect
        .ipam
        .clone()
        .and_then(|ipam| ipam.config)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.subnet.as_deref().is_some_and(|s| s.contains('.')));
    let Some(subnet) = config.as_ref().and_then(|c| c.subnet.clone()) else {
        return Err(OwnerError::driver(
            "the engine assigned the sandbox network no IPv4 subnet",
        ));
    };
    Ok(InternalNetwork {
        subnet,
        host_address: config
            .and_then(|c| c.gateway)
            .map(|g| strip_prefix_length(&g)),
    })
}

/// The engine host's addresses the gateway refuses like private ones: its gateways on the
/// upstream network `name`, and every public address of this host when the engine runs here,
/// or those of the engine's endpoint when it runs elsewhere (`host_addresses.rs`); read as the
/// sandbox starts (`gateway_command` passes each once).
pub(super) async fn host_addresses(
    docker: &Docker,
    name: &str,
    dialer: &Dialer,
) -> Result<Vec<String>, OwnerError> {
    let inspect = docker
        .inspect_network(name, None)
        .await
        .map_err(|e| engine_error(&format!("inspecting the egress network {name}"), e))?;
    let mut addresses: Vec<String> = inspect
        .ipam
        .and_then(|ipam| ipam.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.gateway)
        .map(|g| strip_prefix_length(&g))
        .filter(|g| g.parse::<std::net::Ipv4Addr>().is_ok())
        .collect();
    addresses.extend(
        crate::docker::host_addresses::of_engine_host(dialer)
            .await?
            .iter()
            .map(ToString::to_string),
    );
    Ok(addresses)
}

fn strip_prefix_length(address: &str) -> String {
    address.split('/').next().unwrap_or_default().to_owned()
}

impl DockerSandbox {
    /// Joins the created gateway to the upstream network, starts it and waits until it serves;
    /// returns its address on the internal network (the guest's resolver). All of it within
    /// `READY_WAIT` and cancellable.
    pub(super) async fn start_gateway(
        &self,
        holder: &str,
        internal: &str,
        cancel: &Cancel,
    ) -> Result<String, OwnerError> {
        let started = tokio::time::timeout(READY_WAIT, self.serving_gateway(holder, internal));
        tokio::select! {
            outcome = started => outcome.unwrap_or_else(|_| {
                Err(OwnerError::driver(format!(
                    "the egress gateway did not serve within {} s",
                    READY_WAIT.as_secs()
                )))
            }),
            reason = cancel.cancelled() => Err(reason),
        }
    }

    async fn serving_gateway(&self, holder: &str, internal: &str) -> Result<String, OwnerError> {
        let docker = &self.settings.docker;
        let upstream = &self.settings.egress.network;
        docker
            .connect_network(
                upstream,
                NetworkConnectRequest {
                    container: holder.to_owned(),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| {
                engine_error(
                    &format!("joining the gateway to the egress network {upstream}"),
                    e,
                )
            })?;
        // Its output is read from before it starts, for the sandbox's life: the `none` log
        // driver keeps nothing, and its last stderr is why it stopped.
        let attached = attach_streams(&self.settings.dialer, holder)
            .await
            .map_err(|e| attach_error("the egress gateway", &e))?;
        let listener = listen(attached, Arc::clone(&self.gateway_words));
        *self
            .gateway_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(listener);
        docker
            .start_container(holder, None)
            .await
            .map_err(|e| engine_error("starting the egress gateway", e))?;
        loop {
            let inspect = docker
                .inspect_container(holder, None)
                .await
                .map_err(|e| engine_error("inspecting the egress gateway", e))?;
            if let Some(gone) = stopped(inspect.state.as_ref(), &self.gateway_words) {
                // Its last words may still be on their way: a moment for them.
                tokio::time::sleep(READY_POLL).await;
                let gone = stopped(inspect.state.as_ref(), &self.gateway_words).unwrap_or(gone);
                return Err(OwnerError::driver(gone.to_string()));
            }
            if let Ok(Some(_)) = self.read_report(holder).await {
                return address_on(&inspect, internal).ok_or_else(|| {
                    OwnerError::driver("the egress gateway has no address on the sandbox network")
                });
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// What the gateway has counted: `None` before it serves. Within `READY_WAIT`.
    pub(super) async fn read_report(
        &self,
        holder: &str,
    ) -> Result<Option<EgressReport>, OwnerError> {
        tokio::time::timeout(READY_WAIT, self.ask_report(holder))
            .await
            .unwrap_or_else(|_| {
                Err(OwnerError::driver(format!(
                    "the egress gateway did not report within {} s",
                    READY_WAIT.as_secs()
                )))
            })
    }

    /// How the gateway ended, or `None` while it runs (an inspection that fails says nothing).
    pub(super) async fn gateway_stopped(&self, holder: &str) -> Option<GatewayStopped> {
        let inspect = self
            .settings
            .docker
            .inspect_container(holder, None)
            .await
            .ok()?;
        stopped(inspect.state.as_ref(), &self.gateway_words)
    }

    /// `dockerSandboxEgress`: the gateway's report, kept as the last one read; once the gateway
    /// is gone, that last report (or none counted) with how it ended.
    pub(super) async fn egress_report(
        &self,
        holder: &str,
    ) -> Result<Option<EgressReport>, OwnerError> {
        let read = self.read_report(holder).await;
        if let Ok(Some(report)) = &read {
            *self
                .last_report
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(report.clone());
            return read;
        }
        match self.gateway_stopped(holder).await {
            Some(gone) => {
                let mut report = self
                    .last_report
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
                    .unwrap_or_default();
                report.stopped = Some(gone);
                Ok(Some(report))
            }
            None => read,
        }
    }

    async fn ask_report(&self, holder: &str) -> Result<Option<EgressReport>, OwnerError> {
        let run = run_mode(
            &self.settings.docker,
            holder,
            &self.settings.user,
            &["--egress-report"],
            REPORT_BYTES,
        )
        .await
        .map_err(|why| {
            OwnerError::driver(format!("asking the egress gateway for its report: {why}"))
        })?;
        if run.code != 0 {
            let said = String::from_utf8_lossy(&run.stderr);
            if said.contains("not serving") {
                return Ok(None);
            }
            return Err(OwnerError::driver(format!(
                "the egress report failed (exit status {}): {}",
                run.code,
                said.trim()
            )));
        }
        EgressReport::from_json(&run.stdout)
            .map(Some)
            .map_err(|e| OwnerError::driver(format!("the egress report is unreadable: {e}")))
    }
}

fn address_on(inspect: &ContainerInspectResponse, network: &str) -> Option<String> {
    let networks = inspect.network_settings.as_ref()?.networks.as_ref()?;
    networks
        .get(network)
        .and_then(|endpoint| endpoint.ip_address.clone())
        .filter(|address| !address.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{Ipam, IpamConfig};

    #[test]
    fn the_gateway_holder_has_its_own_budget_and_the_guest_keeps_the_requests() {
        let asked = HostConfig {
            memory: Some(64 << 20),
            memory_swap: Some(64 << 20),
            pids_limit: Some(24),
            nano_cpus: Some(500_000_000),
            ..Default::default()
        };
        let holder = with_gateway_budget(asked.clone(), NetworkKind::Allowlist, Role::Holder);
        assert_eq!(holder.memory, Some(GATEWAY_MEMORY_BYTES as i64));
        assert_eq!(holder.memory_swap, Some(GATEWAY_MEMORY_BYTES as i64));
        assert_eq!(holder.pids_limit, Some(GATEWAY_PIDS as i64));
        assert_eq!(
            holder.nano_cpus, asked.nano_cpus,
            "the CPU share stays the guest's"
        );
        for (kind, role) in [
            (NetworkKind::Allowlist, Role::Compute),
            (NetworkKind::Outbound, Role::Holder),
            (NetworkKind::Isolated, Role::Holder),
        ] {
            assert_eq!(with_gateway_budget(asked.clone(), kind, role), asked);
        }
    }

    #[test]
    fn the_guests_policy_comes_from_a_holder_read_back_with_exactly_the_gateways_budget() {
        let asked = Resources {
            cpus: 0.5,
            memory_bytes: 64 << 20,
            pids: 24,
        };
        let read = |memory_bytes, pids, cpus| SandboxEffectivePolicy {
            resources: Resources {
                cpus,
                memory_bytes,
                pids,
            },
            temporary_storage: crate::policy::resources::TemporaryStorage {
                home_bytes: 1 << 20,
                temp_bytes: 1 << 20,
            },
            network: crate::policy::network::NetworkPolicy::of(NetworkKind::Isolated),
            workspace_disk_quota: crate::policy::effective::EffectiveDiskQuota::NotRequested,
        };
        let guest =
            guest_policy_from_gateway(read(GATEWAY_MEMORY_BYTES, GATEWAY_PIDS, 0.5), &asked)
                .ok()
                .map(|policy| policy.resources);
        assert_eq!(guest, Some(asked));
        for wrong in [
            read(64 << 20, GATEWAY_PIDS, 0.5),
            read(GATEWAY_MEMORY_BYTES, 24, 0.5),
            read(GATEWAY_MEMORY_BYTES, GATEWAY_PIDS, 1.0),
        ] {
            let refused = guest_policy_from_gateway(wrong, &asked)
                .err()
                .map(|e| e.to_string());
            assert!(
                refused
                    .as_deref()
                    .is_some_and(|m| m.contains("gateway's budget")),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn an_internal_network_without_the_host_address_inhibited_is_refused() {
        let mut inspect = NetworkInspect {
            internal: Some(true),
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some("10.9.0.0/24".into()),
                    gateway: Some("10.9.0.1".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let refused = internal_network(&inspect).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|m| m.contains("inhibit_ipv4 is absent")),
            "{refused:?}"
        );
        for value in ["false", ""] {
            inspect.options = Some(HashMap::from([(
                super::super::INHIBIT_HOST_ADDRESS.to_owned(),
                value.to_owned(),
            )]));
            assert!(internal_network(&inspect).is_err(), "{value:?} accepted");
        }
        inspect.options = Some(HashMap::from([(
            super::super::INHIBIT_HOST_ADDRESS.to_owned(),
            "true".to_owned(),
        )]));
        let network = internal_network(&inspect).ok().map(|n| n.subnet);
        assert_eq!(network.as_deref(), Some("10.9.0.0/24"));
    }

    #[test]
    fn the_guest_asks_the_gateway_with_no_search_domain_and_no_ndots_of_its_own() {
        let mut host = HostConfig::default();
        resolved_by(&mut host, "10.9.0.2".to_owned());
        assert_eq!(host.dns, Some(vec!["10.9.0.2".to_owned()]));
        // Empty lists would be the host's search domains and options.
        assert_eq!(host.dns_search, Some(vec![".".to_owned()]));
        let options = host.dns_options.unwrap_or_default();
        assert!(!options.is_empty());
        assert!(
            options.iter().all(|o| !o.starts_with("ndots")),
            "{options:?}"
        );
    }
}
