//! The `agentic_wrap*` settings of the core dialect, declared once: the
//! field, its key, how it is read from the file and how it is shown all come
//! from one line of the table below.

use std::path::Path;

use serde_json::{Value, json};

use crate::{ModelPrice, ModelPrices, Setting};

macro_rules! wrap_settings {
    ($(
        $(#[$doc:meta])*
        $field:ident: $ty:ty = $key:literal, read $read:expr, show $show:expr;
    )*) => {
        /// The digest ("agentic wrap") settings of `mcp.json`, each with the
        /// file that set it (`None` when no file does). [`load`](crate::load)
        /// reads them; in code, start from [`WrapSettings::default`] and set
        /// fields.
        #[derive(Debug, Clone, Default, PartialEq)]
        #[non_exhaustive]
        pub struct WrapSettings {
            $( $(#[$doc])* pub $field: Option<Setting<$ty>>, )*
        }

        impl WrapSettings {
            /// Their keys in `mcp.json`, in the order `config show` lists them.
            pub const KEYS: [&'static str; wrap_settings!(@count $($key)*)] = [$($key),*];

            /// Reads them from a core-dialect document the schema accepted.
            pub(crate) fn read(root: &Value, source: &Path) -> WrapSettings {
                WrapSettings {
                    $( $field: root.get($key).and_then($read).map(|value| Setting {
                        value,
                        source: source.to_owned(),
                    }), )*
                }
            }

            /// Each setting of `self`, else of `lower` (a file of lower precedence).
            pub(crate) fn or(self, lower: WrapSettings) -> WrapSettings {
                WrapSettings {
                    $( $field: self.$field.or(lower.$field), )*
                }
            }

            /// Each key with its value as JSON and the file that set it
            /// (`None` when unset), in [`WrapSettings::KEYS`] order.
            pub fn entries(&self) -> Vec<(&'static str, Option<(Value, &Path)>)> {
                vec![$(
                    ($key, self.$field.as_ref().map(|s| (($show)(&s.value), s.source.as_path()))),
                )*]
            }
        }
    };
    (@count) => { 0 };
    (@count $head:literal $($tail:literal)*) => { 1 + wrap_settings!(@count $($tail)*) };
}

wrap_settings! {
    /// `agentic_wrap`: whether large results are digested.
    enabled: bool = "agentic_wrap", read Value::as_bool, show |v: &bool| json!(v);
    /// `agentic_wrap_threshold`: result size in bytes above which the digest runs.
    threshold: u64 = "agentic_wrap_threshold", read Value::as_u64, show |v: &u64| json!(v);
    /// `agentic_wrap_llm`: whether the LLM second chance is enabled.
    llm: bool = "agentic_wrap_llm", read Value::as_bool, show |v: &bool| json!(v);
    /// `agentic_wrap_model`: the model of the LLM second chance.
    model: String = "agentic_wrap_model",
        read |v: &Value| v.as_str().map(str::to_owned), show |v: &String| json!(v);
    /// `agentic_wrap_llm_max_input_bytes`: the most bytes of a payload the
    /// LLM second chance is shown (its head and tail past that; default 256 KiB).
    llm_max_input_bytes: u64 = "agentic_wrap_llm_max_input_bytes",
        read Value::as_u64, show |v: &u64| json!(v);
    /// `agentic_wrap_pricing`: model → (input, cached input, output) US
    /// dollars per million tokens, over the built-in table. A model without
    /// `cached_input` pays its input price for cached tokens.
    pricing: ModelPrices = "agentic_wrap_pricing", read read_prices, show show_prices;
}

fn read_prices(value: &Value) -> Option<ModelPrices> {
    let models = value.as_object()?;
    let price = |p: &Value, k: &str| p.get(k).and_then(Value::as_f64);
    Some(
        models
            .iter()
            .map(|(model, p)| {
                let input = price(p, "input").unwrap_or(0.0);
                let price = ModelPrice {
                    input,
                    // Unsaid, a cached token is not assumed cheaper.
                    cached_input: price(p, "cached_input").unwrap_or(input),
                    output: price(p, "output").unwrap_or(0.0),
                };
                (model.clone(), price)
            })
            .collect(),
    )
}

fn show_prices(prices: &ModelPrices) -> Value {
    prices
        .iter()
        .map(|(model, p)| {
            let price =
                json!({"input": p.input, "cached_input": p.cached_input, "output": p.output});
            (model.clone(), price)
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_reads_merges_and_shows_under_its_key() {
        let high = json!({
            "agentic_wrap": false,
            "agentic_wrap_model": "m-high",
            "agentic_wrap_pricing": {"m": {"input": 1.5, "output": 6}},
        });
        let low = json!({
            "agentic_wrap": true,
            "agentic_wrap_threshold": 9000,
            "agentic_wrap_llm": true,
            "agentic_wrap_model": "m-low",
            "agentic_wrap_llm_max_input_bytes": 4096,
        });
        let merged = WrapSettings::read(&high, Path::new("high.json"))
            .or(WrapSettings::read(&low, Path::new("low.json")));
        let shown: Vec<(&str, Option<(Value, String)>)> = merged
            .entries()
            .into_iter()
            .map(|(k, v)| (k, v.map(|(v, p)| (v, p.display().to_string()))))
            .collect();
        let want = |v: Value, p: &str| Some((v, p.to_owned()));
        assert_eq!(
            shown,
            vec![
                ("agentic_wrap", want(json!(false), "high.json")),
                ("agentic_wrap_threshold", want(json!(9000), "low.json")),
                ("agentic_wrap_llm", want(json!(true), "low.json")),
                ("agentic_wrap_model", want(json!("m-high"), "high.json")),
                (
                    "agentic_wrap_llm_max_input_bytes",
                    want(json!(4096), "low.json")
                ),
                (
                    "agentic_wrap_pricing",
                    want(
                        json!({"m": {"input": 1.5, "cached_input": 1.5, "output": 6.0}}),
                        "high.json"
                    )
                ),
            ]
        );
        assert_eq!(
            WrapSettings::KEYS.to_vec(),
            shown.iter().map(|(k, _)| *k).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_schema_declares_every_key() {
        let schema: Value = serde_json::from_str(crate::CORE_SCHEMA).unwrap_or_default();
        for key in WrapSettings::KEYS {
            assert!(
                schema.pointer(&format!("/properties/{key}")).is_some(),
                "{key} is missing from core.schema.json"
            );
        }
    }
}
