//! Properties of the merge over generated files.

use super::*;
use proptest::prelude::*;

fn server_file(names_and_commands: &[(String, String)]) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = names_and_commands
        .iter()
        .map(|(n, c)| {
            (
                n.clone(),
                serde_json::json!({"transport": "stdio", "command": c}),
            )
        })
        .collect();
    serde_json::json!({"version": 1, "servers": servers}).to_string()
}

fn peer_file(servers: &BTreeMap<String, bool>) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = servers
        .iter()
        .map(|(n, disabled)| {
            (
                n.clone(),
                serde_json::json!({"command": "srv", "disabled": disabled, "autoApprove": ["t"]}),
            )
        })
        .collect();
    serde_json::json!({"mcpServers": servers}).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Disabled or not, the highest file that names a server decides: every
    /// name is started or left out, never both, from that file; and each
    /// started server has exactly one warning, from that file.
    #[test]
    fn left_out_entries_merge_like_servers(
        dot_mcp in proptest::collection::btree_map("[a-c]{1,2}", any::<bool>(), 0..4),
        user in proptest::collection::btree_map("[a-c]{1,2}", any::<bool>(), 0..4),
    ) {
        let layout = Layout::new(None, Some(&peer_file(&dot_mcp)), Some(&peer_file(&user)));
        let config = load(&layout.paths()).unwrap();
        let mut want: BTreeMap<String, (bool, Scope)> =
            user.into_iter().map(|(n, d)| (n, (d, Scope::User))).collect();
        want.extend(dot_mcp.into_iter().map(|(n, d)| (n, (d, Scope::Project))));
        let mut got: BTreeMap<String, (bool, Scope)> = BTreeMap::new();
        for s in &config.servers {
            prop_assert!(got.insert(s.name.clone(), (false, s.scope)).is_none());
        }
        for l in &config.left_out {
            prop_assert_eq!(&l.reason, &LeftOutReason::Disabled);
            prop_assert!(got.insert(l.name.clone(), (true, l.scope)).is_none());
        }
        prop_assert_eq!(got, want);
        let mut warned: Vec<(String, PathBuf)> = config
            .warnings
            .iter()
            .map(|w| (w.server.clone().unwrap(), w.file.clone()))
            .collect();
        let started: Vec<(String, PathBuf)> = config
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.source.clone()))
            .collect();
        warned.sort();
        prop_assert_eq!(warned, started);
    }

    /// For any two files, loading twice gives the same result, every name of
    /// either file is present once, and a name in both comes from the project.
    #[test]
    fn merging_is_deterministic_and_respects_precedence(
        project in proptest::collection::btree_map("[a-c]{1,2}", "[a-z]{1,5}", 0..4),
        user in proptest::collection::btree_map("[a-c]{1,2}", "[a-z]{1,5}", 0..4),
    ) {
        let p: Vec<(String, String)> = project.clone().into_iter().collect();
        let u: Vec<(String, String)> = user.clone().into_iter().collect();
        let layout = Layout::new(Some(&server_file(&p)), None, Some(&server_file(&u)));
        let first = load(&layout.paths()).unwrap();
        let second = load(&layout.paths()).unwrap();
        prop_assert_eq!(&first.servers, &second.servers);
        let mut want: BTreeMap<String, (String, Scope)> =
            user.into_iter().map(|(n, c)| (n, (c, Scope::User))).collect();
        want.extend(project.into_iter().map(|(n, c)| (n, (c, Scope::Project))));
        let got: BTreeMap<String, (String, Scope)> = first
            .servers
            .iter()
            .map(|s| {
                let Transport::Stdio(t) = &s.spec.transport else { unreachable!() };
                (s.name.clone(), (t.command.clone(), s.scope))
            })
            .collect();
        prop_assert_eq!(got, want);
    }
}
