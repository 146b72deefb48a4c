//! The credentials file of one server: `<dir>/<server>-<hash of URL>.json`,
//! mode 0600, replaced atomically, with a lock file beside it that is held
//! across load → refresh → save.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rmcp::transport::auth::{AuthError, CredentialRefreshGuard, StoredCredentials};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{OAuthError, OAuthStatus};

/// Where credentials files live: `~/.agents/credentials` for a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsDir {
    path: PathBuf,
}

impl CredentialsDir {
    /// `$HOME/.agents/credentials`, next to the user's `mcp.json`; `None`
    /// when `HOME` is unset or empty.
    pub fn user() -> Option<Self> {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| Self::new(Path::new(&home).join(".agents").join("credentials")))
    }

    /// A directory of one's choosing (tests, the conformance client).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        CredentialsDir { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes every credentials file of `server`, whatever its URL
    /// (`core-agent mcp logout`); returns the files removed.
    pub fn remove_server(&self, server: &str) -> Result<Vec<PathBuf>, OAuthError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(OAuthError::store(&self.path, e)),
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(contents) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Contents>(&t).ok())
            else {
                continue;
            };
            if contents.server == server {
                let file = self.file(server, &contents.url);
                if file.path == path && file.remove()? {
                    removed.push(path);
                }
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// The file of `server` at `url`. A different URL is a different file,
    /// so a server whose URL changed never receives the old one's token.
    pub fn file(&self, server: &str, url: &str) -> CredentialFile {
        let name: String = server
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let digest = Sha256::digest(url.as_bytes());
        let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let path = self.path.join(format!("{name}-{hash}.json"));
        CredentialFile {
            lock: self.path.join(format!("{name}-{hash}.lock")),
            path,
            server: server.to_owned(),
            url: url.to_owned(),
        }
    }
}

/// One server's credentials file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialFile {
    path: PathBuf,
    lock: PathBuf,
    server: String,
    url: String,
}

/// The file's contents.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Contents {
    pub(crate) server: String,
    pub(crate) url: String,
    #[serde(default)]
    pub(crate) client: Option<ClientRecord>,
    #[serde(default)]
    pub(crate) credentials: Option<StoredCredentials>,
}

/// The OAuth client the tokens were issued to: a secret from dynamic
/// registration is kept so a later process can refresh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClientRecord {
    pub(crate) client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) redirect_uri: Option<String>,
}

impl CredentialFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The URL it belongs to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the stored credentials can be used, without the network.
    pub fn status(&self) -> OAuthStatus {
        let Ok(Some(contents)) = self.read() else {
            return OAuthStatus::LoginNeeded;
        };
        let Some(token) = contents
            .credentials
            .and_then(|c| Some((c.token_received_at, c.token_response?)))
        else {
            return OAuthStatus::LoginNeeded;
        };
        let (received, response) = token;
        let response = serde_json::to_value(&response).unwrap_or(Value::Null);
        let expires_at = match (received, response.get("expires_in").and_then(Value::as_u64)) {
            (Some(at), Some(secs)) => {
                Some(SystemTime::UNIX_EPOCH + Duration::from_secs(at.saturating_add(secs)))
            }
            _ => None,
        };
        OAuthStatus::LoggedIn {
            expires_at,
            refreshable: response
                .get("refresh_token")
                .and_then(Value::as_str)
                .is_some(),
        }
    }

    /// Removes the credentials (`core-agent mcp logout`); `false` when there
    /// were none.
    pub fn remove(&self) -> Result<bool, OAuthError> {
        let existed = match std::fs::remove_file(&self.path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(OAuthError::store(&self.path, e)),
        };
        let _ = std::fs::remove_file(&self.lock);
        Ok(existed)
    }

    /// The contents, or `None` when there is no file or it belongs to
    /// another URL.
    pub(crate) fn read(&self) -> Result<Option<Contents>, OAuthError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(OAuthError::store(&self.path, e)),
        };
        let contents: Contents = serde_json::from_str(&text).map_err(|e| {
            OAuthError::store(
                &self.path,
                format!("{e}; log out of `{}` to remove it", self.server),
            )
        })?;
        Ok((contents.url == self.url).then_some(contents))
    }

    /// Replaces the file atomically (a temporary file in the same directory,
    /// mode 0600, renamed over it), so a reader never sees half a file.
    pub(crate) fn write(&self, contents: &Contents) -> Result<(), OAuthError> {
        let err = |e: std::io::Error| OAuthError::store(&self.path, e);
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err)?;
        }
        let text =
            serde_json::to_vec_pretty(contents).map_err(|e| OAuthError::store(&self.path, e))?;
        let tmp = self.path.with_extension(format!(
            "json.{}.{}.tmp",
            std::process::id(),
            crate::oauth::login::nonce()
        ));
        let result = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(err)
    }

    /// Blocks until this process holds the file's lock; dropping the file
    /// releases it.
    fn lock_blocking(&self) -> std::io::Result<std::fs::File> {
        if let Some(dir) = self.lock.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.lock)?;
        file.lock()?;
        Ok(file)
    }

    /// Takes the cross-process lock without blocking the runtime.
    pub(crate) async fn lock(&self) -> Result<std::fs::File, OAuthError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.lock_blocking())
            .await
            .map_err(|e| OAuthError::store(&self.lock, e))?
            .map_err(|e| OAuthError::store(&self.lock, e))
    }
}

/// rmcp's view of a credentials file.
///
/// `acquire_refresh_guard` takes the file's lock, which rmcp holds from
/// loading the refresh token until the rotated one is saved: a second
/// process waits, then loads the new token instead of spending the old one.
#[derive(Debug, Clone)]
pub(crate) struct FileStore {
    pub(crate) file: CredentialFile,
    /// The client of a login in progress, written with its first tokens.
    pub(crate) pending_client: Arc<Mutex<Option<ClientRecord>>>,
}

impl FileStore {
    pub(crate) fn new(file: CredentialFile) -> Self {
        FileStore {
            file,
            pending_client: Arc::default(),
        }
    }

    fn rmcp_error(e: OAuthError) -> AuthError {
        AuthError::CredentialStoreError(e.to_string())
    }

    fn update(&self, change: impl FnOnce(&mut Contents)) -> Result<(), OAuthError> {
        let mut contents = self.file.read()?.unwrap_or_else(|| Contents {
            server: self.file.server.clone(),
            url: self.file.url.clone(),
            ..Contents::default()
        });
        if let Ok(mut pending) = self.pending_client.lock()
            && let Some(client) = pending.take()
        {
            contents.client = Some(client);
        }
        change(&mut contents);
        self.file.write(&contents)
    }
}

/// The access token in stored credentials.
pub(crate) fn access_token(credentials: &StoredCredentials) -> Option<String> {
    let response = serde_json::to_value(credentials.token_response.as_ref()?).ok()?;
    response
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[async_trait::async_trait]
impl rmcp::transport::auth::CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self
            .file
            .read()
            .map_err(Self::rmcp_error)?
            .and_then(|c| c.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|c| c.credentials = Some(credentials))
            .map_err(Self::rmcp_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|c| c.credentials = None)
            .map_err(Self::rmcp_error)
    }

    /// The refresh token is dead: drop the tokens (keeping the client), so
    /// the server reads as "login needed" instead of failing every refresh.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let dead = access_token(rejected);
        self.update(|c| {
            if c.credentials.as_ref().and_then(access_token) == dead {
                c.credentials = None;
            }
        })
        .map_err(Self::rmcp_error)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let file = self.file.lock().await.map_err(Self::rmcp_error)?;
        Ok(Some(CredentialRefreshGuard::new(file)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::auth::CredentialStore;
    use std::os::unix::fs::PermissionsExt;

    fn credentials(access: &str, refresh: Option<&str>) -> StoredCredentials {
        let mut response = serde_json::json!({
            "access_token": access, "token_type": "bearer", "expires_in": 3600
        });
        if let Some(r) = refresh {
            response["refresh_token"] = r.into();
        }
        StoredCredentials::new(
            "client".into(),
            Some(serde_json::from_value(response).unwrap()),
            vec![],
            Some(1_000),
        )
    }

    #[test]
    fn a_file_per_server_and_url() {
        let dir = CredentialsDir::new("/c");
        let a = dir.file("gh", "https://a.example/mcp");
        let b = dir.file("gh", "https://b.example/mcp");
        assert_ne!(a.path(), b.path());
        assert!(a.path().starts_with("/c"));
        let odd = dir.file("../x y", "https://a.example/mcp");
        assert!(
            odd.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("___x_y-")
        );
    }

    #[tokio::test]
    async fn saved_credentials_are_private_and_bound_to_the_url() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = CredentialsDir::new(tmp.path().join("credentials"));
        let file = dir.file("gh", "https://a.example/mcp");
        assert_eq!(file.status(), OAuthStatus::LoginNeeded);
        let store = FileStore::new(file.clone());
        store.save(credentials("at-1", Some("rt-1"))).await.unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(
            file.status(),
            OAuthStatus::LoggedIn {
                refreshable: true,
                ..
            }
        ));
        // The same file name under another URL (a hand-copied file) is ignored.
        let text = std::fs::read_to_string(file.path()).unwrap();
        std::fs::write(
            file.path(),
            text.replace("https://a.example/mcp", "https://evil.example/mcp"),
        )
        .unwrap();
        assert_eq!(file.status(), OAuthStatus::LoginNeeded);
        assert!(store.load().await.unwrap().is_none());
        assert!(file.remove().unwrap());
        assert!(!file.remove().unwrap());
    }

    #[tokio::test]
    async fn a_rejected_refresh_token_means_login_needed() {
        let tmp = tempfile::tempdir().unwrap();
        let file = CredentialsDir::new(tmp.path()).file("gh", "https://a.example/mcp");
        let store = FileStore::new(file.clone());
        *store.pending_client.lock().unwrap() = Some(ClientRecord {
            client_id: "client".into(),
            client_secret: None,
            redirect_uri: None,
        });
        let old = credentials("at-1", Some("rt-1"));
        store.save(old.clone()).await.unwrap();
        store.on_refresh_token_rejected(&old).await.unwrap();
        assert_eq!(file.status(), OAuthStatus::LoginNeeded);
        // The client registration survives, for the next login.
        assert_eq!(
            file.read().unwrap().unwrap().client.unwrap().client_id,
            "client"
        );
    }
}
