//! The audit trail: every decision the gateway takes, one JSON line each,
//! written by a thread of its own to a file (rotated by size), to stdout, or
//! in batches to an [`AuditSink`] (the fleet's shared database).
//!
//! A line is built on the call's task (a few hundred bytes, no I/O) and
//! handed to the writer through a bounded queue; a full queue (the disk
//! stalled) drops the line rather than hold a call, counts it, and the next
//! line written says how many were dropped before it. Nothing secret is
//! written: arguments are a hash unless the operator opts in, and then the
//! values of secret-looking keys (and any gateway token met verbatim) are
//! redacted; tokens are never an input of a line.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use core_agent_host::{CallRecord, Observer, Verdict};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::auth::Caller;

/// The schema version each line carries as `"v"`.
pub const AUDIT_SCHEMA_VERSION: u64 = 1;

/// Lines waiting for the writer, at most; past it, lines are dropped and counted.
const QUEUE: usize = 16 * 1024;
/// Bytes of lines waiting for the writer, at most (a line holds a name a
/// client chose, and with `arguments` their values: the count alone bounds
/// nothing); past it, lines are dropped and counted.
const QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// At most this many lines go to an [`AuditSink`] in one batch.
const BATCH_LINES: usize = 1000;
/// At most about this many bytes of lines go to an [`AuditSink`] in one
/// batch (a batch holds at least one line, whatever its size).
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// Where the audit trail goes.
#[derive(Clone)]
#[non_exhaustive]
pub enum AuditTarget {
    /// Standard output (`-`): one stream for a container's log collector.
    Stdout,
    /// A file, appended to and rotated by size.
    File(PathBuf),
    /// The store the replicas of a fleet share (`"audit": {"store": true}`):
    /// a placeholder until the front end has connected to the store and
    /// replaced it with [`AuditTarget::Sink`]. [`AuditLog::open`] refuses it.
    Store,
    /// Lines handed, in batches, to a sink of the library user's (the
    /// fleet's database is one).
    Sink(Arc<dyn AuditSink>),
}

impl std::fmt::Debug for AuditTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditTarget::Stdout => f.write_str("Stdout"),
            AuditTarget::File(path) => f.debug_tuple("File").field(path).finish(),
            AuditTarget::Store => f.write_str("Store"),
            AuditTarget::Sink(sink) => f.debug_tuple("Sink").field(sink).finish(),
        }
    }
}

/// Two sinks are equal when they are the same sink (one `Arc`).
impl PartialEq for AuditTarget {
    fn eq(&self, other: &AuditTarget) -> bool {
        match (self, other) {
            (AuditTarget::Stdout, AuditTarget::Stdout)
            | (AuditTarget::Store, AuditTarget::Store) => true,
            (AuditTarget::File(a), AuditTarget::File(b)) => a == b,
            (AuditTarget::Sink(a), AuditTarget::Sink(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for AuditTarget {}

/// Somewhere the audit trail's lines go other than a file or stdout: a
/// database the replicas of a fleet share (`core_agent_fleet::Postgres`),
/// a log shipper. Give it as [`AuditTarget::Sink`].
///
/// [`AuditSink::write_lines`] is called on the trail's writer thread only,
/// one batch at a time, in the order the lines were made; it may block (a
/// network round trip, retries), because the bounded queue in front of the
/// writer drops lines rather than hold a call. It should still give up
/// within seconds: while it blocks, lines wait in the queue, and past the
/// queue's bound they are dropped.
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use core_agent_gateway::{AuditLog, AuditSettings, AuditSink, AuditTarget};
///
/// #[derive(Debug, Default)]
/// struct Collected(Mutex<Vec<String>>);
///
/// impl AuditSink for Collected {
///     fn write_lines(
///         &self,
///         lines: &[String],
///     ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///         self.0.lock().map_err(|_| "poisoned")?.extend_from_slice(lines);
///         Ok(())
///     }
/// }
///
/// let sink = Arc::new(Collected::default());
/// let log = AuditLog::open(&AuditSettings::new(AuditTarget::Sink(sink.clone())), vec![])?;
/// log.sign_in_refused(None, 401, "the bearer token was not accepted");
/// assert!(log.flush(std::time::Duration::from_secs(5)));
/// assert!(sink.0.lock().unwrap()[0].contains("\"sign_in\""));
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait AuditSink: std::fmt::Debug + Send + Sync + 'static {
    /// Writes `lines`, in order: each one finished JSON object (secrets
    /// already redacted), without a line break.
    ///
    /// # Errors
    /// The lines could not be written, after whatever retries the sink
    /// makes: the trail counts them as dropped (the next line made carries
    /// the count as `dropped_before`) and logs the error once per failing
    /// stretch.
    fn write_lines(&self, lines: &[String])
    -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// How the audit trail is written: `gateway.audit` in `config.json`, or the
/// `--audit-log` flag of a front end.
///
/// ```
/// use core_agent_gateway::{AuditSettings, AuditTarget};
///
/// let settings = AuditSettings::new(AuditTarget::File("audit.jsonl".into()))
///     .with_max_bytes(1 << 20)
///     .with_keep(3);
/// assert!(!settings.arguments, "argument values are opt-in");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditSettings {
    /// Where the lines go.
    pub target: AuditTarget,
    /// A file reaching this size is rotated (`FILE` → `FILE.1` → … →
    /// `FILE.<keep>`, the oldest dropped). 100 MiB by default. Only a file
    /// is rotated.
    pub max_bytes: u64,
    /// Rotated files kept (5 by default; 0 keeps none: the file restarts).
    pub keep: usize,
    /// Write the arguments' values (secret-looking keys redacted), not only
    /// their hash. Off by default.
    pub arguments: bool,
}

impl AuditSettings {
    /// Rotated at 100 MiB by default.
    pub const MAX_BYTES: u64 = 100 * 1024 * 1024;
    /// Rotated files kept, by default.
    pub const KEEP: usize = 5;

    /// Lines to `target`, rotated at 100 MiB keeping 5 files, arguments hashed.
    pub fn new(target: AuditTarget) -> AuditSettings {
        AuditSettings {
            target,
            max_bytes: AuditSettings::MAX_BYTES,
            keep: AuditSettings::KEEP,
            arguments: false,
        }
    }

    /// Rotates the file when it reaches `bytes`.
    pub fn with_max_bytes(mut self, bytes: u64) -> AuditSettings {
        self.max_bytes = bytes;
        self
    }

    /// Keeps `keep` rotated files.
    pub fn with_keep(mut self, keep: usize) -> AuditSettings {
        self.keep = keep;
        self
    }

    /// Writes the arguments' values (redacted), not only their hash.
    pub fn with_arguments(mut self, arguments: bool) -> AuditSettings {
        self.arguments = arguments;
        self
    }
}

/// What goes to the writer thread.
enum Message {
    /// A line, and the queue's byte count to take it off once written.
    Line(String, Arc<AtomicUsize>),
    /// Write everything queued before it, then answer.
    Flush(SyncSender<()>),
}

/// An open audit trail; cheap to share (`Arc`). Dropping the last handle
/// lets the writer finish the queued lines and close the file.
pub struct AuditLog {
    sender: Mutex<Option<SyncSender<Message>>>,
    /// Lines dropped since the last line made: by a full queue, or by a
    /// sink that could not write them.
    dropped: Arc<AtomicU64>,
    /// Set when the last handle goes: a sink that is failing is not tried
    /// again for the lines still queued (they are dropped), so that the end
    /// of the process waits for one batch at most.
    closing: Arc<AtomicBool>,
    /// Bytes of the lines handed to the writer and not yet written.
    queued: Arc<AtomicUsize>,
    /// At most this many bytes queued ([`QUEUE_BYTES`]).
    queue_bytes: usize,
    arguments: bool,
    /// Strings never written verbatim (the gateway's static tokens).
    secrets: Vec<String>,
    /// Known secret values, replaced in every line.
    redactor: core_agent_mcp_config::Redactor,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("arguments", &self.arguments)
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens the trail `settings` describes and starts its writer thread.
    /// `secrets` are strings never written verbatim (pass the gateway's
    /// static tokens): a redacted argument value equal to one is hidden
    /// even under a harmless-looking key.
    ///
    /// # Errors
    /// The file cannot be opened for appending (its directory is missing,
    /// or not writable), the target is [`AuditTarget::Store`] (the front end
    /// did not put the store's sink in its place), or the thread cannot start.
    pub fn open(settings: &AuditSettings, secrets: Vec<String>) -> std::io::Result<AuditLog> {
        let out = match &settings.target {
            AuditTarget::Stdout => Writer::Lines(Out::Stdout),
            AuditTarget::File(path) => Writer::Lines(Out::File(RotatingFile::open(
                path.clone(),
                settings.max_bytes.max(1),
                settings.keep,
            )?)),
            AuditTarget::Store => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the audit trail is to be written to the shared store, and no store was given to write it to",
                ));
            }
            AuditTarget::Sink(sink) => Writer::Batches(sink.clone()),
        };
        let dropped = Arc::new(AtomicU64::new(0));
        let closing = Arc::new(AtomicBool::new(false));
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE);
        let writer = {
            let dropped = dropped.clone();
            let closing = closing.clone();
            std::thread::Builder::new()
                .name("core-agent-audit".to_owned())
                .spawn(move || match out {
                    Writer::Lines(out) => write_lines(receiver, out),
                    Writer::Batches(sink) => write_batches(receiver, &*sink, &dropped, &closing),
                })?
        };
        Ok(AuditLog {
            sender: Mutex::new(Some(sender)),
            dropped,
            closing,
            queued: Arc::default(),
            queue_bytes: QUEUE_BYTES,
            arguments: settings.arguments,
            secrets: secrets.into_iter().filter(|s| !s.is_empty()).collect(),
            redactor: core_agent_mcp_config::Redactor::default(),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Replaces every value `redactor` knows (placeholder and `.env`
    /// values, core-agent's credentials) in each line it writes.
    #[must_use]
    pub fn with_redactor(mut self, redactor: core_agent_mcp_config::Redactor) -> AuditLog {
        self.redactor = redactor;
        self
    }

    /// [`cut`], of `text` with the known secrets already replaced: a
    /// secret that the cut would split leaves none of itself behind (the
    /// whole line is redacted again when it is sent).
    fn cut(&self, text: &str, keep: usize) -> String {
        cut(&self.redactor.redact(text), keep)
    }

    /// The line of one call a session decided.
    pub fn call(&self, caller: &Caller, call: &CallRecord<'_>) {
        let mut line = self.head("call");
        line.insert("caller".into(), caller_json(caller));
        line.insert("session".into(), json!(call.session));
        line.insert("kind".into(), json!(call.kind.as_str()));
        line.insert("name".into(), json!(self.cut(call.name, TEXT_BYTES)));
        line.insert("server".into(), json!(call.server));
        if let Some(arguments) = call.arguments {
            line.insert("arguments_sha256".into(), json!(arguments_hash(arguments)));
            if self.arguments {
                let redacted = redact(&Value::Object(arguments.clone()), &self.secrets);
                let text = redacted.to_string();
                // Large arguments are recorded cut (their hash is above).
                let kept = if text.len() <= ARGUMENTS_BYTES {
                    redacted
                } else {
                    json!(self.cut(&text, ARGUMENTS_BYTES))
                };
                line.insert("arguments".into(), kept);
            }
        }
        line.insert("decision".into(), json!(call.verdict.as_str()));
        line.insert(
            "reason".into(),
            json!(reason(call).map(|r| self.cut(&r, REASON_BYTES))),
        );
        line.insert("outcome".into(), json!(call.outcome.as_str()));
        line.insert("duration_ms".into(), json!(millis(call.duration)));
        line.insert("result_bytes".into(), json!(call.result_bytes));
        line.insert(
            "digest".into(),
            match call.digested {
                Some(d) => json!({
                    "method": d.method,
                    "raw_bytes": d.raw_bytes,
                    "digest_bytes": d.digest_bytes,
                }),
                None => Value::Null,
            },
        );
        self.send(line);
    }

    /// The line of a request refused before any session: no valid
    /// credentials, a caller throttled, a session used by another caller.
    /// `reason` must not hold the credentials themselves.
    pub fn sign_in_refused(&self, remote: Option<IpAddr>, status: u16, reason: &str) {
        let mut line = self.head("sign_in");
        line.insert("caller".into(), Value::Null);
        line.insert("remote".into(), json!(remote.map(|ip| ip.to_string())));
        line.insert("decision".into(), json!("refused"));
        line.insert("status".into(), json!(status));
        line.insert(
            "reason".into(),
            json!(self.cut(&hide(reason, &self.secrets), REASON_BYTES)),
        );
        self.send(line);
    }

    /// The line of a tool call refused by its caller's rate limits
    /// (`limit`: which one), before any session saw it.
    pub(crate) fn rate_limited(
        &self,
        caller: &Caller,
        remote: Option<IpAddr>,
        limit: &str,
        reason: &str,
    ) {
        let mut line = self.head("rate_limit");
        line.insert("caller".into(), caller_json(caller));
        line.insert("remote".into(), json!(remote.map(|ip| ip.to_string())));
        line.insert("decision".into(), json!("refused"));
        line.insert("status".into(), json!(429));
        line.insert("limit".into(), json!(limit));
        line.insert("reason".into(), json!(hide(reason, &self.secrets)));
        self.send(line);
    }

    /// Waits, at most `limit`, until every line handed over so far is
    /// written and flushed; whether it was.
    pub fn flush(&self, limit: Duration) -> bool {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        let sent = match self.sender.lock() {
            Ok(sender) => sender
                .as_ref()
                .is_some_and(|s| s.send(Message::Flush(done)).is_ok()),
            Err(_) => false,
        };
        sent && wait.recv_timeout(limit).is_ok()
    }

    /// Lines dropped because the writer fell behind (or a sink could not
    /// write them), since the last line made (which carries the count as
    /// `dropped_before`).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// `v`, `time` and `event`, and how many lines were dropped before
    /// this one when any were.
    fn head(&self, event: &str) -> Map<String, Value> {
        let mut line = Map::new();
        line.insert("v".into(), json!(AUDIT_SCHEMA_VERSION));
        line.insert("time".into(), json!(rfc3339(SystemTime::now())));
        line.insert("event".into(), json!(event));
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            line.insert("dropped_before".into(), json!(dropped));
        }
        line
    }

    fn send(&self, line: Map<String, Value>) {
        // The count this line carries is not lost with it when it is dropped.
        let carried = carried(&line);
        let text = Value::Object(line).to_string();
        let text = match self.redactor.redact(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(clean) => clean,
        };
        let Ok(sender) = self.sender.lock() else {
            return;
        };
        let Some(sender) = sender.as_ref() else {
            return;
        };
        let size = text.len();
        let full = self.queued.fetch_add(size, Ordering::Relaxed) + size > self.queue_bytes;
        let sent = if full {
            Err(TrySendError::Full(()))
        } else {
            sender
                .try_send(Message::Line(text, self.queued.clone()))
                .map_err(|e| match e {
                    TrySendError::Full(_) => TrySendError::Full(()),
                    TrySendError::Disconnected(_) => TrySendError::Disconnected(()),
                })
        };
        if sent.is_err() {
            self.queued.fetch_sub(size, Ordering::Relaxed);
        }
        match sent {
            Ok(()) => {}
            Err(TrySendError::Full(())) => {
                // Once per stretch of drops: the first line dropped after one
                // that was handed over.
                if self.dropped.fetch_add(carried + 1, Ordering::Relaxed) == 0 && carried == 0 {
                    tracing::warn!(
                        "the audit trail's writer fell behind: lines are dropped (counted in the next line's dropped_before)"
                    );
                }
            }
            Err(TrySendError::Disconnected(())) => {}
        }
    }
}

impl Drop for AuditLog {
    /// Lets the writer write what is queued, and waits for it.
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Relaxed);
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        if let Some(writer) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = writer.join();
        }
    }
}

/// The `dropped_before` a line carries, 0 without one.
fn carried(line: &Map<String, Value>) -> u64 {
    line.get("dropped_before")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The lines of a batch a sink could not write, and the drops they
/// carried: what the next line's `dropped_before` must count.
fn lost_in(batch: &[String]) -> u64 {
    batch
        .iter()
        .map(|line| {
            if line.contains("\"dropped_before\"") {
                serde_json::from_str::<Map<String, Value>>(line).map_or(0, |l| carried(&l))
            } else {
                0
            }
        })
        .sum::<u64>()
        + batch.len() as u64
}

/// An audit trail seen as a session's observer: its calls, under its caller.
pub(crate) struct SessionAudit {
    pub(crate) log: Arc<AuditLog>,
    pub(crate) caller: Caller,
}

impl Observer for SessionAudit {
    fn observe(&self, call: &CallRecord<'_>) {
        self.log.call(&self.caller, call);
    }
}

/// `{"name": …, "trust_level": …}` of a caller, and `"identity": {"issuer",
/// "subject", "email", "name"}` for one signed in with an identity provider.
fn caller_json(caller: &Caller) -> Value {
    let mut value =
        json!({"name": cut(&caller.name, TEXT_BYTES), "trust_level": caller.trust_level.as_str()});
    if let Some(identity) = &caller.identity {
        let claim = |c: &Option<String>| c.as_deref().map(|c| cut(c, TEXT_BYTES));
        value["identity"] = json!({
            "issuer": cut(&identity.issuer, TEXT_BYTES),
            "subject": cut(&identity.subject, TEXT_BYTES),
            "email": claim(&identity.email),
            "name": claim(&identity.name),
        });
    }
    value
}

/// A caller-supplied name, URI or claim in a line: at most this many bytes
/// (then `… (<size>, sha256:<8 hex>)`).
const TEXT_BYTES: usize = 256;

/// A refusal's or an error's words in a line: at most this many bytes.
const REASON_BYTES: usize = 1024;

/// Recorded arguments (`arguments: true`): at most this many bytes of
/// JSON, else the JSON text cut (`arguments_sha256` names them whole).
const ARGUMENTS_BYTES: usize = 4096;

/// `text` cut to `keep` bytes with its size and hash, so a caller cannot
/// make a line (and so the trail's rotation) cost more than a bounded size.
fn cut(text: &str, keep: usize) -> String {
    core_agent_mcp_policy::elide(text, keep).into_owned()
}

/// Why the call was decided as it was: the gate's rule, the answer to an
/// ask, or the refusal's own words.
fn reason(call: &CallRecord<'_>) -> Option<String> {
    match call.verdict {
        Verdict::Allowed { rule: Some(rule) } => Some(rule.to_string()),
        Verdict::Allowed { rule: None } => None,
        Verdict::Asked { answer } => Some(format!("asked, answered {answer:?}").to_lowercase()),
        Verdict::Denied { rule } => Some(match call.error {
            Some(e) => format!("{rule}: {e}"),
            None => rule.to_string(),
        }),
        _ => call.error.map(ToString::to_string),
    }
    .or_else(|| call.error.map(ToString::to_string))
}

/// SHA-256 of the arguments with every object's keys sorted, in hex: the
/// same arguments hash the same whatever order a client wrote them in.
pub(crate) fn arguments_hash(arguments: &Map<String, Value>) -> String {
    let canonical = canonical(&Value::Object(arguments.clone()));
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Key names whose values are secrets, matched case-insensitively as parts
/// of the key (`apiKey`, `x-api-key`, `db_password`, `Authorization`).
const SECRET_KEYS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "api_key",
    "api-key",
    "authorization",
    "cookie",
    "credential",
    "private_key",
    "privatekey",
    "session_key",
];

const REDACTED: &str = "[redacted]";

/// `value` with the values of secret-looking keys, and any string holding a
/// known secret, replaced by `[redacted]`.
pub(crate) fn redact(value: &Value, secrets: &[String]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    if SECRET_KEYS.iter().any(|s| lower.contains(s)) {
                        (k.clone(), json!(REDACTED))
                    } else {
                        (k.clone(), redact(v, secrets))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, secrets)).collect()),
        Value::String(s) if secrets.iter().any(|secret| s.contains(secret.as_str())) => {
            json!(REDACTED)
        }
        other => other.clone(),
    }
}

/// `text` with every known secret in it replaced.
fn hide(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), REDACTED))
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// `2026-12-02T11:20:00.123Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// How the writer thread writes: line by line to a file or stdout, or in
/// batches to a sink.
enum Writer {
    Lines(Out),
    Batches(Arc<dyn AuditSink>),
}

/// Where the writer thread writes line by line.
enum Out {
    Stdout,
    File(RotatingFile),
}

impl Out {
    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        match self {
            Out::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")
            }
            Out::File(file) => file.write_line(line),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Stdout => std::io::stdout().lock().flush(),
            Out::File(file) => file.out.flush(),
        }
    }
}

/// The writer thread of a sink: the lines waiting in the queue, in order,
/// in batches of at most [`BATCH_LINES`] lines (and about [`BATCH_BYTES`]);
/// a line that finds the queue empty goes alone, at once. A batch the sink
/// cannot write is dropped and counted.
fn write_batches(
    receiver: Receiver<Message>,
    sink: &dyn AuditSink,
    dropped: &AtomicU64,
    closing: &AtomicBool,
) {
    let mut batch: Vec<String> = Vec::new();
    let mut bytes = 0;
    // Lines lost since the sink last wrote a batch: logged once when it
    // starts failing, and again when it writes again.
    let mut lost: Option<u64> = None;
    let mut write = |batch: &mut Vec<String>, bytes: &mut usize, queued: Option<&AtomicUsize>| {
        if batch.is_empty() {
            return;
        }
        let result = match lost {
            // The last handle is gone and the sink is failing: what is
            // left is dropped at once rather than waited for.
            Some(_) if closing.load(Ordering::Relaxed) => Err("the audit trail is closing".into()),
            _ => sink.write_lines(batch),
        };
        match (result, lost) {
            (Ok(()), None) => {}
            (Ok(()), Some(n)) => {
                tracing::warn!(
                    "the audit trail's sink writes again ({n} lines were dropped while it failed)"
                );
                lost = None;
            }
            (Err(e), None) => {
                let count = batch.len();
                tracing::error!(
                    "cannot write the audit trail to {sink:?}: {e}; {count} lines dropped (counted in the next line's dropped_before)"
                );
                lost = Some(count as u64);
                dropped.fetch_add(lost_in(batch), Ordering::Relaxed);
            }
            (Err(_), Some(n)) => {
                lost = Some(n + batch.len() as u64);
                dropped.fetch_add(lost_in(batch), Ordering::Relaxed);
            }
        }
        if let Some(queued) = queued {
            queued.fetch_sub(*bytes, Ordering::Relaxed);
        }
        batch.clear();
        *bytes = 0;
    };
    // The queue's byte count is the same counter for every line.
    let mut counter: Option<Arc<AtomicUsize>> = None;
    while let Ok(message) = receiver.recv() {
        let mut next = Some(message);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line, queued) => {
                    bytes += line.len();
                    batch.push(line);
                    counter.get_or_insert(queued);
                    if batch.len() >= BATCH_LINES || bytes >= BATCH_BYTES {
                        write(&mut batch, &mut bytes, counter.as_deref());
                    }
                }
                Message::Flush(done) => {
                    write(&mut batch, &mut bytes, counter.as_deref());
                    let _ = done.send(());
                }
            }
            next = receiver.try_recv().ok();
        }
        write(&mut batch, &mut bytes, counter.as_deref());
    }
    write(&mut batch, &mut bytes, counter.as_deref());
    if let Some(n) = lost {
        tracing::error!("the audit trail closed with its sink failing: {n} lines were dropped");
    }
}

/// The writer thread: lines in order; flushed whenever the queue is empty.
fn write_lines(receiver: Receiver<Message>, mut sink: Out) {
    let mut failing = false;
    let report = |result: std::io::Result<()>, failing: &mut bool| match result {
        Ok(()) => *failing = false,
        Err(e) => {
            if !*failing {
                tracing::error!("cannot write the audit trail: {e}");
            }
            *failing = true;
        }
    };
    while let Ok(message) = receiver.recv() {
        let mut next = Some(message);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line, queued) => {
                    report(sink.write_line(&line), &mut failing);
                    queued.fetch_sub(line.len(), Ordering::Relaxed);
                }
                Message::Flush(done) => {
                    report(sink.flush(), &mut failing);
                    let _ = done.send(());
                }
            }
            next = receiver.try_recv().ok();
        }
        report(sink.flush(), &mut failing);
    }
    report(sink.flush(), &mut failing);
}

/// An append-only file that rotates when it reaches `max_bytes`.
struct RotatingFile {
    path: PathBuf,
    out: BufWriter<File>,
    written: u64,
    max_bytes: u64,
    keep: usize,
}

impl RotatingFile {
    fn open(path: PathBuf, max_bytes: u64, keep: usize) -> std::io::Result<RotatingFile> {
        let file = append(&path)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RotatingFile {
            path,
            out: BufWriter::new(file),
            written,
            max_bytes,
            keep,
        })
    }

    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let size = line.len() as u64 + 1;
        if self.written > 0 && self.written + size > self.max_bytes {
            self.rotate()?;
        }
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.written += size;
        Ok(())
    }

    /// `FILE.<keep-1>` → `FILE.<keep>`, …, `FILE` → `FILE.1`, then a new `FILE`.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            for n in (1..self.keep).rev() {
                let from = numbered(&self.path, n);
                if from.exists() {
                    std::fs::rename(&from, numbered(&self.path, n + 1))?;
                }
            }
            std::fs::rename(&self.path, numbered(&self.path, 1))?;
        }
        self.out = BufWriter::new(append(&self.path)?);
        self.written = 0;
        Ok(())
    }
}

fn append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot open the audit log {}: {e}", path.display()),
        )
    })
}

/// `FILE.n`.
fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_210_400_123);
        assert_eq!(rfc3339(t), "2026-12-02T11:20:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_hash_ignores_key_order_and_sees_values() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, 2]}, "b": 1});
        let c = json!({"a": {"x": "s", "y": [2, 1]}, "b": 1});
        let hash = |v: &Value| arguments_hash(v.as_object().unwrap());
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(hash(&a), hash(&c));
        assert_eq!(hash(&a).len(), 64);
    }

    #[test]
    fn secret_keys_and_known_secrets_are_redacted_at_any_depth() {
        let secrets = vec!["tok-123456".to_owned()];
        let v = json!({
            "path": "/tmp",
            "apiKey": "k",
            "headers": {"Authorization": "Bearer x", "accept": "json"},
            "items": [{"db_password": "p"}, "uses tok-123456 here"],
            "n": 3
        });
        assert_eq!(
            redact(&v, &secrets),
            json!({
                "path": "/tmp",
                "apiKey": REDACTED,
                "headers": {"Authorization": REDACTED, "accept": "json"},
                "items": [{"db_password": REDACTED}, REDACTED],
                "n": 3
            })
        );
    }

    #[test]
    fn the_file_rotates_by_size_keeping_so_many() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut file = RotatingFile::open(path.clone(), 100, 2).unwrap();
        for i in 0..12 {
            file.write_line(&format!(
                "{{\"line\": {i:02}, \"pad\": \"{}\"}}",
                "x".repeat(20)
            ))
            .unwrap();
        }
        file.out.flush().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let lines = |p: &Path| read(p).lines().count();
        assert!(std::fs::metadata(&path).unwrap().len() <= 100);
        // 44-byte lines: two fit in 100 bytes.
        assert_eq!(lines(&path), 2);
        assert_eq!(lines(&numbered(&path, 1)), 2);
        assert_eq!(lines(&numbered(&path, 2)), 2);
        assert!(
            !numbered(&path, 3).exists(),
            "only two rotated files are kept"
        );
        // The newest lines are in the file, the ones before in FILE.1.
        assert!(read(&path).contains("\"line\": 11"));
        assert!(read(&numbered(&path, 1)).contains("\"line\": 08"));
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_and_the_next_line_counts_what_was_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log =
            AuditLog::open(&AuditSettings::new(AuditTarget::File(path.clone())), vec![]).unwrap();
        log.queue_bytes = 1024;
        // A line larger than the whole queue is dropped, however few lines
        // wait.
        log.sign_in_refused(None, 401, &"x".repeat(8192));
        assert_eq!(log.dropped(), 1);
        log.sign_in_refused(None, 401, "short");
        assert!(log.flush(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["reason"], "short");
        assert_eq!(lines[0]["dropped_before"], 1);
        // Written lines leave the count: the queue takes lines again.
        assert_eq!(log.queued.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn caller_supplied_text_is_cut_with_its_size_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log =
            AuditLog::open(&AuditSettings::new(AuditTarget::File(path.clone())), vec![]).unwrap();
        // Before: a 3.9 MiB text made a 3.9 MiB line (7.8 MB for a call,
        // its name in the name and in the reason).
        log.sign_in_refused(None, 401, &"x".repeat(4_000_000));
        assert!(log.flush(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.len() < 2048, "{} bytes", text.len());
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        let reason = line["reason"].as_str().unwrap();
        assert!(reason.contains("… (3.8 MiB, sha256:"), "{reason}");
        let caller = Caller {
            name: "n".repeat(1 << 20),
            ..Caller::new("a", core_agent_mcp_config::TrustLevel::Public)
        };
        assert!(caller_json(&caller).to_string().len() < 512);
    }

    #[test]
    fn a_secret_the_cut_would_split_leaves_nothing_of_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let secret = "zq9-operator-secret-value";
        let log = AuditLog::open(&AuditSettings::new(AuditTarget::File(path.clone())), vec![])
            .unwrap()
            .with_redactor(core_agent_mcp_config::Redactor::new([("S", secret)]));
        // The reason is cut at 1 KiB: the secret straddles the cut.
        let reason = format!(
            "{}{secret}{}",
            "x".repeat(REASON_BYTES - 6),
            "y".repeat(2048)
        );
        log.sign_in_refused(None, 401, &reason);
        assert!(log.flush(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("zq9-op"), "{text}");
        assert!(text.contains("***"), "{text}");
    }

    #[test]
    fn lines_reach_the_file_in_order_and_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(
            &AuditSettings::new(AuditTarget::File(path.clone())),
            vec!["sekrit-token".into()],
        )
        .unwrap();
        for status in [401, 403, 429] {
            log.sign_in_refused(None, status, "wrong token sekrit-token");
        }
        assert!(log.flush(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let statuses: Vec<u64> = lines
            .iter()
            .map(|l| l["status"].as_u64().unwrap())
            .collect();
        assert_eq!(statuses, [401, 403, 429]);
        assert_eq!(lines[0]["event"], "sign_in");
        assert_eq!(lines[0]["v"], AUDIT_SCHEMA_VERSION);
        assert!(!text.contains("sekrit-token"), "{text}");
    }

    /// A sink that keeps its batches, failing the first `fail` of them and
    /// taking `delay` over each.
    #[derive(Debug, Default)]
    struct Batches {
        seen: Mutex<Vec<Vec<String>>>,
        fail: AtomicUsize,
        delay: Duration,
    }

    impl AuditSink for Batches {
        fn write_lines(
            &self,
            lines: &[String],
        ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            std::thread::sleep(self.delay);
            if self
                .fail
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err("the database is away".into());
            }
            self.seen.lock().unwrap().push(lines.to_vec());
            Ok(())
        }
    }

    fn statuses(lines: &[String]) -> Vec<u64> {
        lines
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["status"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_sink_gets_every_line_in_order_in_bounded_batches() {
        // A slow sink (200 ms a batch), so that the lines queued while it
        // writes are many even on a loaded machine.
        let sink = Arc::new(Batches {
            delay: Duration::from_millis(200),
            ..Batches::default()
        });
        let log = AuditLog::open(
            &AuditSettings::new(AuditTarget::Sink(sink.clone())),
            vec!["sekrit-token".into()],
        )
        .unwrap();
        let n = 2 * BATCH_LINES as u64 + 500;
        for status in 0..n {
            log.sign_in_refused(None, status as u16, "wrong token sekrit-token");
        }
        assert!(log.flush(Duration::from_secs(10)));
        let batches = sink.seen.lock().unwrap().clone();
        let all: Vec<String> = batches.concat();
        assert_eq!(statuses(&all), (0..n).collect::<Vec<_>>());
        assert!(batches.iter().all(|b| b.len() <= BATCH_LINES));
        assert!(
            batches.len() < 10,
            "the lines that waited went together: {} batches",
            batches.len()
        );
        assert!(!all.concat().contains("sekrit-token"));
        assert_eq!(log.queued.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn lines_a_sink_cannot_write_are_counted_in_the_next_line() {
        let sink = Arc::new(Batches {
            fail: AtomicUsize::new(1),
            ..Batches::default()
        });
        let log =
            AuditLog::open(&AuditSettings::new(AuditTarget::Sink(sink.clone())), vec![]).unwrap();
        for status in [401, 403] {
            log.sign_in_refused(None, status, "refused");
        }
        assert!(log.flush(Duration::from_secs(5)));
        assert_eq!(log.dropped(), 2, "both lines went in the batch that failed");
        log.sign_in_refused(None, 429, "throttled");
        assert!(log.flush(Duration::from_secs(5)));
        let all = sink.seen.lock().unwrap().concat();
        assert_eq!(statuses(&all), [429]);
        let line: Value = serde_json::from_str(&all[0]).unwrap();
        assert_eq!(line["dropped_before"], 2);
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn a_failing_sink_holds_neither_a_call_nor_the_end_for_long() {
        let sink = Arc::new(Batches {
            fail: AtomicUsize::new(usize::MAX),
            delay: Duration::from_millis(300),
            ..Batches::default()
        });
        let log =
            AuditLog::open(&AuditSettings::new(AuditTarget::Sink(sink.clone())), vec![]).unwrap();
        let started = std::time::Instant::now();
        for _ in 0..QUEUE + 2 * BATCH_LINES + 100 {
            log.sign_in_refused(None, 401, "refused");
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "making lines waited for the sink: {:?}",
            started.elapsed()
        );
        let started = std::time::Instant::now();
        drop(log);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the end waited for every queued batch: {:?}",
            started.elapsed()
        );
        assert!(sink.seen.lock().unwrap().is_empty());
    }

    #[test]
    fn every_line_is_written_or_counted_however_long_the_overflow() {
        // A slow sink that fails every other batch.
        #[derive(Debug, Default)]
        struct Flaky {
            calls: AtomicUsize,
            seen: Mutex<Vec<String>>,
        }
        impl AuditSink for Flaky {
            fn write_lines(
                &self,
                lines: &[String],
            ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
                std::thread::sleep(Duration::from_millis(20));
                if self.calls.fetch_add(1, Ordering::Relaxed) % 2 == 1 {
                    return Err("away".into());
                }
                self.seen.lock().unwrap().extend_from_slice(lines);
                Ok(())
            }
        }
        let sink = Arc::new(Flaky::default());
        let log =
            AuditLog::open(&AuditSettings::new(AuditTarget::Sink(sink.clone())), vec![]).unwrap();
        let made = 3 * QUEUE;
        for _ in 0..made {
            log.sign_in_refused(None, 401, "refused");
        }
        assert!(log.flush(Duration::from_secs(30)));
        // Until a line lands after the last drop.
        let mut extra = 0;
        loop {
            log.sign_in_refused(None, 200, "last");
            extra += 1;
            assert!(log.flush(Duration::from_secs(30)));
            let seen = sink.seen.lock().unwrap();
            if seen.last().is_some_and(|l| l.contains("\"last\"")) && log.dropped() == 0 {
                break;
            }
        }
        let seen = sink.seen.lock().unwrap();
        let counted: u64 = seen
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["dropped_before"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .sum();
        assert!(counted > 0);
        assert_eq!(seen.len() as u64 + counted, (made + extra) as u64);
    }

    #[test]
    fn the_store_must_be_replaced_by_its_sink() {
        let err = AuditLog::open(&AuditSettings::new(AuditTarget::Store), vec![]).unwrap_err();
        assert!(err.to_string().contains("shared store"), "{err}");
        let sink: Arc<dyn AuditSink> = Arc::new(Batches::default());
        let a = AuditTarget::Sink(sink.clone());
        assert_eq!(a, AuditTarget::Sink(sink));
        assert_ne!(a, AuditTarget::Sink(Arc::new(Batches::default())));
        assert_ne!(a, AuditTarget::Store);
        assert!(format!("{a:?}").starts_with("Sink(Batches"), "{a:?}");
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("audit.jsonl");
        let err = AuditLog::open(&AuditSettings::new(AuditTarget::File(path.clone())), vec![])
            .unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
}
