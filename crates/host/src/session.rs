//! A session and its turn: a batch of calls decided in order (resolve,
//! trust, gate), then run (read-only calls concurrently, mutating ones in turn).

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::ProgressSink;
use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use core_agent_permissions::{BUILTIN, Gate, MCP, Mode, Prompter, RefuseAll, Request};

use crate::host::{Host, Published};
use crate::observe::{BACKEND, CallRecord, DIGESTED, Kind, Observer, Verdict, outcome_of};
use crate::pipeline::{Remembering, Route, ToolRoute, gate_remembering, resolve, shape, trust};
use crate::tools::{self, Handler};
use crate::{Error, Result};
use tracing::Instrument;

/// One caller's settings: its trust level, how its asks are answered, its
/// session id.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionOptions {
    /// Which tools the caller may see and call.
    pub trust_level: TrustLevel,
    /// Overrides the configured permission mode.
    pub mode: Option<Mode>,
    /// Answers the gate's asks.
    pub prompter: Arc<dyn Prompter>,
    /// The session id its digests and telemetry are kept under (default: a
    /// new unique one); reuse one to read its earlier payloads back.
    pub id: Option<String>,
    /// Overrides the LLM second chance's spending ceiling for this session.
    pub cost_ceiling: Option<f64>,
    /// Who opened the session (a gateway token's name), claimed in the
    /// host's [`Owners`](crate::Owners); `retrieve_raw` then also reads
    /// payloads of the owner's other sessions, including those of earlier
    /// runs kept in `--session-db`.
    pub owner: Option<String>,
    /// Said as the `"note"` of each of its digests' synthetic responses:
    /// what the caller should know about keeping the raw payloads (the
    /// front end's words; a one-shot run whose payloads die with it says
    /// how to keep them).
    pub digest_note: Option<String>,
    /// Told about each call once it ended: its verdict, outcome, duration
    /// and result size (an audit trail, metrics).
    pub observer: Option<Arc<dyn Observer>>,
    /// Whether `id` was made up just now for this session (then nothing
    /// can be remembered under it, and the host's
    /// [`SessionMemory`](crate::SessionMemory) is not asked at open).
    pub new_id: bool,
}

impl SessionOptions {
    /// A session at `trust_level`, with every other setting at its default
    /// (asks refused, a new session id).
    pub fn new(trust_level: TrustLevel) -> SessionOptions {
        SessionOptions {
            trust_level,
            ..SessionOptions::default()
        }
    }

    /// Overrides the configured permission mode.
    pub fn with_mode(mut self, mode: Option<Mode>) -> SessionOptions {
        self.mode = mode;
        self
    }

    /// Who answers the gate's asks.
    pub fn with_prompter(mut self, prompter: Arc<dyn Prompter>) -> SessionOptions {
        self.prompter = prompter;
        self
    }

    /// The session id its digests are kept under (a session reopened, or
    /// continued from another process, under an id it had).
    pub fn with_id(mut self, id: Option<String>) -> SessionOptions {
        self.id = id;
        self.new_id = false;
        self
    }

    /// A session id the caller just made up for it (so that its own
    /// records share it): nothing is recalled under it.
    pub fn with_new_id(mut self, id: String) -> SessionOptions {
        self.id = Some(id);
        self.new_id = true;
        self
    }

    /// Overrides the LLM second chance's spending ceiling.
    pub fn with_cost_ceiling(mut self, ceiling: Option<f64>) -> SessionOptions {
        self.cost_ceiling = ceiling;
        self
    }

    /// Who opened the session (a gateway token's name).
    pub fn with_owner(mut self, owner: Option<String>) -> SessionOptions {
        self.owner = owner;
        self
    }

    /// The `"note"` of each of its digests' synthetic responses.
    pub fn with_digest_note(mut self, note: Option<String>) -> SessionOptions {
        self.digest_note = note;
        self
    }

    /// Tells `observer` about each call once it ended.
    pub fn with_observer(mut self, observer: Option<Arc<dyn Observer>>) -> SessionOptions {
        self.observer = observer;
        self
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("trust_level", &self.trust_level)
            .field("mode", &self.mode)
            .field("id", &self.id)
            .field("cost_ceiling", &self.cost_ceiling)
            .field("owner", &self.owner)
            .field("digest_note", &self.digest_note)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            trust_level: TrustLevel::Creator,
            mode: None,
            prompter: Arc::new(RefuseAll),
            id: None,
            cost_ceiling: None,
            owner: None,
            digest_note: None,
            observer: None,
            new_id: false,
        }
    }
}

/// One call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The namespaced tool name (or a built-in's name).
    pub name: String,
    /// Its arguments.
    pub arguments: JsonObject,
}

/// How one call of a batch ended.
#[derive(Debug)]
pub struct CallOutcome {
    /// The name that was called.
    pub name: String,
    /// The result, or why there is none.
    pub result: Result<CallToolResult>,
    /// How long it took, from the start of the batch's dispatch.
    pub elapsed: Duration,
}

/// One caller of a shared [`Host`]: its trust level, its permission gate
/// (mode, "always" answers, whether a plan is recorded), the plan, the lock
/// that runs its mutating calls one at a time, and its digest ledger (session
/// id, LLM spend under its ceiling).
pub struct Session {
    pub(crate) host: Arc<Host>,
    pub(crate) level: TrustLevel,
    pub(crate) prompter: Arc<dyn Prompter>,
    /// Read by every call's gate step, written by `record_plan` and an
    /// "always" answer.
    pub(crate) gate: RwLock<Gate>,
    pub(crate) plan: Mutex<Option<String>>,
    /// Mutating calls run one at a time, in the order they were asked.
    pub(crate) mutation: tokio::sync::Mutex<()>,
    pub(crate) digest: Option<crate::DigestWrap>,
    /// Who opened it, as claimed in the host's owners (`None` when not
    /// claimed).
    pub(crate) owner: Option<String>,
    /// Told about each call once it ended.
    pub(crate) observer: Option<Arc<dyn Observer>>,
    /// Its id (the digest's, when the digest is on).
    pub(crate) key: String,
    /// Where its answers and plan are kept for another process that
    /// continues it ([`crate::HostOptions::with_memory`]).
    pub(crate) memory: Option<Arc<dyn crate::SessionMemory>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("level", &self.level)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    /// Releases its claim on its id: the host's owners then forget the
    /// owner of a session id whose sessions stored nothing, and the store
    /// hears that the last session under that id ended (an in-memory store
    /// keeps a bounded number of ended sessions' telemetry), so sessions
    /// that come and go leave a bounded trace behind.
    fn drop(&mut self) {
        let Some(digest) = &self.digest else {
            return;
        };
        if let (Some(_), Some(owners)) = (&self.owner, self.host.owners()) {
            owners.release(&digest.session, digest.stored());
        }
        // Counted apart from owners: a session refused an owner (another
        // holds the id) is open all the same.
        if self.host.closed(&digest.session)
            && let Err(e) = digest.store.ended(&digest.session)
        {
            tracing::debug!("the store did not hear that {} ended: {e}", digest.session);
        }
    }
}

impl Session {
    /// The host this session calls through.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The caller's trust level.
    pub fn trust_level(&self) -> TrustLevel {
        self.level
    }

    /// The id its digests and telemetry are kept under (`None` when the
    /// digest is off).
    pub fn id(&self) -> Option<&str> {
        self.digest.as_ref().map(|d| d.session.as_str())
    }

    /// Whether `session` was opened by this session's owner.
    pub(crate) fn owns(&self, session: &str) -> bool {
        let (Some(owner), Some(owners)) = (&self.owner, self.host.owners()) else {
            return false;
        };
        owners.owner(session).as_deref() == Some(owner.as_str())
    }

    /// Its memory and id, for the gate step.
    pub(crate) fn remembering(&self) -> Option<Remembering<'_>> {
        self.memory.as_deref().map(|memory| Remembering {
            memory,
            session: &self.key,
        })
    }

    /// The plan recorded in this session, if any.
    pub fn plan(&self) -> Option<String> {
        self.plan.lock().ok().and_then(|p| p.clone())
    }

    /// Calls one tool as a caller of `level`: through the gate, then the
    /// dispatcher. `Ok` with `is_error: Some(true)` means the tool ran and
    /// reported a failure; `Err` means it was refused or could not finish.
    ///
    /// The same steps as a batch of one call, without the batch's
    /// bookkeeping.
    pub async fn call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult> {
        self.call_with(name, arguments, None).await
    }

    /// [`Session::call`], passing the progress updates the server sends
    /// about the call to `progress` (a gateway relays them to its client).
    pub async fn call_with_progress(
        &self,
        name: &str,
        arguments: JsonObject,
        progress: &ProgressSink,
    ) -> Result<CallToolResult> {
        self.call_with(name, arguments, Some(progress)).await
    }

    pub(crate) async fn call_with(
        &self,
        name: &str,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let level = self.level;
        self.host.wait_for(&[name]).await;
        let published = self.host.published();
        let started = Instant::now();
        let observed = self.copy_for_observer(&arguments);
        let (plan, verdict) = self.decide(&published, name, arguments, level).await;
        let server = plan.server().map(str::to_owned);
        // Boxed: the pipeline's future is large, and a gateway's request
        // future holds this one (a debug build's worker stack is 2 MiB).
        let run = Box::pin(self.run(&published, plan, level, progress));
        let Some(arguments) = observed else {
            return run.await;
        };
        let (result, digested, backend) = observing(run).await;
        self.tell(
            &Told {
                name,
                server: server.as_deref(),
                arguments: arguments.as_ref(),
                verdict: &verdict,
                duration: started.elapsed(),
                digested: digested.as_ref(),
                backend,
            },
            &result,
        );
        result
    }

    /// `None` without an observer; else `Some` of a copy of `arguments`
    /// when the observer wants them (`Some(None)` when it does not).
    fn copy_for_observer(&self, arguments: &JsonObject) -> Option<Option<JsonObject>> {
        let observer = self.observer.as_deref()?;
        Some(observer.wants_payloads().then(|| arguments.clone()))
    }

    /// Whether the observer reads arguments and result sizes.
    pub(crate) fn observer_wants_payloads(&self) -> bool {
        self.observer
            .as_deref()
            .is_some_and(Observer::wants_payloads)
    }

    /// Tells the observer, if any, about a tool call that ended.
    fn tell(&self, told: &Told<'_>, result: &Result<CallToolResult>) {
        let (outcome, result_bytes) = outcome_of(result, self.observer_wants_payloads());
        self.tell_record(
            Kind::Tool,
            told,
            outcome,
            result_bytes,
            result.as_ref().err(),
        );
    }

    /// Tells the observer, if any, about a call of `kind` that ended.
    pub(crate) fn tell_record(
        &self,
        kind: Kind,
        told: &Told<'_>,
        outcome: crate::observe::Outcome,
        result_bytes: Option<usize>,
        error: Option<&Error>,
    ) {
        let Some(observer) = &self.observer else {
            return;
        };
        observer.observe(&CallRecord {
            session: self.id(),
            owner: self.owner.as_deref(),
            kind,
            name: told.name,
            server: told.server,
            arguments: told.arguments,
            verdict: told.verdict,
            outcome,
            error,
            duration: told.duration,
            result_bytes,
            digested: told.digested,
            backend: told.backend,
        });
    }

    /// Runs one turn's calls. Every call is decided in order before any
    /// runs: resolved, checked against the caller's trust level and put
    /// through the gate (asking where needed; `record_plan` taking effect for
    /// the calls after it; `wait_and_verify` decided, and asked about once,
    /// for the tool it will poll). Then read-only calls run concurrently
    /// while mutating calls run one at a time, in the order they were asked.
    /// Outcomes come back in input order.
    pub async fn call_batch(&self, calls: Vec<CallRequest>) -> Vec<CallOutcome> {
        self.call_batch_with_progress(calls, &[]).await
    }

    /// [`Session::call_batch`], passing the progress updates the server
    /// sends about the call at index `i` to `progress[i]` (calls past the
    /// end of `progress` report to nobody).
    pub async fn call_batch_with_progress(
        &self,
        calls: Vec<CallRequest>,
        progress: &[ProgressSink],
    ) -> Vec<CallOutcome> {
        let level = self.level;
        if !self.host.all_started() {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            self.host.wait_for(&names).await;
        }
        let published = self.host.published();
        // Decided one at a time, in order: an ask is answered, and a
        // `record_plan` takes effect, before the next call is decided.
        let mut planned = Vec::with_capacity(calls.len());
        for CallRequest { name, arguments } in calls {
            let decided = Instant::now();
            let observed = self.copy_for_observer(&arguments);
            let (plan, verdict) = self.decide(&published, &name, arguments, level).await;
            let observed = observed.map(|arguments| (arguments, verdict, decided.elapsed()));
            planned.push((name, plan, observed));
        }
        let started = Instant::now();
        let published = &published;
        let runs = planned
            .into_iter()
            .enumerate()
            .map(|(i, (name, plan, observed))| async move {
                let server = plan.server().map(str::to_owned);
                let run = Box::pin(self.run(published, plan, level, progress.get(i)));
                let Some((arguments, verdict, deciding)) = observed else {
                    return CallOutcome {
                        name,
                        result: run.await,
                        elapsed: started.elapsed(),
                    };
                };
                let (result, digested, backend) = observing(run).await;
                let elapsed = started.elapsed();
                self.tell(
                    &Told {
                        name: &name,
                        server: server.as_deref(),
                        arguments: arguments.as_ref(),
                        verdict: &verdict,
                        duration: deciding + elapsed,
                        digested: digested.as_ref(),
                        backend,
                    },
                    &result,
                );
                CallOutcome {
                    name,
                    result,
                    elapsed,
                }
            });
        futures::future::join_all(runs).await
    }

    /// Decides one call of a batch, before anything runs: the pipeline's
    /// first steps, the same for every tool — resolve, trust, gate — then
    /// what the tool needs at planning time.
    pub(crate) async fn decide(
        &self,
        published: &Published,
        name: &str,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> (Planned, Verdict) {
        let (verdict, route) = self
            .admit_with_verdict(published, name, &arguments, level)
            .await;
        let route = match route {
            Ok(route) => route,
            Err(e) => return (Planned::Done(Err(e)), verdict),
        };
        let plan = match route {
            Route::Mcp(route) => Planned::Run(route, arguments),
            // Each host tool's declared handler, planned here.
            Route::Host(tool) => match tool.handler {
                // Takes effect for the calls after it in this turn.
                Handler::RecordPlan => Planned::Done(self.record_plan(&arguments)),
                Handler::WaitAndVerify => {
                    match self.plan_wait(published, &arguments, level).await {
                        Ok((route, args)) => Planned::Wait(route, Box::new(args)),
                        Err(e) => Planned::Done(Err(e)),
                    }
                }
                Handler::RetrieveRaw => Planned::Raw(arguments),
                Handler::Survey(survey) => Planned::Survey(survey, arguments),
            },
        };
        (plan, verdict)
    }

    /// Runs a decided call.
    pub(crate) async fn run(
        &self,
        published: &Published,
        plan: Planned,
        level: TrustLevel,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let result = match plan {
            Planned::Done(result) => result,
            Planned::Run(route, arguments) => self.dispatch(&route, arguments, progress).await,
            Planned::Wait(route, args) => self.wait_and_verify(&route, *args).await,
            Planned::Raw(arguments) => self.retrieve_raw(published, &arguments, level),
            Planned::Survey(tool, arguments) => self.survey(tool, arguments).await,
        };
        result.map(|mut r| {
            crate::text::redact_result(self.host.redactor(), &mut r);
            r
        })
    }

    /// Resolve → trust → gate, for any tool: the route of an admitted call.
    pub(crate) async fn admit(
        &self,
        published: &Published,
        name: &str,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<Route> {
        self.admit_with_verdict(published, name, arguments, level)
            .await
            .1
    }

    /// [`Session::admit`], with what decided it.
    pub(crate) async fn admit_with_verdict(
        &self,
        published: &Published,
        name: &str,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> (Verdict, Result<Route>) {
        let survey = self.host.survey_access();
        let word = |w: &core_agent_mcp_policy::Warning| self.host.word(w);
        let route = match resolve(published, name, level, self.digest.is_some(), survey, &word)
            .and_then(|route| trust(&route, name, level, survey).map(|()| route))
        {
            Ok(route) => route,
            Err(e) => return (Verdict::of_refusal(&e), Err(e)),
        };
        let (namespace, read_only) = match &route {
            Route::Mcp(route) => (MCP, route.read_only),
            Route::Host(tool) if tool.gated => (BUILTIN, tool.read_only),
            Route::Host(_) => return (Verdict::Allowed { rule: None }, Ok(route)),
        };
        let request = Request {
            namespace,
            name,
            arguments,
            read_only,
        };
        let span = tracing::info_span!("gate", core_agent.gate.decision = tracing::field::Empty,);
        let (verdict, allowed) = gate_remembering(
            &self.gate,
            self.prompter.as_ref(),
            request,
            self.remembering(),
        )
        .instrument(span.clone())
        .await;
        span.record("core_agent.gate.decision", verdict.as_str());
        (verdict, allowed.map(|()| route))
    }

    /// Runs an admitted call: mutating calls hold the session's lock; the
    /// server's own limit bounds calls in flight. The result is as the server sent it.
    pub(crate) async fn dispatch_raw(
        &self,
        route: &ToolRoute,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let Some(server) = self.host.servers.at(route.server) else {
            return Err(Error::UnknownTool {
                name: route.tool.clone(),
                suggestions: Vec::new(),
            });
        };
        let _turn = if route.read_only {
            None
        } else {
            Some(self.mutation.lock().await)
        };
        let span = tracing::info_span!(
            "tools/call",
            otel.name = %format_args!("tools/call {}", route.tool),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = %route.tool,
            core_agent.server = %route.server_name,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = server
            .call_tool_with_progress(&route.tool, arguments, route.timeout, progress)
            .instrument(span.clone())
            .await;
        crate::observe::note_backend(started.elapsed());
        match &result {
            Ok(r) if r.is_error == Some(true) => crate::observe::span_failed(&span, "tool_error"),
            Ok(_) => {}
            Err(e) => crate::observe::span_failed(&span, crate::observe::error_type(e)),
        }
        Ok(result?)
    }

    /// Runs an admitted call and shapes its result for the caller (see [`shape`]).
    pub(crate) async fn dispatch(
        &self,
        route: &ToolRoute,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let result = self.dispatch_raw(route, arguments, progress).await?;
        Ok(shape(result, self.digest.as_ref(), route).await)
    }
}

/// A call after the gate, before dispatch.
pub(crate) enum Planned {
    Done(Result<CallToolResult>),
    Run(Arc<ToolRoute>, JsonObject),
    Wait(Arc<ToolRoute>, Box<tools::WaitArgs>),
    Raw(JsonObject),
    Survey(core_agent_survey::Tool, JsonObject),
}

impl Planned {
    /// The server the call goes to, when it goes to one.
    fn server(&self) -> Option<&str> {
        match self {
            Planned::Run(route, _) | Planned::Wait(route, _) => Some(&route.server_name),
            _ => None,
        }
    }
}

/// A call that ended, for [`Session::tell`].
pub(crate) struct Told<'a> {
    pub(crate) name: &'a str,
    pub(crate) server: Option<&'a str>,
    pub(crate) arguments: Option<&'a JsonObject>,
    pub(crate) verdict: &'a Verdict,
    pub(crate) duration: Duration,
    pub(crate) digested: Option<&'a crate::observe::DigestedResult>,
    pub(crate) backend: Option<Duration>,
}

/// Runs `call` with slots for what the digest does to its result and how
/// long its backend request takes.
pub(crate) async fn observing<T>(
    call: impl std::future::Future<Output = T>,
) -> (T, Option<crate::observe::DigestedResult>, Option<Duration>) {
    let call = async {
        let result = call.await;
        (result, DIGESTED.with(std::cell::Cell::take))
    };
    let ((result, digested), backend) = BACKEND
        .scope(std::cell::Cell::new(None), async {
            let done = DIGESTED.scope(std::cell::Cell::new(None), call).await;
            (done, BACKEND.with(std::cell::Cell::take))
        })
        .await;
    (result, digested, backend)
}
