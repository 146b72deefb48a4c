use std::fmt;

use crate::Env;

/// A config string that may hold `${env:NAME}` placeholders.
///
/// It is parsed when the config loads, so a malformed placeholder is a load
/// error, and expanded when the server starts, so the value is read from the
/// environment as it is at that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    raw: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var(String),
}

/// A [`Template`] after expansion.
#[derive(Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The expanded text.
    pub value: String,
    /// True when any part of the value came from a variable. Such values are
    /// treated as secrets: never print them.
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

const OPEN: &str = "${env:";

impl Template {
    /// Parses `raw`. Fails with a message when a `${env:` placeholder is not
    /// closed or does not hold a valid variable name.
    pub fn parse(raw: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = raw;
        while let Some(start) = rest.find(OPEN) {
            if start > 0 {
                parts.push(Part::Literal(rest[..start].to_owned()));
            }
            let after = &rest[start + OPEN.len()..];
            let Some(end) = after.find('}') else {
                return Err(format!("`{OPEN}` is not closed by `}}`"));
            };
            let name = &after[..end];
            if !is_var_name(name) {
                return Err(format!(
                    "`{OPEN}{name}}}` does not name a variable (letters, digits and `_`, not starting with a digit)"
                ));
            }
            parts.push(Part::Var(name.to_owned()));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
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
        self.parts.iter().any(|p| matches!(p, Part::Var(_)))
    }

    /// The names of the variables the template refers to, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Expands every placeholder from `env`; an unset variable expands to the
    /// empty string, as `$NAME` does in a shell. What a variable holds is never
    /// expanded again.
    pub fn expand(&self, env: &dyn Env) -> Expanded {
        let mut value = String::with_capacity(self.raw.len());
        for part in &self.parts {
            match part {
                Part::Literal(text) => value.push_str(text),
                Part::Var(name) => value.push_str(&env.var(name).unwrap_or_default()),
            }
        }
        Expanded {
            value,
            interpolated: self.has_placeholders(),
        }
    }
}

fn is_var_name(name: &str) -> bool {
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
    fn unset_variables_expand_to_empty() {
        let t = Template::parse("a${env:NOPE}b${env:X}").unwrap();
        assert_eq!(t.expand(&env(&[("X", "x")])).value, "abx");
        assert_eq!(t.variables().collect::<Vec<_>>(), ["NOPE", "X"]);
    }

    #[test]
    fn other_dollar_forms_stay_literal() {
        let t = Template::parse("$HOME ${HOME} $${env:X}").unwrap();
        assert_eq!(t.expand(&env(&[("X", "x")])).value, "$HOME ${HOME} $x");
    }

    #[test]
    fn malformed_placeholders_are_rejected() {
        assert_eq!(
            Template::parse("Bearer ${env:TOKEN").unwrap_err(),
            "`${env:` is not closed by `}`"
        );
        assert!(Template::parse("${env:}").is_err());
        assert!(Template::parse("${env:1X}").is_err());
        assert!(Template::parse("${env:A-B}").is_err());
    }

    proptest! {
        #[test]
        fn text_without_placeholders_is_identity(s in "[^$]*") {
            let t = Template::parse(&s).unwrap();
            let e = t.expand(&env(&[]));
            prop_assert_eq!(e.value, s);
            prop_assert!(!e.interpolated);
        }

        #[test]
        fn variable_values_are_never_re_expanded(v in ".*") {
            let t = Template::parse("${env:A}").unwrap();
            let e = t.expand(&env(&[("A", &v), ("B", "boom")]));
            prop_assert_eq!(e.value, v);
        }
    }
}
