//! What can go wrong with the shared database.

/// An error of the shared database. Messages name the database by its URL
/// without the password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not a PostgreSQL connection string.
    #[error(
        "{url} is not a PostgreSQL URL ({message}); write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
    )]
    BadUrl {
        /// The URL, without its password.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The database cannot be reached, or refused the connection.
    #[error("cannot reach the database at {url}: {message}")]
    Unreachable {
        /// The URL, without its password.
        url: String,
        /// The driver's words.
        message: String,
    },
    /// A newer release migrated the database: this one must not write to it.
    #[error(
        "the database at {url} is at schema version {found}, from a newer release of core-agent (this one knows versions up to {known}); upgrade core-agent on every replica, or point this one at another database"
    )]
    NewerSchema {
        /// The URL, without its password.
        url: String,
        /// The version the database is at.
        found: i32,
        /// The newest version this release knows.
        known: i32,
    },
    /// A migration failed (nothing of it was applied).
    #[error("cannot migrate the database at {url} to schema version {version}: {message}")]
    Migration {
        /// The URL, without its password.
        url: String,
        /// The version being applied.
        version: i32,
        /// The driver's words.
        message: String,
    },
    /// A query failed.
    #[error("the database at {url}: {message}")]
    Query {
        /// The URL, without its password.
        url: String,
        /// The driver's words.
        message: String,
    },
    /// The worker thread that talks to the database is gone.
    #[error("the database worker of {url} has stopped")]
    Stopped {
        /// The URL, without its password.
        url: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `url` with its password replaced by `***` (and as given when it does not
/// parse as a URL with a password).
pub fn redact(url: &str) -> String {
    // postgres://user:password@host/db: the password is between the first
    // ':' after the scheme and the last '@' of the authority.
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_keywords(url);
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some(at) = authority.rfind('@') else {
        return format!("{scheme}://{authority}{}", redact_query(tail));
    };
    let (userinfo, host) = authority.split_at(at);
    let user = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    format!("{scheme}://{user}{host}{}", redact_query(tail))
}

/// A `password=` in a URL's query, hidden.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// A `password=` of a keyword/value connection string, hidden.
fn redact_keywords(text: &str) -> String {
    text.split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_never_shows() {
        for (url, shown) in [
            (
                "postgres://app:s3cret@db:5432/core",
                "postgres://app:***@db:5432/core",
            ),
            ("postgres://app@db/core", "postgres://app@db/core"),
            ("postgresql://db/core", "postgresql://db/core"),
            (
                "postgres://a:b:c@d@db/core?password=x&sslmode=disable",
                "postgres://a:***@db/core?password=***&sslmode=disable",
            ),
            (
                "host=db user=app password=s3cret dbname=core",
                "host=db user=app password=*** dbname=core",
            ),
        ] {
            assert_eq!(redact(url), shown);
            assert!(!redact(url).contains("s3cret"));
        }
    }
}
