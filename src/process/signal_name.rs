//! Signal numbers as Linux names them, for exit receipts from any source (the engine's exit
//! code, the supervisor's wait status).

/// The conventional name of signal `n` on Linux.
pub fn signal_name(n: i64) -> String {
    let name = match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        // glibc keeps 32 and 33 for itself; the real-time range is named as `kill -l` names it.
        34 => "SIGRTMIN",
        64 => "SIGRTMAX",
        other @ 35..=63 => return format!("SIGRTMIN+{}", other - 34),
        other => return format!("SIG{other}"),
    };
    name.to_owned()
}

/// The Linux number of the signal `signal_name` calls `name` (so a guest's exit can be told as a
/// shell tells it, 128 + n); `None` for a name it never gives.
pub fn signal_number(name: &str) -> Option<i64> {
    (1..=64).find(|&n| signal_name(n) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_maps_back_to_its_number() {
        for n in 1..=64 {
            if n == 32 || n == 33 {
                continue;
            }
            assert_eq!(signal_number(&signal_name(n)), Some(n), "{n}");
        }
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("SIGRTMIN+3"), Some(37));
        assert_eq!(signal_number("SIGNOPE"), None);
        assert_eq!(signal_number("SIG99"), None);
    }
}
