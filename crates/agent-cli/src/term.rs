//! What a person at a terminal sees while core-agent works, and how it asks
//! them things.
//!
//! - [`Screen`]: the live lines on stderr (indicatif). They are drawn only
//!   when both stdout and stderr are terminals and the output is not JSON;
//!   otherwise nothing here draws, and lines are printed plainly.
//! - [`Startup`]: each server's state while servers start (`starting…`,
//!   then its tools and start time, or its error).
//! - [`CallLine`]: a call that takes longer than a second gets a line with
//!   the tool's name, the time so far, and the server's own progress.
//! - [`TtyElicitor`] and [`TtyPrompter`]: a server's elicitation, asked field
//!   by field (dialoguer), and the gate's asks, on stderr and stdin.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use core_agent_mcp_config::ServerEntry;
use core_agent_mcp_policy::ServerSummary;
use core_agent_mcp_transport::Server;
use core_agent_mcp_transport::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use core_agent_mcp_transport::{BoxFuture, Elicitor, Progress, ProgressSink, Status};
use core_agent_permissions::{Answer, AskFuture, Prompter};
use dialoguer::console::Term;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};

use crate::elicit_form::{Field, Kind};

/// How long a call runs before its progress line appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);
/// How often a live line redraws (the spinner and the elapsed time).
const TICK: Duration = Duration::from_millis(120);

/// The live lines on stderr, or nothing when they must not be drawn.
pub(crate) struct Screen {
    live: bool,
    multi: MultiProgress,
    /// How many prompts are on screen: the live lines are hidden meanwhile.
    paused: Mutex<usize>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen").field("live", &self.live).finish()
    }
}

impl Screen {
    /// Live when `live` (the caller checked the terminals and `--json`).
    pub(crate) fn new(live: bool) -> Arc<Screen> {
        let target = if live {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Arc::new(Screen {
            live,
            multi: MultiProgress::with_draw_target(target),
            paused: Mutex::new(0),
        })
    }

    /// Whether stdout and stderr are both terminals (not `TERM=dumb`) and
    /// `json` is off: the condition for drawing anything live.
    pub(crate) fn wanted(json: bool) -> bool {
        use std::io::IsTerminal;
        !json
            && std::io::stdout().is_terminal()
            && std::io::stderr().is_terminal()
            && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
    }

    /// Prints `line` on stderr, above the live lines.
    pub(crate) fn say(&self, line: &str) {
        self.multi.suspend(|| {
            #[allow(clippy::print_stderr)]
            {
                errln!("{line}");
            }
        });
    }

    /// Hides the live lines until the guard is dropped (while a prompt is
    /// on screen).
    pub(crate) fn pause(self: &Arc<Self>) -> Paused {
        if let Ok(mut n) = self.paused.lock() {
            if *n == 0 && self.live {
                let _ = self.multi.clear();
                self.multi.set_draw_target(ProgressDrawTarget::hidden());
            }
            *n += 1;
        }
        Paused(self.clone())
    }

    fn add(&self, bar: ProgressBar) -> ProgressBar {
        let bar = self.multi.add(bar);
        bar.enable_steady_tick(TICK);
        bar
    }
}

/// While it lives, the live lines are hidden.
pub(crate) struct Paused(Arc<Screen>);

impl Drop for Paused {
    fn drop(&mut self) {
        if let Ok(mut n) = self.0.paused.lock() {
            *n = n.saturating_sub(1);
            if *n == 0 && self.0.live {
                self.0.multi.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {prefix} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn plain_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// Each server's state while servers start.
pub(crate) struct Startup {
    screen: Arc<Screen>,
    /// Print servers that started (not only those that failed).
    show_ready: bool,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

impl Startup {
    /// Starts a live `starting…` line per server of `servers` (when the
    /// screen is live). A server that fails is always reported; one that
    /// starts only when `show_ready`.
    pub(crate) fn new(screen: Arc<Screen>, servers: &[ServerEntry], show_ready: bool) -> Startup {
        let mut bars = HashMap::new();
        if screen.live {
            for entry in servers {
                let bar = ProgressBar::hidden().with_style(spinner_style());
                bar.set_prefix(format!(
                    "core-agent: mcp: {} ({}):",
                    entry.name,
                    entry.spec.transport.kind()
                ));
                bar.set_message("starting…");
                bars.insert(entry.name.clone(), screen.add(bar));
            }
        }
        Startup {
            screen,
            show_ready,
            bars: Mutex::new(bars),
        }
    }

    /// Hears that `server`'s start ended.
    pub(crate) fn ready(&self, server: &Server, summary: Option<&ServerSummary>) {
        let (line, ok) = ready_line(server, summary);
        let show = !ok || self.show_ready;
        let bar = self
            .bars
            .lock()
            .ok()
            .and_then(|mut b| b.remove(server.name()));
        match bar {
            Some(bar) if show => {
                bar.set_style(plain_style());
                bar.finish_with_message(line);
            }
            Some(bar) => bar.finish_and_clear(),
            None if show => self.screen.say(&line),
            None => {}
        }
    }

    /// Clears the lines of servers still starting (they are stopped at exit).
    pub(crate) fn finish(&self) {
        if let Ok(mut bars) = self.bars.lock() {
            for (_, bar) in bars.drain() {
                bar.finish_and_clear();
            }
        }
    }
}

/// The line a server's start ends with, and whether it connected:
/// `core-agent: mcp: demo (stdio): 4 tools in 12 ms`.
pub(crate) fn ready_line(server: &Server, summary: Option<&ServerSummary>) -> (String, bool) {
    let ms = server.elapsed().as_millis();
    match server.status() {
        Status::Connected => {
            let tools = summary.map_or_else(
                || crate::count(server.tools().len(), "tool"),
                ToString::to_string,
            );
            (
                format!(
                    "core-agent: mcp: {} ({}): {tools} in {ms} ms",
                    server.name(),
                    server.transport(),
                ),
                true,
            )
        }
        Status::Error | Status::Closed | Status::Restarting | Status::Down => (
            format!(
                "core-agent: mcp: {} ({}): error after {ms} ms: {}",
                server.name(),
                server.transport(),
                core_agent_host::terminal_safe(&crate::words::commands::problem(server))
            ),
            false,
        ),
    }
}

/// The progress line of a call (or of a batch), shown once it has run for
/// a second; cleared when dropped.
pub(crate) struct CallLine {
    bar: ProgressBar,
    /// Set when the line is done: a late show must not add it back.
    done: Arc<Mutex<bool>>,
}

impl CallLine {
    /// A line labelled `label` (the tool's name, or `batch of N calls`).
    pub(crate) fn start(screen: &Arc<Screen>, label: &str) -> CallLine {
        let bar = ProgressBar::hidden().with_style(
            ProgressStyle::with_template("{spinner} {prefix} {elapsed} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(label.to_owned());
        let done = Arc::new(Mutex::new(false));
        if screen.live {
            let (screen, bar, done) = (screen.clone(), bar.clone(), done.clone());
            tokio::spawn(async move {
                tokio::time::sleep(SHOW_AFTER).await;
                if let Ok(done) = done.lock()
                    && !*done
                {
                    screen.add(bar);
                }
            });
        }
        CallLine { bar, done }
    }

    /// A sink that puts the server's progress updates on this line, each
    /// prefixed with `tool` when given (a batch names the call).
    pub(crate) fn sink(&self, tool: Option<&str>) -> ProgressSink {
        let bar = self.bar.clone();
        let tool = tool.map(|t| format!("{t}: "));
        Arc::new(move |p: Progress| {
            bar.set_message(format!(
                "{}{}",
                tool.as_deref().unwrap_or(""),
                describe_progress(&p)
            ));
        })
    }
}

impl Drop for CallLine {
    fn drop(&mut self) {
        if let Ok(mut done) = self.done.lock() {
            *done = true;
        }
        self.bar.finish_and_clear();
    }
}

/// `2/5 · copying files`, `40 · …`: a progress update as the line shows it.
pub(crate) fn describe_progress(p: &Progress) -> String {
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            format!("{n:.1}")
        }
    };
    let mut out = match p.total {
        Some(total) => format!("{}/{}", number(p.progress), number(total)),
        None => number(p.progress),
    };
    if let Some(message) = p.message.as_deref().filter(|m| !m.trim().is_empty()) {
        out.push_str(" · ");
        out.push_str(&core_agent_host::terminal_safe(message.trim()));
    }
    out
}

/// Answers a server's elicitation by asking the person at the terminal.
pub(crate) struct TtyElicitor {
    screen: Arc<Screen>,
    /// One elicitation on screen at a time.
    one: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TtyElicitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtyElicitor").finish_non_exhaustive()
    }
}

impl TtyElicitor {
    pub(crate) fn new(screen: Arc<Screen>) -> TtyElicitor {
        TtyElicitor {
            screen,
            one: tokio::sync::Mutex::new(()),
        }
    }
}

impl Elicitor for TtyElicitor {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        Box::pin(async move {
            let _one = self.one.lock().await;
            let _paused = self.screen.pause();
            let server = server.to_owned();
            // The prompt blocks on the terminal: on a thread of its own, so
            // the runtime (and Ctrl-C) keeps running.
            let asked = tokio::task::spawn_blocking(move || ask(&server, request)).await;
            asked.unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel))
        })
    }

    fn accepts_url(&self) -> bool {
        true
    }
}

/// Asks one elicitation on the terminal; a terminal error cancels it.
fn ask(server: &str, request: ElicitRequestParams) -> ElicitResult {
    let term = Term::stderr();
    let asked = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
            ask_form(&term, server, &message, &schema)
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            ask_url(&term, server, &message, &url)
        }
        _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
    };
    asked.unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel))
}

fn clean(s: &str) -> String {
    core_agent_host::terminal_safe(s)
}

/// The first question of every elicitation: answer, decline or cancel
/// (Esc cancels too).
fn answer_or_not(term: &Term, answer: &str) -> dialoguer::Result<ElicitationAction> {
    let choice = dialoguer::Select::new()
        .with_prompt("Answer?")
        .items([answer, "decline", "cancel"])
        .default(0)
        .interact_on_opt(term)?;
    Ok(match choice {
        Some(0) => ElicitationAction::Accept,
        Some(1) => ElicitationAction::Decline,
        _ => ElicitationAction::Cancel,
    })
}

fn ask_form(
    term: &Term,
    server: &str,
    message: &str,
    schema: &Value,
) -> dialoguer::Result<ElicitResult> {
    term.write_line(&format!(
        "core-agent: mcp: {server} asks: {}",
        clean(message.trim())
    ))?;
    let fields = crate::elicit_form::fields(schema);
    match answer_or_not(term, "fill in the form")? {
        ElicitationAction::Accept => {}
        other => return Ok(ElicitResult::new(other)),
    }
    let mut content = Map::new();
    for field in &fields {
        match ask_field(term, field)? {
            Asked::Value(v) => {
                content.insert(field.name.clone(), v);
            }
            Asked::Skip => {}
            Asked::Cancel => return Ok(ElicitResult::new(ElicitationAction::Cancel)),
        }
    }
    Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)))
}

fn ask_url(term: &Term, server: &str, message: &str, url: &str) -> dialoguer::Result<ElicitResult> {
    term.write_line(&format!(
        "core-agent: mcp: {server} asks you to open a URL: {}",
        clean(message.trim())
    ))?;
    term.write_line(&format!("    {}", clean(url)))?;
    let action = answer_or_not(term, "done: I opened it, continue")?;
    Ok(ElicitResult::new(action))
}

/// What one field's prompt gave.
enum Asked {
    Value(Value),
    Skip,
    Cancel,
}

fn ask_field(term: &Term, field: &Field) -> dialoguer::Result<Asked> {
    let prompt = field.prompt();
    match &field.kind {
        // An enum with no values (or an array of anything but an enum):
        // nothing to pick, so nothing is sent for it.
        Kind::Choice { values, .. } | Kind::Multi { values, .. } if values.is_empty() => {
            term.write_line(&format!("{prompt}: skipped (no choices given)"))?;
            Ok(Asked::Skip)
        }
        Kind::Bool => {
            let default = field.default.as_ref().and_then(Value::as_bool);
            let mut confirm = dialoguer::Confirm::new().with_prompt(prompt);
            if let Some(d) = default {
                confirm = confirm.default(d);
            }
            Ok(match confirm.interact_on_opt(term)? {
                Some(b) => Asked::Value(Value::Bool(b)),
                None => Asked::Cancel,
            })
        }
        Kind::Choice { values, labels } => {
            let mut items: Vec<String> = labels.clone();
            if !field.required {
                items.push("(none)".to_owned());
            }
            let default = field
                .default
                .as_ref()
                .and_then(|d| values.iter().position(|v| v == d))
                .unwrap_or(0);
            let picked = dialoguer::Select::new()
                .with_prompt(prompt)
                .items(&items)
                .default(default)
                .interact_on_opt(term)?;
            Ok(match picked {
                Some(i) if i < values.len() => Asked::Value(values[i].clone()),
                Some(_) => Asked::Skip,
                None => Asked::Cancel,
            })
        }
        Kind::Multi { values, labels, .. } => {
            let defaults: Vec<bool> = values
                .iter()
                .map(|v| {
                    field
                        .default
                        .as_ref()
                        .and_then(Value::as_array)
                        .is_some_and(|d| d.contains(v))
                })
                .collect();
            loop {
                let picked = dialoguer::MultiSelect::new()
                    .with_prompt(format!("{prompt} (space toggles, Enter accepts)"))
                    .items(labels)
                    .defaults(&defaults)
                    .interact_on_opt(term)?;
                let Some(picked) = picked else {
                    return Ok(Asked::Cancel);
                };
                let chosen: Vec<Value> = picked.iter().map(|&i| values[i].clone()).collect();
                match field.check_items(chosen.len()) {
                    Ok(()) if chosen.is_empty() && !field.required => return Ok(Asked::Skip),
                    Ok(()) => return Ok(Asked::Value(Value::Array(chosen))),
                    Err(e) => term.write_line(&format!("  {e}"))?,
                }
            }
        }
        Kind::Text { .. } | Kind::Number { .. } => {
            let mut input = dialoguer::Input::<String>::new()
                .with_prompt(prompt)
                .allow_empty(true);
            if let Some(default) = field.default_text() {
                input = input.default(default).show_default(true);
            }
            let checker = field.clone();
            let text = input
                .validate_with(move |s: &String| checker.parse(s).map(|_| ()))
                .interact_on(term)?;
            Ok(match field.parse(&text) {
                Ok(Some(v)) => Asked::Value(v),
                Ok(None) => Asked::Skip,
                // The validator already refused what parse refuses.
                Err(_) => Asked::Cancel,
            })
        }
    }
}

/// Asks the gate's question: y (this call), n, or a (always, this session).
pub(crate) struct TtyPrompter {
    pub(crate) screen: Arc<Screen>,
}

impl Prompter for TtyPrompter {
    /// Reads the answer on a blocking thread, so the runtime keeps running
    /// (and Ctrl-C, caught by the runtime, still stops the servers).
    fn ask<'a>(&'a self, _tool: &'a str, detail: &'a str) -> AskFuture<'a> {
        let question = format!(
            "core-agent: allow {}? [y]es / [n]o / [a]lways this session: ",
            clean(detail)
        );
        Box::pin(async move {
            let _paused = self.screen.pause();
            let read = tokio::task::spawn_blocking(move || {
                #[allow(clippy::print_stderr)]
                {
                    eprint!("{question}");
                }
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            });
            match read.await {
                Ok(Ok(line)) => match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => Answer::Yes,
                    "a" | "always" => Answer::Always,
                    _ => Answer::No,
                },
                _ => Answer::No,
            }
        })
    }
}

impl std::fmt::Debug for TtyPrompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtyPrompter").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_a_fraction_with_its_message() {
        let p = |progress, total, message: Option<&str>| Progress {
            progress,
            total,
            message: message.map(str::to_owned),
        };
        assert_eq!(describe_progress(&p(2.0, Some(5.0), None)), "2/5");
        assert_eq!(
            describe_progress(&p(0.5, Some(1.0), Some("copying\u{1b}[2J"))),
            "0.5/1 · copying"
        );
        assert_eq!(describe_progress(&p(40.0, None, Some("  "))), "40");
    }
}
