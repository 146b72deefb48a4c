#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]
#[test]
fn show() {
    for f in std::env::var("SHOW").unwrap().split(':') {
        let text = std::fs::read_to_string(f).unwrap();
        let d = core_agent_digest::route(&text, &core_agent_digest::Settings::default()).unwrap();
        println!("===== {f}: {} -> {} ({})\n{}", d.raw_bytes, d.digest.len(), d.method, d.digest);
    }
}
