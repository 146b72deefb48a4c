use std::collections::BTreeMap;

/// Looks up a variable for `${env:NAME}` interpolation.
///
/// The process environment ([`ProcessEnv`]) is what the CLI uses; a map
/// ([`BTreeMap<String, String>`]) is handy in tests and for embedding hosts.
pub trait Env {
    /// The value of `name`, or `None` when it is not set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The environment of the current process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    }
}

impl Env for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl<E: Env + ?Sized> Env for &E {
    fn var(&self, name: &str) -> Option<String> {
        (**self).var(name)
    }
}
