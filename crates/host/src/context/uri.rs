//! Resource URIs as a gateway's clients see them: the server's own URI
//! behind `core-agent://<server>/`, so that a client sees which server each
//! resource belongs to and a read finds its way back.
//!
//! The server's name is percent-encoded (only `A-Z a-z 0-9 - . _ ~` stay as
//! they are), and the server's URI follows the first `/` unchanged, so a
//! template's `{variables}` stay templates: `file:///{path}` of server `fs`
//! is `core-agent://fs/file:///{path}`.

/// What every public resource URI starts with.
pub const URI_PREFIX: &str = "core-agent://";

/// The URI a client sees for `uri` of `server`.
pub fn public_uri(server: &str, uri: &str) -> String {
    let mut out = String::with_capacity(URI_PREFIX.len() + server.len() + 1 + uri.len());
    out.push_str(URI_PREFIX);
    for byte in server.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out.push('/');
    out.push_str(uri);
    out
}

/// The server and its own URI behind a public URI, or `None` when `public`
/// is not one.
pub fn origin_of(public: &str) -> Option<(String, &str)> {
    let rest = public.strip_prefix(URI_PREFIX)?;
    let (server, uri) = rest.split_once('/')?;
    Some((decode(server)?, uri))
}

fn decode(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_uri_names_its_server_and_comes_back_whole() {
        let cases = [
            ("fs", "file:///tmp/a b.txt"),
            ("everything", "test://static/resource/1"),
            ("my server/π", "demo://x?y=1#z"),
            ("fs", "file:///{path}"),
            ("s", ""),
        ];
        for (server, uri) in cases {
            let public = public_uri(server, uri);
            assert!(public.starts_with(URI_PREFIX), "{public}");
            assert_eq!(
                origin_of(&public),
                Some((server.to_owned(), uri)),
                "{public}"
            );
        }
        assert_eq!(
            public_uri("fs", "file:///{path}"),
            "core-agent://fs/file:///{path}"
        );
        assert_eq!(
            public_uri("my server", "x://y"),
            "core-agent://my%20server/x://y"
        );
    }

    #[test]
    fn other_uris_have_no_origin() {
        for uri in [
            "file:///etc/passwd",
            "core-agent://",
            "core-agent://fs",
            "core-agent:///file:///x",
            "core-agent://%zz/x",
            "core-agent://%FF/x",
        ] {
            assert_eq!(origin_of(uri), None, "{uri}");
        }
    }
}
