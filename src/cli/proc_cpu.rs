//! CPU time of other processes on this machine, from `/proc/<pid>/stat` (Linux): what
//! `bench concurrent --store postgres://…` adds to its line for the work its own process does not
//! do — its `--workers`' and, when the database runs on this machine, the PostgreSQL server's.
//! Elsewhere (no `/proc`) every figure is `None` and the line says nothing of them.

use std::collections::HashMap;
use std::time::Duration;

/// User and system CPU time process `pid` has used, or `None` when it cannot be read (gone, or no
/// `/proc`).
pub(crate) fn of_process(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// `utime + stime` of one `/proc/<pid>/stat` line (fields 14 and 15; the command name, field 2,
/// is in parentheses and may hold spaces and parentheses of its own, so fields are counted from
/// its last `)`).
fn parse_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(ticks(utime + stime))
}

fn ticks(n: u64) -> Duration {
    // SAFETY: sysconf reads a constant of the system.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_sec = u64::try_from(per_sec)
        .ok()
        .filter(|&t| t > 0)
        .unwrap_or(100);
    Duration::from_nanos(n.saturating_mul(1_000_000_000) / per_sec)
}

/// The CPU time of every process named `name` (its `comm`, as `postgres` names the server's
/// processes), by pid.
pub(crate) fn by_name(name: &str) -> HashMap<u32, Duration> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (comm.trim_end() == name).then_some(())?;
        Some((pid, of_process(pid)?))
    })
    .collect()
}

/// The CPU time processes used between two [`by_name`] readings: each one's growth, and all of a
/// process that started meanwhile (one that ended meanwhile is not counted).
pub(crate) fn used_between(
    before: &HashMap<u32, Duration>,
    after: &HashMap<u32, Duration>,
) -> Duration {
    after
        .iter()
        .map(|(pid, now)| now.saturating_sub(before.get(pid).copied().unwrap_or_default()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_user_plus_system_time_whatever_the_command_name_holds() {
        let line = "4242 (post gres) x)) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 \
                    100 1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some(ticks(300)));
        assert_eq!(parse_stat("4242 (truncated"), None);
    }

    #[test]
    fn this_process_has_used_cpu_and_a_process_that_started_meanwhile_counts_whole() {
        assert!(of_process(std::process::id()).is_some());
        let before = HashMap::from([(1, Duration::from_millis(10))]);
        let after = HashMap::from([
            (1, Duration::from_millis(25)),
            (2, Duration::from_millis(7)),
        ]);
        assert_eq!(used_between(&before, &after), Duration::from_millis(22));
    }
}
