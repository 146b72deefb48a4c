//! The command line itself: `--version`, the completion scripts and the
//! man page, which are generated from the same clap types as `--help`.

use std::process::Command;

use core_agent_e2e::{Project, root};

/// What every completion script and man page names: each visible subcommand.
const SUBCOMMANDS: [&str; 10] = [
    "mcp",
    "config",
    "tools",
    "call",
    "raw",
    "usage",
    "serve",
    "demo-server",
    "completions",
    "man",
];

#[test]
fn version_names_the_version_and_the_commit_it_was_built_from() {
    let p = Project::empty();
    let run = p.run(&["--version"]);
    run.expect_code(0);
    let line = run.stdout.strip_suffix('\n').unwrap_or(&run.stdout);
    let rest = line
        .strip_prefix(&format!("core-agent {}", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("not `core-agent <version>`: {line:?}"));
    // Built from this checkout, so git knows a commit and the binary names it.
    let checkout = Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !checkout {
        assert_eq!(rest, "", "no git here, so the version alone");
        return;
    }
    let commit = rest
        .strip_prefix(" (")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no ` (<commit>)` after the version: {line:?}"));
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert!(
        hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "not a short commit hash: {line:?}"
    );
    // Every subcommand says the same.
    assert_eq!(
        p.run(&["mcp", "--version"]).stdout,
        format!(
            "core-agent-mcp {}\n",
            line.trim_start_matches("core-agent ")
        )
    );
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_subcommand() {
    let p = Project::empty();
    for shell in ["bash", "zsh", "fish"] {
        let run = p.run(&["completions", shell]);
        run.expect_code(0);
        assert!(
            run.stdout.contains("core-agent"),
            "{shell}:\n{}",
            run.stdout
        );
        for sub in SUBCOMMANDS {
            assert!(
                run.stdout.contains(sub),
                "{shell} completes no `{sub}`:\n{}",
                run.stdout
            );
        }
        // The supervisor's hidden entry is not offered.
        assert!(!run.stdout.contains("__supervise"), "{shell}");
    }
}

#[test]
fn the_bash_script_completes_past_the_first_word() {
    let p = Project::empty();
    let script = p.write(
        "core-agent.bash",
        &p.run(&["completions", "bash"]).expect_code(0).stdout,
    );
    // What bash does on `core-agent mcp l<TAB>` and `core-agent mcp doctor --o<TAB>`.
    let complete = |words: &[&str]| {
        let words: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             _core__agent core-agent \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD - 1]}}\"; \
             echo \"${{COMPREPLY[*]}}\"",
            script.display(),
            words.join(" ")
        );
        let out = Command::new("bash")
            .args(["-c", &program])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(complete(&["core-agent", "mcp", "l"]), "list login logout");
    assert_eq!(
        complete(&["core-agent", "mcp", "doctor", "--o"]),
        "--offline"
    );
    assert_eq!(complete(&["core-agent", "de"]), "demo-server");
}

#[test]
fn completions_for_an_unknown_shell_is_a_usage_error() {
    let run = Project::empty().run(&["completions", "tcsh"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("error: invalid value 'tcsh' for '<SHELL>'"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");
}

#[test]
fn man_prints_a_roff_page_naming_every_subcommand() {
    let p = Project::empty();
    let run = p.run(&["man"]);
    run.expect_code(0);
    // Roff requests only, up to the title header.
    let mut lines = run.stdout.lines();
    let title = lines
        .by_ref()
        .find(|l| !(l.starts_with(".ie") || l.starts_with(".el")))
        .unwrap_or_default();
    assert!(title.starts_with(".TH core-agent 1 "), "{}", run.stdout);
    assert!(title.contains(env!("CARGO_PKG_VERSION")), "{title}");
    assert!(run.stdout.contains("\n.SH SUBCOMMANDS\n"), "{}", run.stdout);
    for sub in SUBCOMMANDS {
        // Roff escapes each `-`.
        let page = format!("core\\-agent\\-{}(1)", sub.replace('-', "\\-"));
        assert!(run.stdout.contains(&page), "no {page}:\n{}", run.stdout);
    }
    assert!(!run.stdout.contains("supervise"), "{}", run.stdout);
    assert!(!run.stdout.contains("agent\\-help(1)"), "{}", run.stdout);
}

#[test]
fn man_dir_writes_the_pages_it_names() {
    let p = Project::empty();
    let run = p.run(&["man", "--dir", "man1"]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        "wrote core-agent.1 and a page per subcommand to man1\n"
    );
    let mut pages: Vec<String> = std::fs::read_dir(p.path().join("man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "core-agent.1",
        "core-agent-mcp.1",
        "core-agent-mcp-list.1",
        "core-agent-config-schema.1",
        "core-agent-completions.1",
        "core-agent-man.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "no {page} in {pages:?}");
    }
    assert!(
        !pages
            .iter()
            .any(|p| p.contains("supervise") || p.contains("help")),
        "{pages:?}"
    );
    let list = std::fs::read_to_string(p.path().join("man1/core-agent-mcp-list.1")).unwrap();
    assert!(list.contains(".TH core-agent-mcp-list 1 "), "{list}");
}
