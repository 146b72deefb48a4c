//! Cancellation, and each tool's input schema against what the tool accepts.

use super::*;

#[test]
fn a_cancelled_operation_says_so() {
    let f = fixture();
    let cancel = Cancel::new();
    cancel.cancel();
    for tool in Tool::ALL {
        let args = match tool {
            Tool::ListDir => json!({}),
            Tool::Glob => json!({"pattern": "*"}),
            Tool::Grep => json!({"pattern": "hello"}),
            Tool::ReadManyFiles => json!({"paths": ["README.md"]}),
        };
        let err = f.survey.call(tool, args, &cancel).unwrap_err();
        assert!(matches!(err, SurveyError::Cancelled), "{tool}: {err}");
    }
}

/// Every property of a schema is accepted by the tool, and nothing else is.
#[test]
fn each_schema_describes_its_input() {
    let f = fixture();
    for tool in Tool::ALL {
        let schema = input_schema(tool);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(Tool::from_name(tool.name()), Some(tool));
        assert!(!tool.description().is_empty());
        let sample = |name: &str| match (tool, name) {
            (Tool::Grep, "pattern") => json!("hello"),
            _ => json!("*.md"),
        };
        let properties = schema["properties"].as_object().unwrap();
        for (name, property) in properties {
            let value = match property["type"].as_str().unwrap() {
                "string" if name == "pattern" || name == "glob" => sample(name),
                "string" => json!("."),
                "integer" => json!(1),
                "boolean" => json!(true),
                "array" => json!(["README.md"]),
                other => panic!("{tool}.{name}: type {other}"),
            };
            let mut args = json!({});
            for required in schema["required"].as_array().into_iter().flatten() {
                args[required.as_str().unwrap()] = sample(required.as_str().unwrap());
            }
            args[name] = value;
            let result = f.survey.call(tool, args.clone(), &Cancel::new());
            assert!(result.is_ok(), "{tool} {args}: {}", result.unwrap_err());
        }
        let mut args = json!({"unknown": 1});
        for required in schema["required"].as_array().into_iter().flatten() {
            args[required.as_str().unwrap()] = sample(required.as_str().unwrap());
        }
        let err = f.survey.call(tool, args, &Cancel::new()).unwrap_err();
        let SurveyError::BadArguments { message, .. } = &err else {
            panic!("{tool}: {err}");
        };
        // serde lists the fields it expects: the schema must name the same.
        let mut expected: Vec<&str> = message
            .split_once("expected ")
            .unwrap()
            .1
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        expected.sort_unstable();
        let mut named: Vec<&str> = properties.keys().map(String::as_str).collect();
        named.sort_unstable();
        assert_eq!(named, expected, "{tool}");
        for key in ["oneOf", "anyOf", "allOf"] {
            assert!(schema.get(key).is_none(), "{tool}: {key}");
        }
    }
}
