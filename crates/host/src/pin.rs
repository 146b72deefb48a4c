//! Tool pinning, applied: `mcp.lock` read, checked against what each server
//! lists, new tools recorded, and `trust` rewriting pins on request.
//!
//! The format, the hashes and the diffs are `core_agent_mcp_policy::Lock`'s;
//! this module does the file I/O and decides when to write. A tool seen for
//! the first time is pinned at once; a changed tool is never re-pinned
//! without [`crate::Host::trust`]. An unreadable lock is never overwritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use core_agent_mcp_config::PinMode;
use core_agent_mcp_policy::{Change, Lock, ToolDefinition, Verdict, Verdicts};
use core_agent_mcp_transport::model::Tool;
use serde::Serialize;
use serde_json::Value;

/// The pinned parts of a tool as a server listed it.
pub(crate) fn definition(tool: &Tool) -> ToolDefinition {
    ToolDefinition::new(
        tool.name.to_string(),
        tool.description.as_deref().unwrap_or_default(),
        Value::Object((*tool.input_schema).clone()),
        tool.annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .unwrap_or(Value::Null),
    )
}

/// Reads the lock at `path`: an absent file is an empty lock; a file that
/// cannot be read or parsed is an error naming the file, the position and
/// the fix.
pub(crate) fn read(path: &Path) -> Result<Lock, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lock::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    Lock::parse(&text).map_err(|e| {
        format!(
            "{}:{}:{}: {}; fix it (a merge conflict?) or delete it to pin every tool again as new",
            path.display(),
            e.line,
            e.column,
            e.message
        )
    })
}

/// Writes `lock` to `path` (creating its directory): into a temporary file
/// beside it, then renamed over it, so a reader never sees half a lock.
pub(crate) fn write(path: &Path, lock: &Lock) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, lock.render()).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// An exclusive advisory lock on the directory holding the lock file (the
/// agents dir), held while alive: two core-agent processes pinning at once
/// (a `serve` and a `call`) read, pin and write one after the other, so
/// neither loses the other's new pins. `None` when the directory does not
/// exist yet (nothing to lose) or cannot be locked (then pinning goes on
/// unguarded, as before).
fn exclusive(path: &Path) -> Option<std::fs::File> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let handle = std::fs::File::open(dir).ok()?;
    handle.lock().ok()?;
    Some(handle)
}

/// One server's listing, as pinning sees it.
pub(crate) struct Listed<'a> {
    pub(crate) server: &'a str,
    pub(crate) mode: PinMode,
    pub(crate) tools: Vec<ToolDefinition>,
}

/// Where the pins are: `mcp.lock` at a path, or a lock shared by the
/// processes of a fleet ([`PinStore`]).
#[derive(Clone, Copy)]
pub(crate) enum Pins<'a> {
    File(&'a Path),
    Shared(&'a dyn PinStore),
}

/// How many times an edit of the shared lock is tried again when another
/// process wrote it in between.
const SHARED_TRIES: usize = 8;

impl Pins<'_> {
    /// The lock (empty when there is none yet).
    fn read(self) -> Result<Lock, String> {
        match self {
            Pins::File(path) => read(path),
            Pins::Shared(store) => Ok(shared_read(store)?.0),
        }
    }

    /// Reads the lock, lets `edit` change it, and writes it when `edit`
    /// says it changed, with no other process editing in between. `Err`
    /// when the lock cannot be read; the second value is why it could not
    /// be written.
    fn edit<T>(
        self,
        mut edit: impl FnMut(&mut Lock) -> (T, bool),
    ) -> Result<(T, Option<String>), String> {
        match self {
            Pins::File(path) => {
                let _exclusive = exclusive(path);
                let mut lock = read(path)?;
                let (out, changed) = edit(&mut lock);
                let problem = if changed {
                    write(path, &lock).err()
                } else {
                    None
                };
                Ok((out, problem))
            }
            Pins::Shared(store) => {
                let mut last = None;
                for _ in 0..SHARED_TRIES {
                    let (mut lock, version) = shared_read(store)?;
                    let (out, changed) = edit(&mut lock);
                    if !changed {
                        return Ok((out, None));
                    }
                    match store.store(&lock.render(), version) {
                        Ok(true) => return Ok((out, None)),
                        Ok(false) => last = Some(out),
                        Err(e) => {
                            return Ok((out, Some(format!("cannot write the shared pins: {e}"))));
                        }
                    }
                }
                let out = last.ok_or_else(|| "the shared pins could not be edited".to_owned())?;
                Ok((
                    out,
                    Some(format!(
                        "the shared pins changed under every one of {SHARED_TRIES} tries; the next catalog build tries again"
                    )),
                ))
            }
        }
    }
}

/// The shared lock and its version.
fn shared_read(store: &dyn PinStore) -> Result<(Lock, Option<u64>), String> {
    match store.load() {
        Ok(None) => Ok((Lock::new(), None)),
        Ok(Some((text, version))) => Lock::parse(&text)
            .map(|lock| (lock, Some(version)))
            .map_err(|e| {
                format!(
                    "the shared pins do not parse ({}:{}: {}); fix them or delete them to pin every tool again as new",
                    e.line, e.column, e.message
                )
            }),
        Err(e) => Err(format!("cannot read the shared pins: {e}")),
    }
}

/// Where a fleet of processes keeps one `mcp.lock` for all of them
/// ([`crate::HostOptions::with_pins`]): a tool first seen by any of them is
/// pinned once, and a changed tool accepted through one ([`crate::Host::trust`])
/// is accepted for all. Writes are compare-and-swap on a version, so two
/// processes pinning at once take turns without losing either's pins.
pub trait PinStore: Send + Sync + std::fmt::Debug {
    /// The lock's text and its version, `None` when there is no lock yet.
    fn load(&self) -> Result<Option<(String, u64)>, PinStoreError>;
    /// Replaces the lock with `text` when it is still at `version` (`None`:
    /// still absent): `false`, and nothing written, when another process
    /// wrote it first.
    fn store(&self, text: &str, version: Option<u64>) -> Result<bool, PinStoreError>;
}

/// Why a [`PinStore`] could not answer.
pub type PinStoreError = Box<dyn std::error::Error + Send + Sync>;

/// Every listed tool's verdict against `lock` (`Unverified` without one),
/// pinning the new ones in it; whether that changed it.
fn verdicts_of(mut lock: Option<&mut Lock>, listed: &[Listed<'_>]) -> (Verdicts, bool) {
    let mut verdicts = Verdicts::new();
    let mut changed = false;
    for server in listed.iter().filter(|l| l.mode != PinMode::Off) {
        let of_server = verdicts.entry(server.server.to_owned()).or_default();
        for tool in &server.tools {
            let verdict = match &mut lock {
                None => Verdict::Unverified,
                Some(lock) => {
                    let verdict = lock.check(server.server, tool);
                    if verdict == Verdict::New {
                        changed |= lock.pin(server.server, tool);
                    }
                    verdict
                }
            };
            of_server.insert(tool.name.clone(), verdict);
        }
    }
    (verdicts, changed)
}

/// Checks every listed tool against the pins, pins the new ones and writes
/// the lock if that changed it. Returns the verdicts and, when the lock
/// could not be read or written, why (the verdicts are then `Unverified`
/// when it could not be read).
pub(crate) fn check(pins: Pins<'_>, listed: &[Listed<'_>]) -> (Verdicts, Option<String>) {
    // The directory is made first, so two processes pinning into a fresh
    // project take turns too (the lock lives on it).
    if let Pins::File(path) = pins
        && listed
            .iter()
            .any(|l| l.mode != PinMode::Off && !l.tools.is_empty())
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        let _ = std::fs::create_dir_all(dir);
    }
    match pins.edit(|lock| verdicts_of(Some(lock), listed)) {
        Ok((verdicts, problem)) => (verdicts, problem),
        Err(problem) => (verdicts_of(None, listed).0, Some(problem)),
    }
}

/// The verdicts of `server`'s `tools` against the pins, without pinning or
/// writing anything (`Unverified` when they cannot be read).
pub(crate) fn peek(pins: Pins<'_>, server: &str, tools: &[ToolDefinition]) -> Verdicts {
    let lock = pins.read().ok();
    let of_server = tools
        .iter()
        .map(|t| {
            let verdict = lock
                .as_ref()
                .map_or(Verdict::Unverified, |lock| lock.check(server, t));
            (t.name.clone(), verdict)
        })
        .collect();
    [(server.to_owned(), of_server)].into_iter().collect()
}

/// What `trust` did to one tool's pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trusted {
    /// The server's own name for the tool.
    pub tool: String,
    /// `new` (pinned for the first time), `changed` (its pin replaced),
    /// `unchanged`, or `removed` (pinned, but the server no longer lists it).
    pub status: &'static str,
    /// For `changed`: what changed, as the warning said it.
    pub change: Option<String>,
}

/// Pins `tools` (what `server` lists now) in the pins: only
/// `only` when given, else every tool, dropping the pins of tools the
/// server no longer lists. Returns what happened to each pin, sorted by tool.
pub(crate) fn trust(
    pins: Pins<'_>,
    server: &str,
    tools: &[ToolDefinition],
    only: Option<&str>,
) -> Result<Vec<Trusted>, String> {
    if let Pins::File(path) = pins
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let (report, problem) = pins.edit(|lock| (accept(lock, server, tools, only), true))?;
    match problem {
        Some(problem) => Err(problem),
        None => Ok(report),
    }
}

/// Pins `tools` of `server` in `lock` (see [`trust`]).
fn accept(
    lock: &mut Lock,
    server: &str,
    tools: &[ToolDefinition],
    only: Option<&str>,
) -> Vec<Trusted> {
    let mut report: BTreeMap<String, Trusted> = BTreeMap::new();
    for tool in tools.iter().filter(|t| only.is_none_or(|o| o == t.name)) {
        let (status, change) = match lock.check(server, tool) {
            Verdict::New => ("new", None),
            Verdict::Pinned => ("unchanged", None),
            Verdict::Changed(c) => ("changed", Some(c)),
            Verdict::Unverified => ("unchanged", None),
        };
        lock.pin(server, tool);
        report.insert(
            tool.name.clone(),
            Trusted {
                tool: tool.name.clone(),
                status,
                change: change.as_ref().map(Change::to_string),
            },
        );
    }
    if only.is_none() {
        let listed: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let gone: Vec<String> = lock
            .tools(server)
            .into_iter()
            .filter(|t| !listed.contains(t))
            .map(str::to_owned)
            .collect();
        for tool in gone {
            lock.unpin(server, &tool);
            report.insert(
                tool.clone(),
                Trusted {
                    tool,
                    status: "removed",
                    change: None,
                },
            );
        }
    }
    report.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, description: &str) -> ToolDefinition {
        ToolDefinition::new(name, description, json!({"type": "object"}), Value::Null)
    }

    /// A shared lock in memory, whose first write loses to another
    /// process that pins `other` in between.
    #[derive(Debug, Default)]
    struct Racy {
        lock: std::sync::Mutex<Option<(String, u64)>>,
        raced: std::sync::atomic::AtomicBool,
    }

    impl PinStore for Racy {
        fn load(&self) -> Result<Option<(String, u64)>, PinStoreError> {
            Ok(self.lock.lock().unwrap().clone())
        }

        fn store(&self, text: &str, version: Option<u64>) -> Result<bool, PinStoreError> {
            let mut slot = self.lock.lock().unwrap();
            if !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let mut theirs = Lock::new();
                theirs.pin("fx", &def("other", "Theirs."));
                *slot = Some((theirs.render(), 1));
                return Ok(false);
            }
            if slot.as_ref().map(|(_, v)| *v) != version {
                return Ok(false);
            }
            *slot = Some((text.to_owned(), version.map_or(1, |v| v + 1)));
            Ok(true)
        }
    }

    #[test]
    fn shared_pins_take_turns_with_another_process_and_lose_nothing() {
        let store = Racy::default();
        let pins = Pins::Shared(&store);
        let listed = [Listed {
            server: "fx",
            mode: PinMode::Strict,
            tools: vec![def("a", "A.")],
        }];
        let (v, problem) = check(pins, &listed);
        assert_eq!((v["fx"]["a"].clone(), problem), (Verdict::New, None));
        let lock = pins.read().unwrap();
        assert!(lock.pinned("fx", "a").is_some(), "ours");
        assert!(lock.pinned("fx", "other").is_some(), "theirs, kept");
        // A changed tool is refused until trusted, through any process.
        let changed = [Listed {
            server: "fx",
            mode: PinMode::Strict,
            tools: vec![def("a", "A, changed.")],
        }];
        assert!(matches!(
            check(pins, &changed).0["fx"]["a"],
            Verdict::Changed(_)
        ));
        let report = trust(pins, "fx", &[def("a", "A, changed.")], Some("a")).unwrap();
        assert_eq!(report[0].status, "changed");
        assert_eq!(check(pins, &changed).0["fx"]["a"], Verdict::Pinned);
        assert_eq!(
            peek(pins, "fx", &[def("a", "A, changed.")])["fx"]["a"],
            Verdict::Pinned
        );
    }

    #[test]
    fn new_tools_are_written_changed_ones_never_until_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".agents/mcp.lock");
        let listed = |tools: Vec<ToolDefinition>, mode| {
            vec![Listed {
                server: "fx",
                mode,
                tools,
            }]
        };
        let (v, problem) = check(
            Pins::File(&path),
            &listed(vec![def("a", "A.")], PinMode::Warn),
        );
        assert_eq!((v["fx"]["a"].clone(), problem), (Verdict::New, None));
        let first = std::fs::read_to_string(&path).unwrap();
        let (v, _) = check(
            Pins::File(&path),
            &listed(
                vec![def("a", "A, changed."), def("b", "B.")],
                PinMode::Strict,
            ),
        );
        assert!(matches!(v["fx"]["a"], Verdict::Changed(_)));
        assert_eq!(v["fx"]["b"], Verdict::New);
        let lock = read(&path).unwrap();
        assert_eq!(lock.pinned("fx", "a").unwrap().description, "A.");
        assert!(lock.pinned("fx", "b").is_some());
        assert_ne!(std::fs::read_to_string(&path).unwrap(), first);
        // `off` neither checks nor records.
        let (v, _) = check(
            Pins::File(&path),
            &listed(vec![def("c", "C.")], PinMode::Off),
        );
        assert!(v.is_empty());
        assert!(read(&path).unwrap().pinned("fx", "c").is_none());

        let report = trust(Pins::File(&path), "fx", &[def("a", "A, changed.")], None).unwrap();
        let statuses: Vec<(&str, &str)> =
            report.iter().map(|t| (t.tool.as_str(), t.status)).collect();
        assert_eq!(statuses, [("a", "changed"), ("b", "removed")]);
        let (v, _) = check(
            Pins::File(&path),
            &listed(vec![def("a", "A, changed.")], PinMode::Strict),
        );
        assert_eq!(v["fx"]["a"], Verdict::Pinned);
    }

    #[test]
    fn pinners_at_once_lose_none_of_each_others_pins() {
        // A fresh project: not even the agents directory exists yet.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".agents/mcp.lock");
        let servers: Vec<String> = (0..16).map(|i| format!("s{i}")).collect();
        let start = std::sync::Barrier::new(servers.len());
        std::thread::scope(|scope| {
            for server in &servers {
                let (path, start) = (&path, &start);
                scope.spawn(move || {
                    start.wait();
                    let listed = [Listed {
                        server,
                        mode: PinMode::Warn,
                        tools: vec![def("t", "T.")],
                    }];
                    let (_, problem) = check(Pins::File(path), &listed);
                    assert_eq!(problem, None);
                });
            }
        });
        let lock = read(&path).unwrap();
        let missing: Vec<&String> = servers
            .iter()
            .filter(|s| lock.pinned(s, "t").is_none())
            .collect();
        assert!(missing.is_empty(), "pins lost: {missing:?}");
    }

    #[test]
    fn an_unreadable_lock_is_reported_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.lock");
        std::fs::write(&path, "<<<<<<< HEAD\n").unwrap();
        let (v, problem) = check(
            Pins::File(&path),
            &[Listed {
                server: "fx",
                mode: PinMode::Warn,
                tools: vec![def("a", "A.")],
            }],
        );
        assert_eq!(v["fx"]["a"], Verdict::Unverified);
        let problem = problem.unwrap();
        assert!(problem.contains("mcp.lock:1:1: invalid JSON"), "{problem}");
        assert!(problem.contains("delete it"), "{problem}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<<<<<<< HEAD\n");
        assert!(trust(Pins::File(&path), "fx", &[def("a", "A.")], None).is_err());
    }
}
