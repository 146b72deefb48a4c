//! From loaded config files to [`HostOptions`]: where `config.json` lives,
//! the digest switches and threshold, the raw store, and the LLM second
//! chance's model chain and pricing. A front end maps its flags to
//! [`Overrides`]; the domain decisions are made here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use core_agent_digest::{MemoryStore, Price, Pricing, Settings, Store};
use core_agent_mcp_config::Config;
use core_agent_permissions::PermissionsConfig;

use crate::{DigestOptions, HostOptions, SurveyOptions};

/// How long one LLM summary may take.
#[cfg(feature = "llm")]
const LLM_TIMEOUT: Duration = Duration::from_secs(30);

/// What a caller (the command line, a library user) sets over the config
/// files. `None` and `false` leave the config's choice: start from
/// [`Overrides::default`] and set what the caller chose with the `with_*`
/// methods.
///
/// ```
/// use std::time::Duration;
///
/// use core_agent_host::Overrides;
///
/// let overrides = Overrides::default()
///     .with_call_timeout(Some(Duration::from_secs(60)))
///     .with_no_survey(true);
/// assert!(!overrides.no_digest);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Overrides {
    /// Limit on each server's start.
    pub start_timeout: Option<Duration>,
    /// Limit on each call, over every server's `call_timeout_ms`.
    pub call_timeout: Option<Duration>,
    /// Turn the digest off (`--no-mcp-digest`), whatever the config says.
    pub no_digest: bool,
    /// Keep raw payloads and telemetry in this SQLite file instead of memory.
    pub session_db: Option<PathBuf>,
    /// Turn the LLM second chance on (`Some(true)`) over `agentic_wrap_llm`.
    pub llm: Option<bool>,
    /// The second chance's model, over `agentic_wrap_model`.
    pub llm_model: Option<String>,
    /// The small model used when no MCP-specific one is set.
    pub small_model: Option<String>,
    /// The default per-session spending ceiling of the second chance, in US dollars.
    pub cost_ceiling: Option<f64>,
    /// Turn the survey tools off (`--no-survey`), whatever the config says.
    pub no_survey: bool,
    /// The directory the survey tools are confined to: the project root
    /// ([`project_root`]). `None` leaves them off.
    pub survey_root: Option<PathBuf>,
}

impl Overrides {
    /// Limit on each server's start.
    #[must_use]
    pub fn with_start_timeout(mut self, timeout: Option<Duration>) -> Overrides {
        self.start_timeout = timeout;
        self
    }

    /// Limit on each call, over every server's `call_timeout_ms`.
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Option<Duration>) -> Overrides {
        self.call_timeout = timeout;
        self
    }

    /// Turn the digest off, whatever the config says.
    #[must_use]
    pub fn with_no_digest(mut self, off: bool) -> Overrides {
        self.no_digest = off;
        self
    }

    /// Keep raw payloads and telemetry in this SQLite file instead of memory.
    #[must_use]
    pub fn with_session_db(mut self, path: Option<PathBuf>) -> Overrides {
        self.session_db = path;
        self
    }

    /// Turn the LLM second chance on (`Some(true)`) or off over `agentic_wrap_llm`.
    #[must_use]
    pub fn with_llm(mut self, llm: Option<bool>) -> Overrides {
        self.llm = llm;
        self
    }

    /// The second chance's model, over `agentic_wrap_model`.
    #[must_use]
    pub fn with_llm_model(mut self, model: Option<String>) -> Overrides {
        self.llm_model = model;
        self
    }

    /// The small model used when no MCP-specific one is set.
    #[must_use]
    pub fn with_small_model(mut self, model: Option<String>) -> Overrides {
        self.small_model = model;
        self
    }

    /// The default per-session spending ceiling of the second chance, in US dollars.
    #[must_use]
    pub fn with_cost_ceiling(mut self, dollars: Option<f64>) -> Overrides {
        self.cost_ceiling = dollars;
        self
    }

    /// Turn the survey tools off, whatever the config says.
    #[must_use]
    pub fn with_no_survey(mut self, off: bool) -> Overrides {
        self.no_survey = off;
        self
    }

    /// The directory the survey tools are confined to (`None` leaves them off).
    #[must_use]
    pub fn with_survey_root(mut self, root: Option<PathBuf>) -> Overrides {
        self.survey_root = root;
        self
    }
}

/// The project root of an agents directory: the directory that holds it
/// (`.agents` → `.`), where `.mcp.json` and `.env` are read and the survey
/// tools look.
pub fn project_root(agents_dir: &Path) -> PathBuf {
    match agents_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The Host's options built from the config, and what the operator should
/// hear about how (a second chance that stays off, and why). Only
/// [`HostConfig::from_config`] makes one.
#[derive(Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// Ready for [`crate::Host::start`] (add an elicitor to `start`).
    pub options: HostOptions,
    /// Notices for the operator, one line each.
    pub notices: Vec<String>,
    /// Model prices: the built-in table overlaid with `agentic_wrap_pricing`
    /// (what the LLM second chance costs, and what a digest saves a parent model).
    pub pricing: Pricing,
}

impl std::fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostConfig")
            .field("notices", &self.notices)
            .finish_non_exhaustive()
    }
}

/// core-agent's own credentials in its environment: redacted wherever
/// they could show, and inherited by no stdio server.
const CREDENTIALS: &[&str] = &[
    "CORE_AGENT_GATEWAY_TOKEN",
    "CORE_AGENT_LLM_API_KEY",
    "CORE_AGENT_STORE",
];

/// Keeps `config`'s secrets from the stdio servers that do not name them
/// and out of what they write: every variable a placeholder reads, every
/// `.env` entry and every `CORE_AGENT_*` variable is withheld (added to
/// `start.withheld`), and their values, with [`CREDENTIALS`], go into
/// `start.redactor`.
pub(crate) fn guard_secrets(start: &mut core_agent_mcp_transport::StartOptions, config: &Config) {
    let env = config.dotenv.over_process();
    let own: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with("CORE_AGENT_"))
        .collect();
    let mut withheld = (*start.withheld).clone();
    withheld.extend(config.secret_variables());
    withheld.extend(own.iter().map(|(k, _)| k.clone()));
    start.withheld = Arc::new(withheld);
    let credentials = own
        .into_iter()
        .filter(|(k, _)| CREDENTIALS.contains(&k.as_str()));
    start.redactor = core_agent_mcp_config::Redactor::of(config, &env)
        .with(credentials)
        .union(&start.redactor);
}

/// The two `config.json` files of a project: `<agents_dir>/config.json` and
/// `~/.agents/config.json` (none when `HOME` is unset or empty).
pub fn permission_files(agents_dir: &Path) -> (PathBuf, Option<PathBuf>) {
    let user = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".agents").join("config.json"));
    (agents_dir.join("config.json"), user)
}

/// Loads the project's and the user's `config.json`.
pub fn load_permissions(
    agents_dir: &Path,
) -> std::result::Result<PermissionsConfig, core_agent_permissions::Error> {
    let (project, user) = permission_files(agents_dir);
    PermissionsConfig::load(&project, user.as_deref())
}

impl HostConfig {
    /// Decides the Host's options: the digest is on unless `agentic_wrap:
    /// false` or `no_digest`; its threshold is `agentic_wrap_threshold`; raw
    /// payloads go to `session_db` or memory; the LLM second chance is on
    /// when either the flag or `agentic_wrap_llm` says so and an endpoint is
    /// configured (`CORE_AGENT_LLM_BASE_URL`), with its model chosen from the
    /// flag, then `agentic_wrap_model`, then the small model, then the
    /// default, priced by the built-in table overlaid with
    /// `agentic_wrap_pricing`, shown at most `agentic_wrap_llm_max_input_bytes`
    /// of a payload (256 KiB by default). The survey tools are on, over
    /// `survey_root`, unless `"survey": false` or `no_survey`.
    pub fn from_config(
        config: &Config,
        permissions: PermissionsConfig,
        overrides: &Overrides,
    ) -> crate::Result<HostConfig> {
        let mut options = HostOptions {
            call_timeout: overrides.call_timeout,
            permissions,
            ..HostOptions::default()
        };
        if let Some(t) = overrides.start_timeout {
            options.start.timeout = t;
        }
        guard_secrets(&mut options.start, config);
        // Logins keep OAuth credentials per user.
        #[cfg(feature = "oauth")]
        {
            options.start.credentials = core_agent_mcp_transport::oauth::CredentialsDir::user();
        }
        let survey_on = !overrides.no_survey && config.survey.as_ref().is_none_or(|s| s.value);
        if survey_on && let Some(root) = &overrides.survey_root {
            let mut survey = SurveyOptions::new(root.clone())
                .with_access(config.builtin.clone().unwrap_or_default());
            // The session database is core-agent's own: below the creator,
            // nobody reads it through the survey tools.
            if let Some(db) = &overrides.session_db {
                survey = survey.with_hidden_file(db.clone());
            }
            options.survey = Some(survey);
        }
        let mut notices = Vec::new();
        let wrap_on = !overrides.no_digest && config.wrap.enabled.as_ref().is_none_or(|s| s.value);
        if wrap_on {
            let store: Arc<dyn Store> = match &overrides.session_db {
                #[cfg(feature = "sqlite")]
                Some(path) => Arc::new(core_agent_digest::SqliteStore::open(path)?),
                #[cfg(not(feature = "sqlite"))]
                Some(_) => {
                    return Err(crate::Error::FeatureOff {
                        feature: "sqlite",
                        what: "a session database",
                    });
                }
                None => Arc::new(MemoryStore::new()),
            };
            let mut settings = Settings::default();
            if let Some(t) = &config.wrap.threshold {
                settings.threshold = usize::try_from(t.value).unwrap_or(usize::MAX);
            }
            let llm_on =
                overrides.llm == Some(true) || config.wrap.llm.as_ref().is_some_and(|s| s.value);
            let llm = if llm_on {
                llm_path(config, overrides, &mut notices)
            } else {
                None
            };
            options.digest = Some(DigestOptions {
                settings,
                store,
                llm,
            });
        }
        Ok(HostConfig {
            options,
            notices,
            pricing: pricing(config),
        })
    }
}

/// The second chance's model: the override, then `agentic_wrap_model`, then
/// the small model, then the default.
#[cfg(any(feature = "llm", test))]
fn model(config: &Config, overrides: &Overrides) -> String {
    let config_model = config.wrap.model.as_ref().map(|s| s.value.as_str());
    let mcp_model = overrides.llm_model.as_deref().or(config_model);
    core_agent_digest::choose_model(mcp_model, overrides.small_model.as_deref()).to_owned()
}

/// The built-in price table overlaid with `agentic_wrap_pricing`.
fn pricing(config: &Config) -> Pricing {
    let mut pricing = Pricing::default();
    for (name, p) in config.wrap.pricing.iter().flat_map(|s| s.value.iter()) {
        let price = Price {
            input: p.input,
            cached_input: p.cached_input,
            output: p.output,
        };
        pricing.set(name, price);
    }
    pricing
}

/// The LLM second chance over the OpenAI-compatible endpoint the
/// environment names, or `None` with a notice saying why it stays off.
#[cfg(feature = "llm")]
fn llm_path(
    config: &Config,
    overrides: &Overrides,
    notices: &mut Vec<String>,
) -> Option<crate::LlmPath> {
    match crate::OpenAiSummarizer::from_env(LLM_TIMEOUT) {
        Some(Ok(summarizer)) => Some(crate::LlmPath {
            summarizer: Arc::new(summarizer),
            model: model(config, overrides),
            pricing: pricing(config),
            cost_ceiling: overrides.cost_ceiling,
            timeout: LLM_TIMEOUT,
            max_input_bytes: config
                .wrap
                .llm_max_input_bytes
                .as_ref()
                .map_or(core_agent_digest::DEFAULT_MAX_INPUT_BYTES, |s| {
                    usize::try_from(s.value).unwrap_or(usize::MAX).max(1)
                }),
        }),
        Some(Err(e)) => {
            notices.push(format!("digest: the LLM second chance is off: {e}"));
            None
        }
        None => {
            notices.push("digest: the LLM second chance is on but CORE_AGENT_LLM_BASE_URL is not set; it stays off".to_owned());
            None
        }
    }
}

/// Without the `llm` feature there is no client: the second chance stays off.
#[cfg(not(feature = "llm"))]
fn llm_path(
    _config: &Config,
    _overrides: &Overrides,
    notices: &mut Vec<String>,
) -> Option<crate::LlmPath> {
    notices.push(
        "digest: the LLM second chance is on but this build has no LLM client; it stays off"
            .to_owned(),
    );
    None
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_config::{ModelPrice, Setting};

    use super::*;

    fn setting<T>(value: T) -> Option<Setting<T>> {
        Some(Setting {
            value,
            source: PathBuf::from("mcp.json"),
        })
    }

    #[test]
    fn the_digest_follows_the_config_and_the_overrides() {
        let mut config = Config::default();
        let on = |c: &Config, o: &Overrides| {
            HostConfig::from_config(c, PermissionsConfig::default(), o)
                .unwrap()
                .options
                .digest
                .map(|d| d.settings.threshold)
        };
        assert_eq!(on(&config, &Overrides::default()), Some(8000));
        config.wrap.threshold = setting(500);
        assert_eq!(on(&config, &Overrides::default()), Some(500));
        let off = Overrides {
            no_digest: true,
            ..Overrides::default()
        };
        assert_eq!(on(&config, &off), None);
        config.wrap.enabled = setting(false);
        assert_eq!(on(&config, &Overrides::default()), None);
    }

    #[test]
    fn the_survey_tools_follow_the_config_and_the_overrides() {
        let mut config = Config::default();
        let root = |c: &Config, o: &Overrides| {
            HostConfig::from_config(c, PermissionsConfig::default(), o)
                .unwrap()
                .options
                .survey
                .map(|s| s.root)
        };
        let mut o = Overrides {
            survey_root: Some(project_root(Path::new("proj/.agents"))),
            ..Overrides::default()
        };
        assert_eq!(root(&config, &o), Some(PathBuf::from("proj")));
        assert_eq!(project_root(Path::new(".agents")), PathBuf::from("."));
        config.survey = setting(false);
        assert_eq!(root(&config, &o), None);
        config.survey = setting(true);
        o.no_survey = true;
        assert_eq!(root(&config, &o), None);
        assert_eq!(root(&config, &Overrides::default()), None);
    }

    #[test]
    fn the_model_chain_and_prices_come_from_flags_then_config() {
        let mut config = Config::default();
        let mut o = Overrides::default();
        assert_eq!(model(&config, &o), core_agent_digest::DEFAULT_MODEL);
        o.small_model = Some("small".into());
        assert_eq!(model(&config, &o), "small");
        config.wrap.model = setting("from-config".to_owned());
        assert_eq!(model(&config, &o), "from-config");
        o.llm_model = Some("from-flag".into());
        assert_eq!(model(&config, &o), "from-flag");

        config.wrap.pricing = setting(
            [(
                "m".to_owned(),
                ModelPrice {
                    input: 1.0,
                    cached_input: 0.5,
                    output: 2.0,
                },
            )]
            .into_iter()
            .collect(),
        );
        let p = pricing(&config);
        assert!((p.cost("m", 1_000_000, 1_000_000) - 3.0).abs() < 1e-9);
    }

    #[cfg(feature = "llm")]
    #[test]
    fn a_missing_endpoint_keeps_the_second_chance_off_with_a_notice() {
        let mut config = Config::default();
        config.wrap.llm = setting(true);
        // The test runs without CORE_AGENT_LLM_BASE_URL (cargo xtask test sets none).
        let hc =
            HostConfig::from_config(&config, PermissionsConfig::default(), &Overrides::default())
                .unwrap();
        assert!(hc.options.digest.unwrap().llm.is_none());
        assert_eq!(hc.notices.len(), 1);
        assert!(hc.notices[0].contains("CORE_AGENT_LLM_BASE_URL is not set"));
    }
}
