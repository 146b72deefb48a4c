//! `auth.google_oauth`: Google access tokens from Application Default
//! Credentials, found the way Google's tools find them.
//!
//! The flows (self-signed JWTs for a service-account key, the refresh-token
//! grant for gcloud's authorized user, the metadata server) and the token
//! cache are the `google-cloud-auth` crate's; this module only decides where
//! the credentials are, so that it can say so, and turns failures into
//! advice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use core_agent_mcp_config::Env;
use futures::future::BoxFuture;
use google_cloud_auth::credentials::{
    CacheableResource, Credentials, mds, service_account, user_account,
};
use serde_json::Value;

use crate::auth::{AuthError, Token, TokenSource};

/// Where Application Default Credentials were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdcSource {
    /// `GOOGLE_APPLICATION_CREDENTIALS` names this file.
    FromEnv(PathBuf),
    /// gcloud's `application_default_credentials.json` (under
    /// `$CLOUDSDK_CONFIG`, or `~/.config/gcloud`).
    WellKnown(PathBuf),
    /// Neither: the metadata server of GCE, GKE or Cloud Run, at this host.
    Metadata {
        /// `GCE_METADATA_HOST`, or `metadata.google.internal`.
        host: String,
        /// The file gcloud would have written, which does not exist.
        missing: Option<PathBuf>,
    },
}

/// The default metadata server.
const METADATA_HOST: &str = "metadata.google.internal";

impl AdcSource {
    /// Looks where Google's client libraries look, in their order. Reads
    /// only variables; the file is read when the first token is asked for.
    pub(crate) fn find(env: &dyn Env) -> AdcSource {
        if let Some(path) = env
            .var("GOOGLE_APPLICATION_CREDENTIALS")
            .filter(|p| !p.is_empty())
        {
            return AdcSource::FromEnv(PathBuf::from(path));
        }
        let well_known = match env.var("CLOUDSDK_CONFIG").filter(|p| !p.is_empty()) {
            Some(dir) => Some(PathBuf::from(dir)),
            None => env
                .var("HOME")
                .map(|home| Path::new(&home).join(".config").join("gcloud")),
        }
        .map(|dir| dir.join("application_default_credentials.json"));
        match well_known {
            Some(path) if path.is_file() => AdcSource::WellKnown(path),
            missing => AdcSource::Metadata {
                host: env
                    .var("GCE_METADATA_HOST")
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| METADATA_HOST.to_owned()),
                missing,
            },
        }
    }
}

/// Tokens from Application Default Credentials for `scopes`.
pub(crate) struct GoogleAdc {
    source: AdcSource,
    /// The credentials file, read once when the source is made.
    file: Result<Value, AuthError>,
    scopes: Vec<String>,
    /// `GOOGLE_CLOUD_QUOTA_PROJECT`, which overrides the credentials' own.
    quota_project: Option<String>,
    /// Built on the first `token`, dropped when the server rejects a token;
    /// the crate caches the token inside and refreshes it before it expires.
    credentials: tokio::sync::Mutex<Option<Credentials>>,
    /// The last token handed out, so that several requests refused with
    /// the same token drop the credentials once, not once each.
    last: std::sync::Mutex<Option<Token>>,
}

impl std::fmt::Debug for GoogleAdc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the file: a key is a secret.
        f.debug_struct("GoogleAdc")
            .field("source", &self.source)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl GoogleAdc {
    pub(crate) fn new(scopes: Vec<String>, env: &dyn Env) -> GoogleAdc {
        let source = AdcSource::find(env);
        let mut adc = GoogleAdc {
            source,
            file: Ok(Value::Null),
            scopes,
            quota_project: env
                .var("GOOGLE_CLOUD_QUOTA_PROJECT")
                .filter(|p| !p.is_empty()),
            credentials: tokio::sync::Mutex::new(None),
            last: std::sync::Mutex::new(None),
        };
        if let AdcSource::FromEnv(path) | AdcSource::WellKnown(path) = &adc.source {
            adc.file = read_json(path, &adc.source, &adc.login_fix());
        }
        adc
    }

    /// The `type` of the credentials file, in words.
    fn kind(&self) -> String {
        let kind = self
            .file
            .as_ref()
            .ok()
            .and_then(|json| json.get("type"))
            .and_then(Value::as_str);
        match kind {
            Some("service_account") => "service account key".to_owned(),
            Some("authorized_user") => "authorized user".to_owned(),
            Some(other) => format!("`{other}` credentials"),
            None => "credentials file".to_owned(),
        }
    }

    /// What to run to get working credentials.
    fn login_fix(&self) -> String {
        let cloud_platform = "https://www.googleapis.com/auth/cloud-platform";
        let mut scopes = vec![cloud_platform];
        scopes.extend(
            self.scopes
                .iter()
                .map(String::as_str)
                .filter(|s| *s != cloud_platform),
        );
        format!(
            "run `gcloud auth application-default login --scopes={}`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file",
            scopes.join(",")
        )
    }

    /// Reads the credentials file and builds the crate's credentials.
    fn build(&self) -> Result<Credentials, AuthError> {
        let (path, json) = match &self.source {
            AdcSource::Metadata { host, .. } => {
                let mut builder = mds::Builder::default()
                    .with_endpoint(format!("http://{host}"))
                    .with_scopes(self.scopes.clone());
                if let Some(project) = &self.quota_project {
                    builder = builder.with_quota_project_id(project.clone());
                }
                return builder
                    .build()
                    .map_err(|e| AuthError::Other(format!("{}: {e}", self.describe())));
            }
            AdcSource::FromEnv(path) | AdcSource::WellKnown(path) => (path, self.file.clone()?),
        };
        let quota_project = self.quota_project.clone().or_else(|| {
            json.get("quota_project_id")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
        });
        let kind = json
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let built = match kind.as_str() {
            "service_account" => {
                let mut builder = service_account::Builder::new(json).with_access_specifier(
                    service_account::AccessSpecifier::from_scopes(self.scopes.clone()),
                );
                if let Some(project) = quota_project {
                    builder = builder.with_quota_project_id(project);
                }
                builder.build()
            }
            "authorized_user" => {
                let mut builder = user_account::Builder::new(json).with_scopes(self.scopes.clone());
                if let Some(project) = quota_project {
                    builder = builder.with_quota_project_id(project);
                }
                builder.build()
            }
            other => {
                return Err(AuthError::NotConfigured {
                    source_tried: format!(
                        "{} is a `{other}` credentials file, which core-agent does not use",
                        path.display()
                    ),
                    fix: format!(
                        "use a service-account key (\"type\": \"service_account\") or {}",
                        self.login_fix().trim_start_matches("run ")
                    ),
                });
            }
        };
        built.map_err(|e| AuthError::NotConfigured {
            source_tried: format!("{} cannot be used: {e}", path.display()),
            fix: self.login_fix(),
        })
    }

    /// A failure of the crate to produce a token, as advice.
    fn failed(&self, e: &google_cloud_auth::errors::CredentialsError) -> AuthError {
        let reason = innermost(e);
        match &self.source {
            // Nothing configured anywhere: the metadata server was the last resort.
            AdcSource::Metadata { host, missing } if e.is_transient() || host == METADATA_HOST => {
                AuthError::NotConfigured {
                    source_tried: format!(
                        "GOOGLE_APPLICATION_CREDENTIALS is not set, {}, and the metadata server at {host} gave no token: {reason}",
                        match missing {
                            Some(path) => format!("{} does not exist", path.display()),
                            None => "HOME is not set".to_owned(),
                        }
                    ),
                    fix: self.login_fix(),
                }
            }
            AdcSource::Metadata { host, .. } => AuthError::Refused {
                source_used: self.describe(),
                reason,
                fix: format!(
                    "check that the service account of this machine ({host}) has the scopes {}",
                    self.scopes.join(" ")
                ),
            },
            _ if e.is_transient() => AuthError::Unreachable {
                source_used: self.describe(),
                endpoint: "the token endpoint".to_owned(),
                reason,
            },
            _ => AuthError::Refused {
                source_used: self.describe(),
                reason,
                fix: self.login_fix(),
            },
        }
    }
}

/// Reads a credentials file named by `source`.
fn read_json(path: &Path, source: &AdcSource, fix: &str) -> Result<Value, AuthError> {
    let text = std::fs::read_to_string(path).map_err(|e| AuthError::NotConfigured {
        source_tried: match source {
            AdcSource::FromEnv(_) => format!(
                "GOOGLE_APPLICATION_CREDENTIALS names {}, which cannot be read: {e}",
                path.display()
            ),
            _ => format!("{} cannot be read: {e}", path.display()),
        },
        fix: fix.to_owned(),
    })?;
    // serde_json's message names the line and column, never the content.
    serde_json::from_str(&text).map_err(|e| AuthError::NotConfigured {
        source_tried: format!("{} is not a JSON credentials file ({e})", path.display()),
        fix: fix.to_owned(),
    })
}

/// The innermost cause of a credentials error (the HTTP status and URL, the
/// connection error), without the crate's long "run gcloud auth …" text:
/// our own advice replaces it.
fn innermost(e: &google_cloud_auth::errors::CredentialsError) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

impl TokenSource for GoogleAdc {
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
        Box::pin(async move {
            let credentials = {
                let mut slot = self.credentials.lock().await;
                match &*slot {
                    Some(c) => c.clone(),
                    None => {
                        let built = self.build()?;
                        *slot = Some(built.clone());
                        built
                    }
                }
            };
            let headers = match credentials.headers(http::Extensions::new()).await {
                Ok(CacheableResource::New { data, .. }) => data,
                Ok(CacheableResource::NotModified) => {
                    return Err(AuthError::Other(format!(
                        "{} returned no headers",
                        self.describe()
                    )));
                }
                Err(e) => return Err(self.failed(&e)),
            };
            let token = to_token(headers).ok_or_else(|| {
                AuthError::Other(format!(
                    "{} returned no Authorization header",
                    self.describe()
                ))
            })?;
            if let Ok(mut last) = self.last.lock() {
                *last = Some(token.clone());
            }
            Ok(token)
        })
    }

    fn rejected<'a>(&'a self, token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let mut credentials = self.credentials.lock().await;
            let current = self
                .last
                .lock()
                .is_ok_and(|last| last.as_ref() == Some(token));
            // An older token: the credentials were rebuilt already.
            if current {
                // The crate's cache has no "forget": new credentials start
                // with an empty cache, so the next token is a fresh one.
                *credentials = None;
            }
            Ok(())
        })
    }

    fn strategy(&self) -> String {
        "google-adc".to_owned()
    }

    fn detail(&self) -> Option<String> {
        Some(match &self.source {
            AdcSource::Metadata { host, .. } => format!("metadata server {host}"),
            AdcSource::FromEnv(path) => format!(
                "{} {}, from GOOGLE_APPLICATION_CREDENTIALS",
                self.kind(),
                path.display()
            ),
            AdcSource::WellKnown(path) => format!("{} {}", self.kind(), path.display()),
        })
    }
}

/// The crate's headers as a [`Token`]: `authorization` is the token, the
/// rest (`x-goog-user-project`) goes with it.
fn to_token(headers: http::HeaderMap) -> Option<Token> {
    let authorization = headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .to_owned();
    let mut token = Token::from_authorization(authorization);
    for (name, value) in &headers {
        if name != http::header::AUTHORIZATION {
            token = token.with_header(name.clone(), value.clone());
        }
    }
    Some(token)
}

/// The source for `auth.google_oauth`.
pub(crate) fn source(scopes: &[String], env: &dyn Env) -> Arc<dyn TokenSource> {
    Arc::new(GoogleAdc::new(scopes.to_vec(), env))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn credentials_are_looked_for_in_googles_order() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let gcloud = home.join(".config/gcloud");
        let sdk = dir.path().join("sdk");
        std::fs::create_dir_all(&gcloud).unwrap();
        std::fs::create_dir_all(&sdk).unwrap();
        let home_file = gcloud.join("application_default_credentials.json");
        let sdk_file = sdk.join("application_default_credentials.json");
        let home = home.to_str().unwrap();
        let sdk = sdk.to_str().unwrap();

        // Nothing on disk yet: the metadata server, default or overridden.
        assert_eq!(
            AdcSource::find(&env(&[("HOME", home)])),
            AdcSource::Metadata {
                host: METADATA_HOST.to_owned(),
                missing: Some(home_file.clone())
            }
        );
        assert_eq!(
            AdcSource::find(&env(&[("GCE_METADATA_HOST", "127.0.0.1:1")])),
            AdcSource::Metadata {
                host: "127.0.0.1:1".to_owned(),
                missing: None
            }
        );
        std::fs::write(&home_file, "{}").unwrap();
        std::fs::write(&sdk_file, "{}").unwrap();
        let table = [
            (
                vec![("HOME", home)],
                AdcSource::WellKnown(home_file.clone()),
            ),
            (
                vec![("HOME", home), ("CLOUDSDK_CONFIG", sdk)],
                AdcSource::WellKnown(sdk_file.clone()),
            ),
            (
                vec![
                    ("HOME", home),
                    ("CLOUDSDK_CONFIG", sdk),
                    ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
                ],
                AdcSource::FromEnv(PathBuf::from("/k.json")),
            ),
            // Empty is unset.
            (
                vec![("HOME", home), ("GOOGLE_APPLICATION_CREDENTIALS", "")],
                AdcSource::WellKnown(home_file.clone()),
            ),
        ];
        for (vars, want) in table {
            assert_eq!(AdcSource::find(&env(&vars)), want, "{vars:?}");
        }
    }

    #[test]
    fn the_description_names_the_kind_and_the_file_but_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.json");
        std::fs::write(
            &key,
            r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----secret"}"#,
        )
        .unwrap();
        let key_path = key.to_str().unwrap();
        let scopes = vec!["s".to_owned()];
        let adc = GoogleAdc::new(
            scopes.clone(),
            &env(&[("GOOGLE_APPLICATION_CREDENTIALS", key_path)]),
        );
        assert_eq!(
            adc.describe(),
            format!(
                "google-adc (service account key {key_path}, from GOOGLE_APPLICATION_CREDENTIALS)"
            )
        );
        assert!(!format!("{adc:?}").contains("secret"));

        let missing = GoogleAdc::new(
            scopes.clone(),
            &env(&[("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json")]),
        );
        assert_eq!(
            missing.describe(),
            "google-adc (credentials file /nonexistent/key.json, from GOOGLE_APPLICATION_CREDENTIALS)"
        );
        let Err(AuthError::NotConfigured { source_tried, fix }) = missing.build() else {
            panic!("a missing key file must fail the start");
        };
        assert_eq!(
            source_tried,
            "GOOGLE_APPLICATION_CREDENTIALS names /nonexistent/key.json, which cannot be read: No such file or directory (os error 2)"
        );
        assert_eq!(
            fix,
            "run `gcloud auth application-default login --scopes=https://www.googleapis.com/auth/cloud-platform,s`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
        );

        let mds = GoogleAdc::new(scopes, &env(&[]));
        assert_eq!(
            mds.describe(),
            "google-adc (metadata server metadata.google.internal)"
        );
    }
}
