//! A form elicitation's requested schema as the fields a person fills in,
//! and the checks each answer must pass before it is sent. Pure: the
//! prompts live in `term.rs`.

use serde_json::Value;

/// One property of the requested schema.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// The property's key, which the answer is sent under.
    pub(crate) name: String,
    /// Its `title`, else its key.
    pub(crate) label: String,
    pub(crate) description: Option<String>,
    pub(crate) required: bool,
    pub(crate) default: Option<Value>,
    pub(crate) kind: Kind,
}

/// What kind of answer a field takes, with the schema's constraints.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// A boolean: yes or no.
    Bool,
    /// One of `values` (`enum`, or `oneOf`/`anyOf` of `const`s), shown as `labels`.
    Choice {
        values: Vec<Value>,
        labels: Vec<String>,
    },
    /// Several of `values` (an array whose `items` are an enum).
    Multi {
        values: Vec<Value>,
        labels: Vec<String>,
        min: Option<usize>,
        max: Option<usize>,
    },
    /// A string, with `minLength`, `maxLength`, `pattern` and `format`.
    Text {
        min: Option<usize>,
        max: Option<usize>,
        pattern: Option<regex::Regex>,
        format: Option<String>,
    },
    /// A number (or an integer), with `minimum` and `maximum` (inclusive)
    /// and their exclusive forms.
    Number {
        integer: bool,
        min: Option<(f64, bool)>,
        max: Option<(f64, bool)>,
    },
}

/// The fields of an object schema, in the order its properties are written.
pub(crate) fn fields(schema: &Value) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, prop)| field(name, prop, required.contains(&name.as_str())))
        .collect()
}

fn text(prop: &Value, key: &str) -> Option<String> {
    prop.get(key)
        .and_then(Value::as_str)
        .map(|s| crate::clean(s.trim()))
        .filter(|s| !s.is_empty())
}

fn count(prop: &Value, key: &str) -> Option<usize> {
    prop.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// The values and labels of an enum: `enum` (with the legacy `enumNames`),
/// or `oneOf`/`anyOf` of `{const, title}`.
fn choices(prop: &Value) -> Option<(Vec<Value>, Vec<String>)> {
    if let Some(values) = prop.get("enum").and_then(Value::as_array) {
        let names = prop.get("enumNames").and_then(Value::as_array);
        let labels = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = value_text(v);
                match names.and_then(|n| n.get(i)).and_then(Value::as_str) {
                    Some(name) => format!("{} ({value})", crate::clean(name)),
                    None => value,
                }
            })
            .collect();
        return Some((values.clone(), labels));
    }
    let options = prop
        .get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)?;
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for option in options {
        let value = option.get("const")?.clone();
        labels.push(match option.get("title").and_then(Value::as_str) {
            Some(title) => format!("{} ({})", crate::clean(title), value_text(&value)),
            None => value_text(&value),
        });
        values.push(value);
    }
    Some((values, labels))
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => crate::clean(s),
        other => other.to_string(),
    }
}

fn bound(prop: &Value, inclusive: &str, exclusive: &str) -> Option<(f64, bool)> {
    prop.get(exclusive)
        .and_then(Value::as_f64)
        .map(|n| (n, true))
        .or_else(|| {
            prop.get(inclusive)
                .and_then(Value::as_f64)
                .map(|n| (n, false))
        })
}

fn field(name: &str, prop: &Value, required: bool) -> Field {
    let kind = match prop.get("type").and_then(Value::as_str) {
        Some("boolean") => Kind::Bool,
        Some("array") => {
            let (values, labels) = prop.get("items").and_then(choices).unwrap_or_default();
            Kind::Multi {
                values,
                labels,
                min: count(prop, "minItems"),
                max: count(prop, "maxItems"),
            }
        }
        Some(t @ ("number" | "integer")) => Kind::Number {
            integer: t == "integer",
            min: bound(prop, "minimum", "exclusiveMinimum"),
            max: bound(prop, "maximum", "exclusiveMaximum"),
        },
        _ => match choices(prop) {
            Some((values, labels)) => Kind::Choice { values, labels },
            None => Kind::Text {
                min: count(prop, "minLength"),
                max: count(prop, "maxLength"),
                pattern: prop
                    .get("pattern")
                    .and_then(Value::as_str)
                    .and_then(|p| regex::Regex::new(p).ok()),
                format: text(prop, "format"),
            },
        },
    };
    Field {
        name: name.to_owned(),
        label: text(prop, "title").unwrap_or_else(|| crate::clean(name)),
        description: text(prop, "description"),
        required,
        default: prop.get("default").cloned(),
        kind,
    }
}

impl Field {
    /// The question: `Integer — Your favorite integer (optional)`.
    pub(crate) fn prompt(&self) -> String {
        let mut prompt = self.label.clone();
        if let Some(d) = &self.description {
            prompt.push_str(" — ");
            prompt.push_str(d);
        }
        if let Kind::Number { integer, min, max } = &self.kind {
            let what = if *integer { "an integer" } else { "a number" };
            let range = match (min, max) {
                (Some((lo, _)), Some((hi, _))) => format!(" from {lo} to {hi}"),
                (Some((lo, _)), None) => format!(" from {lo}"),
                (None, Some((hi, _))) => format!(" up to {hi}"),
                (None, None) => String::new(),
            };
            prompt.push_str(&format!(" [{what}{range}]"));
        }
        if !self.required {
            prompt.push_str(" (optional)");
        }
        prompt
    }

    /// The default as a text or number field shows it.
    pub(crate) fn default_text(&self) -> Option<String> {
        match self.default.as_ref()? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// A typed answer to a text or number field as the value to send:
    /// `None` for an optional field left empty, `Err` with what is wrong.
    pub(crate) fn parse(&self, input: &str) -> Result<Option<Value>, String> {
        let input = input.trim();
        if input.is_empty() {
            return if self.required {
                Err(format!("{} is required", self.label))
            } else {
                Ok(None)
            };
        }
        match &self.kind {
            Kind::Number { integer, min, max } => {
                let n: f64 = input
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite())
                    .ok_or_else(|| format!("`{input}` is not a number"))?;
                if *integer && n.fract() != 0.0 {
                    return Err(format!("`{input}` is not a whole number"));
                }
                if let Some((lo, exclusive)) = *min
                    && (n < lo || (exclusive && n == lo))
                {
                    let than = if exclusive { "more than" } else { "at least" };
                    return Err(format!("must be {than} {lo}"));
                }
                if let Some((hi, exclusive)) = *max
                    && (n > hi || (exclusive && n == hi))
                {
                    let than = if exclusive { "less than" } else { "at most" };
                    return Err(format!("must be {than} {hi}"));
                }
                Ok(Some(if *integer {
                    Value::from(n as i64)
                } else {
                    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
                }))
            }
            Kind::Text {
                min,
                max,
                pattern,
                format,
            } => {
                let chars = input.chars().count();
                if let Some(min) = min.filter(|m| chars < *m) {
                    return Err(format!("must be at least {min} characters"));
                }
                if let Some(max) = max.filter(|m| chars > *m) {
                    return Err(format!("must be at most {max} characters"));
                }
                if let Some(p) = pattern.as_ref().filter(|p| !p.is_match(input)) {
                    return Err(format!("must match the pattern {}", p.as_str()));
                }
                if let Some(format) = format {
                    check_format(format, input)?;
                }
                Ok(Some(Value::String(input.to_owned())))
            }
            Kind::Bool | Kind::Choice { .. } | Kind::Multi { .. } => {
                Ok(Some(Value::String(input.to_owned())))
            }
        }
    }

    /// Whether `n` picked items are within `minItems`/`maxItems`.
    pub(crate) fn check_items(&self, n: usize) -> Result<(), String> {
        let Kind::Multi { min, max, .. } = &self.kind else {
            return Ok(());
        };
        if n == 0 && !self.required {
            return Ok(());
        }
        if let Some(min) = min.filter(|m| n < *m) {
            return Err(format!("pick at least {min}"));
        }
        if let Some(max) = max.filter(|m| n > *m) {
            return Err(format!("pick at most {max}"));
        }
        Ok(())
    }
}

/// The simple formats: `email`, `uri`, `date`, `date-time`; others pass.
fn check_format(format: &str, input: &str) -> Result<(), String> {
    let ok = match format {
        "email" => input.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !input.contains(char::is_whitespace)
        }),
        "uri" => input.split_once(':').is_some_and(|(scheme, rest)| {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !input.contains(char::is_whitespace)
        }),
        "date" => is_date(input),
        "date-time" => input
            .split_once(['T', 't'])
            .is_some_and(|(date, time)| is_date(date) && time.len() >= 8),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        let what = match format {
            "email" => "an email address such as name@example.com",
            "uri" => "a URI such as https://example.com",
            "date" => "a date such as 2026-01-31",
            _ => "a date and time such as 2026-01-31T12:00:00Z",
        };
        Err(format!("must be {what}"))
    }
}

/// `YYYY-MM-DD` with a real month and a day the month can have.
fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(prop: Value, required: bool) -> Field {
        let schema = json!({"type": "object", "properties": {"f": prop},
                            "required": if required { json!(["f"]) } else { json!([]) }});
        fields(&schema).remove(0)
    }

    #[test]
    fn numbers_are_checked_against_their_range() {
        let f = one(
            json!({"type": "integer", "title": "Integer", "minimum": 1, "maximum": 100}),
            false,
        );
        assert_eq!(f.parse("42"), Ok(Some(json!(42))));
        assert_eq!(f.parse("500"), Err("must be at most 100".to_owned()));
        assert_eq!(f.parse("0"), Err("must be at least 1".to_owned()));
        assert_eq!(
            f.parse("4.5"),
            Err("`4.5` is not a whole number".to_owned())
        );
        assert_eq!(f.parse("four"), Err("`four` is not a number".to_owned()));
        assert_eq!(f.parse(""), Ok(None));
        assert_eq!(f.prompt(), "Integer [an integer from 1 to 100] (optional)");
        let f = one(json!({"type": "number", "exclusiveMaximum": 1}), true);
        assert_eq!(f.parse("0.5"), Ok(Some(json!(0.5))));
        assert_eq!(f.parse("1"), Err("must be less than 1".to_owned()));
        assert_eq!(f.parse(" "), Err("f is required".to_owned()));
    }

    #[test]
    fn strings_are_checked_against_length_pattern_and_format() {
        let f = one(
            json!({"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"}),
            true,
        );
        assert_eq!(f.parse("abc"), Ok(Some(json!("abc"))));
        assert_eq!(
            f.parse("a"),
            Err("must be at least 2 characters".to_owned())
        );
        assert_eq!(
            f.parse("abcde"),
            Err("must be at most 4 characters".to_owned())
        );
        assert_eq!(
            f.parse("AB"),
            Err("must match the pattern ^[a-z]+$".to_owned())
        );
        let email = one(json!({"type": "string", "format": "email"}), true);
        assert!(email.parse("ada@example.com").is_ok());
        for bad in ["ada", "ada@example", "@example.com", "a b@example.com"] {
            assert_eq!(
                email.parse(bad),
                Err("must be an email address such as name@example.com".to_owned()),
                "{bad}"
            );
        }
        let uri = one(json!({"type": "string", "format": "uri"}), true);
        assert!(uri.parse("https://example.com/x").is_ok());
        assert!(uri.parse("example.com").is_err());
        let date = one(json!({"type": "string", "format": "date"}), true);
        assert!(date.parse("2024-02-29").is_ok());
        for bad in ["2023-02-29", "2024-13-01", "24-01-01", "yesterday"] {
            assert!(date.parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn enums_become_choices_with_their_titles() {
        let f = one(
            json!({"type": "string", "oneOf": [{"const": "hero-1", "title": "Superman"}, {"const": "hero-2"}]}),
            false,
        );
        let Kind::Choice { values, labels } = &f.kind else {
            panic!("{f:?}")
        };
        assert_eq!(values, &[json!("hero-1"), json!("hero-2")]);
        assert_eq!(labels, &["Superman (hero-1)", "hero-2"]);
        let f = one(
            json!({"type": "string", "enum": ["pet-1"], "enumNames": ["Cats"]}),
            false,
        );
        assert!(matches!(&f.kind, Kind::Choice { labels, .. } if labels == &["Cats (pet-1)"]));
        let f = one(
            json!({"type": "array", "minItems": 1, "maxItems": 2,
                   "items": {"anyOf": [{"const": "a"}, {"const": "b"}, {"const": "c"}]}}),
            true,
        );
        assert!(matches!(&f.kind, Kind::Multi { values, .. } if values.len() == 3));
        assert_eq!(f.check_items(0), Err("pick at least 1".to_owned()));
        assert_eq!(f.check_items(3), Err("pick at most 2".to_owned()));
        assert_eq!(f.check_items(2), Ok(()));
    }

    #[test]
    fn properties_keep_their_order_and_defaults() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"},
            "check": {"type": "boolean", "default": true},
            "first": {"type": "string", "default": "It was"}
        }});
        let f = fields(&schema);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "check", "first"]);
        assert!(f[0].required && !f[1].required);
        assert!(matches!(f[1].kind, Kind::Bool));
        assert_eq!(f[2].default_text().as_deref(), Some("It was"));
    }
}
