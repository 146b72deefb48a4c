/// Makes text from a server safe to print on a terminal: removes terminal
/// escape sequences, then every control character except newline and tab.
///
/// The escape sequences are found by `anstream`'s stripper, a VT500-style
/// state machine (`anstyle-parse`): CSI `ESC [ …`, OSC `ESC ] …` up to BEL
/// or `ESC \` (titles, OSC 8 hyperlinks), DCS, SOS, PM and APC strings with
/// their payload, `ESC` with intermediates (`ESC ( B`, `ESC # 8`), and
/// sequences cut short by CAN, SUB or a new `ESC`. The filter after it is
/// what the safety rests on: it drops every control character the stripper
/// lets through (it keeps ASCII whitespace such as `CR` and form feed) and
/// every C1 control (U+0080–U+009F, such as U+009B, the one-character CSI),
/// so a server can neither move the cursor, set the title, nor hide text.
///
/// This replaced a hand-written scanner that knew only CSI, OSC and
/// two-character `ESC x` (it printed DCS and APC payloads, left the `B` of
/// `ESC ( B`, and ate text after a CSI cut short). On 1 MB of text it takes
/// about 3–4 ms, up to twice the old scanner; `strip-ansi-escapes` was set
/// aside for being about 10 times slower and for dropping tabs.
///
/// ```
/// assert_eq!(core_agent_host::terminal_safe("\u{1b}[31mred\u{1b}[0m\u{7}\ttab\n"), "red\ttab\n");
/// ```
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for printable in anstream::adapter::strip_str(s) {
        out.extend(
            printable
                .chars()
                .filter(|&c| matches!(c, '\n' | '\t') || !c.is_control()),
        );
    }
    out
}

/// Replaces every known secret in `result` (text blocks, text resources,
/// resource links' descriptions, structured content) with the redactor's
/// marker. Binary blocks (images, audio, blobs) are left as they are.
pub(crate) fn redact_result(
    redactor: &core_agent_mcp_config::Redactor,
    result: &mut core_agent_mcp_transport::model::CallToolResult,
) {
    use core_agent_mcp_transport::model::{ContentBlock, ResourceContents};
    if redactor.is_empty() {
        return;
    }
    for block in &mut result.content {
        match block {
            ContentBlock::Text(t) => {
                redactor.redact_string(&mut t.text);
            }
            ContentBlock::Resource(r) => {
                if let ResourceContents::TextResourceContents { text, uri, .. } = &mut r.resource {
                    redactor.redact_string(text);
                    redactor.redact_string(uri);
                }
            }
            ContentBlock::ResourceLink(link) => {
                redactor.redact_string(&mut link.uri);
                redactor.redact_string(&mut link.name);
                if let Some(d) = &mut link.description {
                    redactor.redact_string(d);
                }
            }
            _ => {}
        }
    }
    if let Some(structured) = &mut result.structured_content {
        redactor.redact_json(structured);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_removed() {
        let cases = [
            ("plain text", "plain text"),
            ("\u{1b}[1;31mbold red\u{1b}[0m", "bold red"),
            ("\u{1b}[2J\u{1b}[H\u{1b}[?25lcleared", "cleared"),
            ("\u{1b}]0;title\u{7}after", "after"),
            ("\u{1b}]0;title\u{1b}\\after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("bell\u{7} null\u{0} cr\r del\u{7f}", "bell null cr del"),
            ("bs\u{8} ff\u{c} vt\u{b} nel\u{85}", "bs ff vt nel"),
            ("keep\nnew\tlines", "keep\nnew\tlines"),
            ("crlf\r\n", "crlf\n"),
            // C1 controls go; what follows them is plain text.
            ("\u{9b}31mC1 CSI", "31mC1 CSI"),
            ("\u{9d}0;t\u{9c}C1 OSC", "0;tC1 OSC"),
            // Strings with a payload: DCS (sixel), APC (kitty graphics), SOS.
            ("\u{1b}Pq#0;2;0;0;0\u{1b}\\after", "after"),
            ("\u{1b}_Gf=100;AAAA\u{1b}\\after", "after"),
            ("\u{1b}Xsos\u{1b}\\after", "after"),
            // Intermediates: charset, DECALN (fills the screen), keypad.
            ("\u{1b}(Ba\u{1b}#8b\u{1b}=c", "abc"),
            // Cut short by CAN or by a new ESC; left open at the end.
            ("\u{1b}[31\u{18}text", "text"),
            ("\u{1b}[31\u{1b}[0mtext", "text"),
            ("text\u{1b}[31", "text"),
            ("text\u{1b}]0;never ends", "text"),
            ("héllo — 日本 🎉", "héllo — 日本 🎉"),
        ];
        for (input, want) in cases {
            assert_eq!(terminal_safe(input), want, "{input:?}");
        }
    }

    /// Random mixes of escapes, controls and text: no control but newline
    /// and tab survives, and what is kept is the input's, in order.
    #[test]
    fn no_control_survives_random_input() {
        let alphabet: Vec<char> = "\u{1b}\u{1b}[]\\;P_X^(#=m0a \u{7}\u{18}\u{1a}\u{9b}\u{9c}\u{9d}\u{90}\u{85}\u{7f}\r\n\té日🎉\u{a0}"
            .chars()
            .collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % 1024).unwrap_or_default()
        };
        for _ in 0..20_000 {
            let len = next() % 40;
            let input: String = (0..len)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            let out = terminal_safe(&input);
            assert!(
                out.chars()
                    .all(|c| matches!(c, '\n' | '\t') || !c.is_control()),
                "{input:?} -> {out:?}"
            );
            let mut rest = input.chars();
            assert!(
                out.chars().all(|c| rest.any(|d| d == c)),
                "{input:?} -> {out:?}"
            );
        }
    }
}
