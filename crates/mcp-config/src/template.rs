use std::fmt;

use crate::Env;

/// A config string that may hold placeholders.
///
/// The syntaxes, in both config dialects:
///
/// | written | expands to |
/// |---|---|
/// | `${env:NAME}` or `${NAME}` | the variable, or the empty string when it is unset |
/// | `${NAME:-default}` or `${env:NAME:-default}` | the variable, or `default` when it is unset or empty |
/// | `$${` | a literal `${` |
///
/// It is parsed when the config loads, so a malformed placeholder is a load
/// error, and expanded when the server starts, so the value is read from the
/// environment as it is at that moment. What a variable holds is never
/// expanded again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    raw: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var {
        name: String,
        default: Option<String>,
    },
}

/// A [`Template`] after expansion.
#[derive(Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The expanded text.
    pub value: String,
    /// True when any part of the value came from a placeholder. Such values
    /// are treated as secrets: never print them.
    pub interpolated: bool,
}

impl fmt::Debug for Expanded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.interpolated {
            "***"
        } else {
            &self.value
        };
        f.debug_struct("Expanded")
            .field("value", &value)
            .field("interpolated", &self.interpolated)
            .finish()
    }
}

impl Template {
    /// Parses `raw`. Fails with a message when a `${` is not closed or does
    /// not hold a valid variable name.
    pub fn parse(raw: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = raw;
        while let Some(i) = rest.find('$') {
            literal.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(after) = tail.strip_prefix("$${") {
                literal.push_str("${");
                rest = after;
            } else if let Some(after) = tail.strip_prefix("${") {
                let Some(end) = after.find('}') else {
                    return Err("`${` is not closed by `}`".to_owned());
                };
                let inner = &after[..end];
                let (spec, default) = match inner.split_once(":-") {
                    Some((spec, default)) => (spec, Some(default.to_owned())),
                    None => (inner, None),
                };
                let name = spec.strip_prefix("env:").unwrap_or(spec);
                if let Some(input) = spec.strip_prefix("input:") {
                    return Err(format!(
                        "`${{input:{input}}}` is VS Code's prompt for a value when the server starts; core-agent asks for nothing: write ${{NAME}} and set NAME in the environment or the project's .env"
                    ));
                }
                if !is_var_name(name) {
                    return Err(format!(
                        "`${{{inner}}}` does not name a variable (letters, digits and `_`, not starting with a digit)"
                    ));
                }
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var {
                    name: name.to_owned(),
                    default,
                });
                rest = &after[end + 1..];
            } else {
                literal.push('$');
                rest = &tail[1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template {
            raw: raw.to_owned(),
            parts,
        })
    }

    /// The text as written in the config file.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// True when the template holds at least one placeholder.
    pub fn has_placeholders(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Var { .. }))
    }

    /// The names of the variables the template refers to, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables that have no default and are not set in `env`.
    pub fn missing<'a>(&'a self, env: &dyn Env) -> Vec<&'a str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Var {
                    name,
                    default: None,
                } if env.var(name).is_none() => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Expands every placeholder from `env`.
    pub fn expand(&self, env: &dyn Env) -> Expanded {
        let mut value = String::with_capacity(self.raw.len());
        for part in &self.parts {
            match part {
                Part::Literal(text) => value.push_str(text),
                Part::Var { name, default } => push_var(&mut value, env, name, default.as_deref()),
            }
        }
        Expanded {
            value,
            interpolated: self.has_placeholders(),
        }
    }
}

/// Appends `${name}` (or `${name:-default}`) as it expands from `env`: the
/// variable, `default` when it is unset or empty, else nothing.
pub(crate) fn push_var(out: &mut String, env: &dyn Env, name: &str, default: Option<&str>) {
    match (env.var(name), default) {
        (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
        (Some(v), _) => out.push_str(&v),
        (None, Some(d)) => out.push_str(d),
        (None, None) => {}
    }
}

pub(crate) fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_placeholders_and_marks_the_value_secret() {
        let t = Template::parse("Bearer ${env:TOKEN}!").unwrap();
        let e = t.expand(&env(&[("TOKEN", "abc")]));
        assert_eq!(e.value, "Bearer abc!");
        assert!(e.interpolated);
        assert_eq!(
            format!("{e:?}"),
            r#"Expanded { value: "***", interpolated: true }"#
        );
    }

    #[test]
    fn vs_codes_input_placeholder_is_refused_by_name() {
        let e = Template::parse("Bearer ${input:token}").unwrap_err();
        assert!(e.contains("`${input:token}` is VS Code's prompt"), "{e}");
    }

    #[test]
    fn unset_variables_expand_to_empty() {
        let t = Template::parse("a${env:NOPE}b${env:X}").unwrap();
        assert_eq!(t.expand(&env(&[("X", "x")])).value, "abx");
        assert_eq!(t.variables().collect::<Vec<_>>(), ["NOPE", "X"]);
    }

    #[test]
    fn every_syntax_expands() {
        let e = env(&[("X", "x"), ("EMPTY", "")]);
        let cases = [
            ("${env:X}", "x"),
            ("${X}", "x"),
            ("${NOPE}", ""),
            ("${NOPE:-fallback}", "fallback"),
            ("${env:NOPE:-fallback}", "fallback"),
            ("${X:-fallback}", "x"),
            ("${EMPTY:-fallback}", "fallback"),
            ("${NOPE:-}", ""),
            ("${NOPE:-a:-b}", "a:-b"),
            ("$${X}", "${X}"),
            ("$${env:X} ${X}", "${env:X} x"),
            ("$HOME $ $$ cost: 5$", "$HOME $ $$ cost: 5$"),
        ];
        for (raw, want) in cases {
            assert_eq!(
                Template::parse(raw).unwrap().expand(&e).value,
                want,
                "{raw}"
            );
        }
        assert!(!Template::parse("$${X}").unwrap().has_placeholders());
    }

    #[test]
    fn missing_lists_unset_variables_without_default() {
        let t = Template::parse("${A} ${B:-b} ${env:C} ${D}").unwrap();
        assert_eq!(t.missing(&env(&[("D", "")])), ["A", "C"]);
    }

    #[test]
    fn malformed_placeholders_are_rejected() {
        assert_eq!(
            Template::parse("Bearer ${env:TOKEN").unwrap_err(),
            "`${` is not closed by `}`"
        );
        assert!(Template::parse("${}").is_err());
        assert!(Template::parse("${env:}").is_err());
        assert!(Template::parse("${env:1X}").is_err());
        assert!(Template::parse("${env:A-B}").is_err());
    }

    proptest! {
        #[test]
        fn text_without_placeholders_is_identity(s in "([^$]|\\$[^{$]){0,40}\\$?") {
            prop_assume!(!s.contains("${"));
            let t = Template::parse(&s).unwrap();
            let e = t.expand(&env(&[("A", "x")]));
            prop_assert_eq!(e.value, s);
            prop_assert!(!e.interpolated);
        }

        #[test]
        fn variable_values_are_never_re_expanded(v in ".*", syntax in 0usize..3) {
            let raw = ["${env:A}", "${A}", "${A:-d}"][syntax];
            let t = Template::parse(raw).unwrap();
            let e = t.expand(&env(&[("A", &v), ("B", "boom")]));
            let want = if v.is_empty() && syntax == 2 { "d".to_owned() } else { v };
            prop_assert_eq!(e.value, want);
        }

        #[test]
        fn parsing_never_panics(s in ".*") {
            let _ = Template::parse(&s).map(|t| t.expand(&env(&[])));
        }
    }
}
