//! Why the helper stopped: an operation that failed (exit status 2), or a request or archive it
//! refuses (exit status 4). Either message names the path or field at fault.

pub enum Failure {
    Io(String),
    Refused(String),
}
