//! Processes as `/proc` shows them (Linux).

use std::path::Path;

/// The state of process `pid`, the letter `/proc/<pid>/stat` shows (`R`
/// running, `S` sleeping, `T` stopped once a `SIGSTOP` took effect, `Z` a
/// zombie, …), or `None` when there is no such process.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis (the command may hold one).
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// True while a process with this pid exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    state(pid).is_some_and(|s| s != 'Z')
}

/// One live (not zombie) process, as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Its id.
    pub pid: i32,
    /// Its parent's id.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// The command line, arguments joined by spaces.
    pub cmdline: String,
}

/// Every live (not zombie) process.
pub fn live_processes() -> Vec<Proc> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp, …
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<i32>().ok());
        let (Some(state), Some(ppid), Some(pgrp)) = (fields.first(), number(1), number(2)) else {
            continue;
        };
        if *state == "Z" {
            continue;
        }
        let raw = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push(Proc {
            pid,
            ppid,
            pgrp,
            cmdline: String::from_utf8_lossy(&raw).replace('\0', " "),
        });
    }
    found
}

/// The live (not zombie) processes of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    live_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// The pids a fixture recorded in its pid file.
pub fn recorded_pids(file: &Path) -> Vec<i32> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("cannot read {}: {e}", file.display()),
    };
    text.lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|_| panic!("not a pid in {}: {l:?}", file.display()))
        })
        .collect()
}

/// Live processes whose command line mentions `needle` (for example a
/// project's temporary directory), as `(pid, command line)`.
pub fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    live_processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(needle))
        .map(|p| (p.pid, p.cmdline))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_in_its_group() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        let group = live_processes()
            .into_iter()
            .find(|p| p.pid == me)
            .map(|p| p.pgrp)
            .unwrap();
        assert!(group_members(group).contains(&me));
        assert!(!alive(-1) && state(-1).is_none());
    }

    #[test]
    fn a_stopped_process_shows_t_and_a_reaped_one_is_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let kill = |signal: &str| {
            let status = std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "kill {signal} {pid}");
        };
        kill("-STOP");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while state(pid) != Some('T') {
            assert!(std::time::Instant::now() < deadline, "{:?}", state(pid));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(alive(pid), "stopped is alive");
        kill("-KILL");
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn recorded_pids_reads_one_per_line_and_nothing_from_no_file() {
        let dir = std::env::temp_dir().join(format!("e2e-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pids");
        assert_eq!(recorded_pids(&file), Vec::<i32>::new());
        std::fs::write(&file, "12\n 34\n").unwrap();
        assert_eq!(recorded_pids(&file), [12, 34]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
