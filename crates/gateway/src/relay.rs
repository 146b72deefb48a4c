//! A backend's `input_required`, relayed to a 2026-07-28 client: the
//! client gets the backend's input requests with a `requestState` of the
//! gateway's own, which carries the backend's state and that the call was
//! allowed, sealed with a key only this gateway holds (the client echoes
//! the state, and must not be able to forge one that skips the gate).

use sha2::{Digest, Sha256};

/// What every relayed state starts with.
const PREFIX: &str = "core-agent.relay.1.";

/// The key the gateway seals relayed states with (random per process: a
/// state outlives neither the process nor, in practice, the call).
pub(crate) struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

/// What a relayed state says, once opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relayed {
    /// The backend's own `requestState`.
    pub(crate) backend: Option<String>,
}

impl StateKey {
    /// A fresh random key (`None` when the system has no randomness).
    pub(crate) fn random() -> Option<StateKey> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).ok()?;
        Some(StateKey(key))
    }

    /// The key every replica of a fleet shares.
    pub(crate) fn from_secret(secret: [u8; 32]) -> StateKey {
        StateKey(secret)
    }

    /// The state the client gets for a call of `tool` (allowed by the gate)
    /// whose backend asked with `backend` as its state.
    pub(crate) fn seal(&self, tool: &str, backend: Option<&str>) -> String {
        let body = serde_json::json!({"tool": tool, "state": backend}).to_string();
        let body = hex(body.as_bytes());
        let mac = hex(&self.mac(body.as_bytes()));
        format!("{PREFIX}{body}.{mac}")
    }

    /// What `state` says about a retry of `tool`, when this gateway sealed
    /// it for that tool; `None` for any other state (forged, another
    /// tool's, another process's, or not a relayed one).
    pub(crate) fn open(&self, tool: &str, state: &str) -> Option<Relayed> {
        let rest = state.strip_prefix(PREFIX)?;
        let (body, mac) = rest.split_once('.')?;
        let expected = hex(&self.mac(body.as_bytes()));
        let same: bool = subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), mac.as_bytes()).into();
        if !same {
            return None;
        }
        let json: serde_json::Value = serde_json::from_slice(&unhex(body)?).ok()?;
        if json["tool"].as_str() != Some(tool) {
            return None;
        }
        Some(Relayed {
            backend: json["state"].as_str().map(str::to_owned),
        })
    }

    /// HMAC-SHA-256 of `message` under the key.
    fn mac(&self, message: &[u8]) -> [u8; 32] {
        let mut inner_pad = [0x36u8; 64];
        let mut outer_pad = [0x5cu8; 64];
        for (i, byte) in self.0.iter().enumerate() {
            inner_pad[i] ^= byte;
            outer_pad[i] ^= byte;
        }
        let inner = Sha256::new()
            .chain_update(inner_pad)
            .chain_update(message)
            .finalize();
        let outer = Sha256::new()
            .chain_update(outer_pad)
            .chain_update(inner)
            .finalize();
        let mut mac = [0u8; 32];
        mac.copy_from_slice(outer.as_slice());
        mac
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_state_opens_for_its_tool_only_and_a_forged_one_never() {
        let key = StateKey::random().unwrap();
        let state = key.seal("ref_ask", Some("round-1"));
        assert_eq!(
            key.open("ref_ask", &state),
            Some(Relayed {
                backend: Some("round-1".to_owned())
            })
        );
        assert_eq!(key.open("other_tool", &state), None);
        let other = StateKey::random().unwrap();
        assert_eq!(other.open("ref_ask", &state), None, "another gateway's key");
        // One character of the body changed: the seal no longer matches.
        let at = PREFIX.len() + 3;
        let mut forged = state.clone().into_bytes();
        forged[at] = if forged[at] == b'0' { b'1' } else { b'0' };
        let forged = String::from_utf8(forged).unwrap();
        assert_eq!(key.open("ref_ask", &forged), None);
        let (body, _) = state.rsplit_once('.').unwrap();
        assert_eq!(key.open("ref_ask", &format!("{body}.00")), None);
        assert_eq!(
            key.open("ref_ask", "round-1"),
            None,
            "a backend's raw state"
        );
        let none = key.seal("ref_ask", None);
        assert_eq!(key.open("ref_ask", &none), Some(Relayed { backend: None }));
    }
}
