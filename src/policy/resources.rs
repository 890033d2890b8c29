//! Compute and temporary-storage amounts: the part of a policy that requests and observations share.

use crate::input::read::{object, positive_integer, positive_number};
use crate::input::{IssueCode, Issues, Seg, ToValue, Value};

/// The smallest CPU share an engine can express (one nano-CPU).
const CPUS_RESOLUTION: f64 = 1e-9;
/// More CPUs than any host has; also keeps `cpus * 1e9` an exact integer.
const CPUS_MAX: f64 = 1_000_000.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resources {
    pub cpus: f64,
    pub memory_bytes: u64,
    pub pids: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemporaryStorage {
    pub home_bytes: u64,
    pub temp_bytes: u64,
}

pub fn resources(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<Resources> {
    let mut fields = object(value, path, issues)?;
    let cpus = fields
        .required("cpus", issues)
        .and_then(|v| cpus(v, &fields.at("cpus"), issues));
    let memory_bytes = fields
        .required("memoryBytes", issues)
        .and_then(|v| positive_integer(v, &fields.at("memoryBytes"), issues));
    let pids = fields
        .required("pids", issues)
        .and_then(|v| positive_integer(v, &fields.at("pids"), issues));
    fields.finish(issues);
    Some(Resources {
        cpus: cpus?,
        memory_bytes: memory_bytes?,
        pids: pids?,
    })
}

fn cpus(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<f64> {
    let n = positive_number(value, path, issues)?;
    if n < CPUS_RESOLUTION {
        issues.add(
            IssueCode::TooSmall,
            path,
            format!("must be at least {CPUS_RESOLUTION} (one nano-CPU), received {n}"),
        );
        return None;
    }
    if n > CPUS_MAX {
        issues.add(
            IssueCode::TooLarge,
            path,
            format!("must be at most {CPUS_MAX}, received {n}"),
        );
        return None;
    }
    Some(n)
}

pub fn temporary_storage(
    value: &Value,
    path: &[Seg],
    issues: &mut Issues,
) -> Option<TemporaryStorage> {
    let mut fields = object(value, path, issues)?;
    let home_bytes = fields
        .required("homeBytes", issues)
        .and_then(|v| positive_integer(v, &fields.at("homeBytes"), issues));
    let temp_bytes = fields
        .required("tempBytes", issues)
        .and_then(|v| positive_integer(v, &fields.at("tempBytes"), issues));
    fields.finish(issues);
    Some(TemporaryStorage {
        home_bytes: home_bytes?,
        temp_bytes: temp_bytes?,
    })
}

impl ToValue for Resources {
    fn to_value(&self) -> Value {
        Value::object([
            ("cpus", Value::Number(self.cpus)),
            ("memoryBytes", self.memory_bytes.to_value()),
            ("pids", self.pids.to_value()),
        ])
    }
}

impl ToValue for TemporaryStorage {
    fn to_value(&self) -> Value {
        Value::object([
            ("homeBytes", self.home_bytes.to_value()),
            ("tempBytes", self.temp_bytes.to_value()),
        ])
    }
}
