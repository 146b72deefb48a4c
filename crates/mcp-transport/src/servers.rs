//! Every configured server: each started on a task of its own, found by
//! name or position, shut down together.

use std::sync::Arc;

use core_agent_mcp_config::{Env, ServerEntry};

use crate::options::StartOptions;
use crate::server::{OnReady, Server};
use crate::start::{self, Relaunch};

/// Every configured server, in config order.
#[derive(Debug)]
pub struct Servers {
    /// One slot per configured server, in config order, filled when its
    /// start ends (connected or failed).
    slots: Vec<Slot>,
    /// Bumped whenever a server's start ends, its tool list changes, or the
    /// servers stop.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// How many of those bumps were [`Servers::announce_change`]s.
    announced: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Slot {
    name: String,
    server: Arc<std::sync::OnceLock<Server>>,
    /// The start in flight; aborting it drops the start, which kills a
    /// stdio child's process group.
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Slot {
    /// Aborts the start if it is still in flight, and hands back its task.
    fn abort(&self) -> Option<tokio::task::JoinHandle<()>> {
        let task = self.task.lock().ok()?.take()?;
        task.abort();
        Some(task)
    }
}

impl Drop for Servers {
    /// Starts still in flight are dropped, and their children with them;
    /// so are the tasks that watch connected servers.
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.abort();
            if let Some(server) = slot.server.get() {
                server.forget();
            }
        }
    }
}

impl Servers {
    /// Starts every server concurrently and waits until each has connected
    /// or failed. Each start has its own timeout, and a server that fails
    /// ends up with [`Status::Error`](crate::Status::Error) without
    /// affecting the others. `on_ready` is called as each one finishes
    /// starting, in the order they finish.
    ///
    /// `${env:NAME}` placeholders are expanded from `env` here, at start.
    pub async fn start(
        entries: &[ServerEntry],
        env: &dyn Env,
        options: &StartOptions,
        on_ready: &(dyn Fn(&Server) + Sync),
    ) -> Servers {
        let servers = Servers::launch(entries, env, options, None);
        let mut heard = vec![false; servers.slots.len()];
        let mut changes = servers.subscribe();
        loop {
            for (i, slot) in servers.slots.iter().enumerate() {
                if let (false, Some(server)) = (heard[i], slot.server.get()) {
                    heard[i] = true;
                    on_ready(server);
                }
            }
            if heard.iter().all(|h| *h) || changes.changed().await.is_err() {
                break;
            }
        }
        servers
    }

    /// Starts every server concurrently, each on a task of its own, and
    /// returns at once: a server appears in [`Servers::iter`] when its start
    /// ends. [`Servers::wait`] and [`Servers::wait_all`] wait for starts to
    /// end; [`Servers::subscribe`] wakes as each one does; `on_ready`, when
    /// given, hears about each server as its start ends, on the start's task.
    /// Must be called within a Tokio runtime.
    pub fn launch(
        entries: &[ServerEntry],
        env: &dyn Env,
        options: &StartOptions,
        on_ready: Option<OnReady>,
    ) -> Servers {
        let changed = Arc::new(tokio::sync::watch::channel(0).0);
        // What one server's placeholders read is withheld from the others.
        let mut options = options.clone();
        let mut withheld = (*options.withheld).clone();
        withheld.extend(
            entries
                .iter()
                .flat_map(ServerEntry::placeholder_variables)
                .filter(|n| !core_agent_mcp_config::EnvInherit::is_minimal(n)),
        );
        options.withheld = Arc::new(withheld);
        let options = &options;
        let slots = entries
            .iter()
            .map(|entry| {
                let relaunch = Relaunch::new(entry, env, options);
                let cell = Arc::new(std::sync::OnceLock::new());
                let task = tokio::spawn(start::run(
                    relaunch,
                    cell.clone(),
                    changed.clone(),
                    on_ready.clone(),
                ));
                Slot {
                    name: entry.name.clone(),
                    server: cell,
                    task: std::sync::Mutex::new(Some(task)),
                }
            })
            .collect();
        Servers {
            slots,
            changed,
            announced: Default::default(),
        }
    }

    /// Waits until the start of each server in `names` has ended (names
    /// that are not configured are skipped).
    pub async fn wait(&self, names: &[&str]) {
        let mut changes = self.subscribe();
        loop {
            let pending = self
                .slots
                .iter()
                .any(|s| names.contains(&s.name.as_str()) && s.server.get().is_none());
            if !pending || changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until every server's start has ended.
    pub async fn wait_all(&self) {
        let names: Vec<&str> = self.slots.iter().map(|s| s.name.as_str()).collect();
        self.wait(&names).await;
    }

    /// The servers whose start has ended, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Server> {
        self.slots.iter().filter_map(|s| s.server.get())
    }

    /// The server at `index` in config order, once its start has ended.
    pub fn at(&self, index: usize) -> Option<&Server> {
        self.slots.get(index).and_then(|s| s.server.get())
    }

    /// The index in config order of the server called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.slots.iter().position(|s| s.name == name)
    }

    /// Whether every server's start has ended.
    pub fn all_started(&self) -> bool {
        self.slots.iter().all(|s| s.server.get().is_some())
    }

    /// The names of the servers whose start has not ended yet.
    pub fn starting(&self) -> Vec<&str> {
        self.slots
            .iter()
            .filter(|s| s.server.get().is_none())
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The server called `name`, once its start has ended.
    pub fn get(&self, name: &str) -> Option<&Server> {
        self.iter().find(|s| s.name() == name)
    }

    /// Shuts every server down concurrently; starts still in flight are
    /// dropped (a stdio child's process group is killed).
    pub async fn shutdown(&self) {
        // A start that ended has nothing left to abort; one still in flight
        // has dropped its child (and killed its group) once it is joined.
        let aborted: Vec<_> = self.slots.iter().filter_map(Slot::abort).collect();
        for task in aborted {
            let _ = task.await;
        }
        futures::future::join_all(self.iter().map(Server::shutdown)).await;
        // Supervisors of starts dropped part-way stop their servers themselves.
        crate::child::settle().await;
        self.changed.send_modify(|v| *v += 1);
    }

    /// How many times the servers' tools have changed (a start ended, a
    /// tool list kept that differs from the one before or after the server
    /// said its tools changed, or a shutdown). Equal versions mean equal
    /// tools.
    pub fn tools_version(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Lists again, in the background, the tools of every server whose
    /// last listing is past the freshness the server gave it (`ttlMs`):
    /// [`Server::revalidate`]. For a front end to call when a client lists
    /// tools; a change found reaches subscribers like any other.
    pub fn revalidate(&self) {
        for server in self.iter() {
            server.revalidate();
        }
    }

    /// Wakes the subscribers as if the tools had changed, for a change made
    /// elsewhere (another process sharing the pins, or whose servers
    /// changed their tools): the catalog is built again and front ends tell
    /// their clients the list changed. Counted apart from the servers' own
    /// changes ([`Servers::changes_here`]).
    pub fn announce_change(&self) {
        self.announced
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.changed.send_modify(|v| *v += 1);
    }

    /// How many times these servers' own tools changed: [`Servers::tools_version`]
    /// without the [`Servers::announce_change`]s (what a process tells the
    /// others that share its clients).
    pub fn changes_here(&self) -> u64 {
        self.tools_version()
            .saturating_sub(self.announced.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// A receiver that wakes whenever [`Servers::tools_version`] changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
