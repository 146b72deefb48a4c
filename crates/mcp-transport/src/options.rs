//! The options every server starts under.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use core_agent_mcp_config::{EnvInherit, Redactor};
use std::time::Duration;

use crate::elicit::{Decline, Elicitor};
use crate::restart::RestartPolicy;
use crate::supervise::Supervisor;

/// How servers are started. Start from [`StartOptions::default`] and change
/// what you need with the `with_*` methods:
///
/// ```
/// use std::time::Duration;
/// use core_agent_mcp_transport::{RestartPolicy, StartOptions};
///
/// let options = StartOptions::default()
///     .with_timeout(Duration::from_secs(10))
///     .with_restart(Some(RestartPolicy::default()));
/// assert_eq!(options.kill_grace, Duration::from_secs(3));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct StartOptions {
    /// Limit on one server's start: spawn or connect, initialize, list every page of tools.
    pub timeout: Duration,
    /// How long a stdio child gets between SIGTERM and SIGKILL at shutdown.
    pub kill_grace: Duration,
    /// Answers servers' elicitation requests.
    pub elicitor: Arc<dyn Elicitor>,
    /// The `clientInfo` sent in `initialize`.
    pub client_name: String,
    /// The `clientInfo` version.
    pub client_version: String,
    /// Start each stdio server under this supervisor (see
    /// [`crate::supervise`]), so that nothing it starts outlives the host,
    /// even a host killed with `kill -9`. `None` (the default): spawn the
    /// server directly, in a process group of its own.
    pub supervisor: Option<Supervisor>,
    /// Answers servers' `sampling/createMessage`; `None`: sampling is not
    /// declared, and a request for it is refused.
    pub sampler: Option<Arc<dyn crate::Sampler>>,
    /// Answers servers' `roots/list`; `None`: roots are not declared.
    pub roots: Option<Arc<dyn crate::Roots>>,
    /// Hears what servers say outside any request's result (resources that
    /// changed, lists that changed, log messages); `None`: nobody listens.
    pub notices: Option<crate::NoticeSink>,
    /// Start a server again when its connection ends (a crash), with
    /// backoff. `None` (the default): it stays down, for one-shot use.
    pub restart: Option<RestartPolicy>,
    /// Where [`oauth::login`](crate::oauth::login) keeps OAuth credentials
    /// ([`CredentialsDir::user`](crate::oauth::CredentialsDir::user), the
    /// user's); `None`: every `auth.oauth` server needs a login.
    #[cfg(feature = "oauth")]
    pub credentials: Option<crate::oauth::CredentialsDir>,
    /// Shows the authorization page of an OAuth scope step-up (a server's 403
    /// `insufficient_scope` mid-session); `None`: the call fails, saying
    /// that a new login is needed.
    #[cfg(feature = "oauth")]
    pub browser: Option<Arc<dyn crate::oauth::Browser>>,
    /// Which of this process's variables a stdio server inherits when its
    /// entry sets no `env_inherit` (the default: [`EnvInherit::All`]).
    pub env_inherit: EnvInherit,
    /// Variables no stdio server inherits unless its own entry names them
    /// (in `env`, a placeholder or an `env_inherit` list): the front end's
    /// own credentials and the `.env` file's names. Every variable another
    /// entry's placeholder reads is withheld the same way, without being
    /// listed here.
    pub withheld: Arc<BTreeSet<String>>,
    /// Known secret values, replaced in a server's stderr lines (the tail
    /// kept for reports, and the log).
    pub redactor: Redactor,
    /// Variables every stdio server gets, over its own `env` and whatever
    /// `env_inherit` says (core-agent sets
    /// [`LINEAGE_VAR`](core_agent_mcp_config::LINEAGE_VAR) this way).
    pub set_env: Arc<BTreeMap<String, String>>,
}

impl fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The elicitor is a trait object with no `Debug`.
        let mut out = f.debug_struct("StartOptions");
        out.field("timeout", &self.timeout)
            .field("kill_grace", &self.kill_grace)
            .field("client_name", &self.client_name)
            .field("client_version", &self.client_version)
            .field("supervisor", &self.supervisor)
            .field("restart", &self.restart)
            .field("env_inherit", &self.env_inherit)
            .field("withheld", &self.withheld)
            .field("redactor", &self.redactor)
            .field("set_env", &self.set_env);
        #[cfg(feature = "oauth")]
        out.field("credentials", &self.credentials);
        out.finish_non_exhaustive()
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_secs(3),
            elicitor: Arc::new(Decline),
            client_name: "core-agent".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            supervisor: None,
            restart: None,
            notices: None,
            sampler: None,
            roots: None,
            #[cfg(feature = "oauth")]
            credentials: None,
            #[cfg(feature = "oauth")]
            browser: None,
            env_inherit: EnvInherit::All,
            withheld: Arc::default(),
            redactor: Redactor::default(),
            set_env: Arc::default(),
        }
    }
}

impl StartOptions {
    /// Limit on one server's start: spawn or connect, initialize, list every page of tools.
    pub fn with_timeout(mut self, timeout: Duration) -> StartOptions {
        self.timeout = timeout;
        self
    }

    /// How long a stdio child gets between SIGTERM and SIGKILL at shutdown.
    pub fn with_kill_grace(mut self, grace: Duration) -> StartOptions {
        self.kill_grace = grace;
        self
    }

    /// Answers servers' elicitation requests.
    pub fn with_elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> StartOptions {
        self.elicitor = elicitor;
        self
    }

    /// The `clientInfo` sent in `initialize`: name and version.
    pub fn with_client(
        mut self,
        name: impl Into<String>,
        version: impl Into<String>,
    ) -> StartOptions {
        self.client_name = name.into();
        self.client_version = version.into();
        self
    }

    /// Start each stdio server under this supervisor; `None`: directly.
    pub fn with_supervisor(mut self, supervisor: Option<Supervisor>) -> StartOptions {
        self.supervisor = supervisor;
        self
    }

    /// Start a server again when its connection ends; `None`: it stays down.
    pub fn with_restart(mut self, restart: Option<RestartPolicy>) -> StartOptions {
        self.restart = restart;
        self
    }

    /// Where OAuth credentials are kept; `None`: every `auth.oauth` server
    /// needs a login.
    #[cfg(feature = "oauth")]
    pub fn with_credentials(
        mut self,
        credentials: Option<crate::oauth::CredentialsDir>,
    ) -> StartOptions {
        self.credentials = credentials;
        self
    }

    /// Shows the authorization page of an OAuth scope step-up; `None`: the
    /// call fails, saying that a new login is needed.
    #[cfg(feature = "oauth")]
    pub fn with_browser(mut self, browser: Option<Arc<dyn crate::oauth::Browser>>) -> StartOptions {
        self.browser = browser;
        self
    }

    /// Which variables a stdio server inherits when its entry does not say.
    pub fn with_env_inherit(mut self, inherit: EnvInherit) -> StartOptions {
        self.env_inherit = inherit;
        self
    }

    /// Variables no stdio server inherits unless its own entry names them.
    pub fn with_withheld(mut self, names: impl IntoIterator<Item = String>) -> StartOptions {
        self.withheld = Arc::new(names.into_iter().collect());
        self
    }

    /// Variables every stdio server gets, over its own `env`.
    pub fn with_set_env(
        mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> StartOptions {
        self.set_env = Arc::new(vars.into_iter().collect());
        self
    }

    /// Known secret values, kept out of servers' stderr lines.
    pub fn with_redactor(mut self, redactor: Redactor) -> StartOptions {
        self.redactor = redactor;
        self
    }
}
