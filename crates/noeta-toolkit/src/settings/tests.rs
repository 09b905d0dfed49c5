//! The settings reader's unit tests.

use super::*;
use serde_json::json;

const KNOWN: &[&str] = &["k"];

#[test]
fn tables_under_free_names_are_read_in_name_order_with_their_keys_checked() {
    let config = json!({ "servers": { "b": { "k": 1 }, "a": { "k": 2 } } });
    let table = SettingsTable::new("p", &config, &["servers"]).unwrap();
    let servers = table.tables("servers", KNOWN).unwrap();
    let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let bad = json!({ "servers": { "a": { "x": 1 } } });
    let table = SettingsTable::new("p", &bad, &["servers"]).unwrap();
    let err = table.tables("servers", KNOWN).unwrap_err().to_string();
    assert!(err.contains("servers.a") && err.contains("`x`"), "{err}");
    let bad = json!({ "servers": { "a": 1 } });
    let table = SettingsTable::new("p", &bad, &["servers"]).unwrap();
    let err = table.tables("servers", KNOWN).unwrap_err().to_string();
    assert!(err.contains("servers.a"), "{err}");
    let none = json!({});
    let table = SettingsTable::new("p", &none, &["servers"]).unwrap();
    assert!(table.tables("servers", KNOWN).unwrap().is_empty());
}

/// The table `{ "k": value }` of plugin `p`.
fn with(value: Value) -> Value {
    json!({ "k": value })
}

fn read<T>(
    value: Value,
    get: impl FnOnce(&SettingsTable<'_>) -> Result<Option<T>, SettingsError>,
) -> Result<Option<T>, String> {
    let config = with(value);
    let table = SettingsTable::new("p", &config, KNOWN).map_err(String::from)?;
    get(&table).map_err(String::from)
}

#[test]
fn an_absent_table_reads_as_empty_and_absent_keys_as_none() {
    let table = SettingsTable::new("p", &Value::Null, KNOWN).unwrap();
    assert_eq!(table.plugin(), "p");
    assert_eq!(table.get("k"), None);
    assert_eq!(table.string("k").unwrap(), None);
    assert_eq!(table.whole::<u32>("k").unwrap(), None);
    assert_eq!(table.table("k", &[]).unwrap().map(|_| ()), None);
    let empty = json!({});
    let table = SettingsTable::new("p", &empty, KNOWN).unwrap();
    assert_eq!(table.bool("k").unwrap(), None);
}

#[test]
fn a_value_that_is_not_a_table_is_refused_naming_the_plugin_table() {
    for (config, got) in [
        (json!("x"), "\"x\""),
        (json!(3), "3"),
        (json!([1]), "[1]"),
        (json!(true), "true"),
    ] {
        let err = SettingsTable::new("web", &config, KNOWN).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("settings [plugins.web]: expected a table, got `{got}`")
        );
        assert_eq!(err.plugin(), "web");
    }
}

#[test]
fn unknown_keys_are_listed_with_the_known_ones() {
    let config = json!({ "k": 1, "max_byte": 1 });
    let err = SettingsTable::new("web", &config, &["k", "max_bytes"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "settings [plugins.web]: unknown key `max_byte` (known: k, max_bytes)"
    );
    let config = json!({ "a": 1, "b": 2 });
    let err = SettingsTable::new("p", &config, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "settings [plugins.p]: unknown keys `a`, `b` (known: none)"
    );
    assert!(
        matches!(err, SettingsError::UnknownKeys { ref unknown, .. } if unknown == &["a", "b"])
    );
}

#[test]
fn strings_text_and_secrets() {
    assert_eq!(read(json!(""), |t| t.string("k")), Ok(Some(String::new())));
    assert_eq!(
        read(json!(7), |t| t.string("k")),
        Err("settings [plugins.p] k: expected a string, got `7`".to_owned())
    );
    assert_eq!(
        read(json!(" a "), |t| t.text("k")),
        Ok(Some("a".to_owned()))
    );
    assert_eq!(
        read(json!("  "), |t| t.text("k")),
        Err("settings [plugins.p] k: expected a non-empty string, got `\"  \"`".to_owned())
    );
    assert_eq!(
        read(json!(" {env:KEY} "), |t| t.secret("k")),
        Ok(Some("{env:KEY}".to_owned()))
    );
    for bad in [json!(12345), json!(" "), json!(["hunter2"])] {
        let err = read(bad, |t| t.secret("k")).unwrap_err();
        assert_eq!(
            err,
            "settings [plugins.p] k: expected a non-empty string (or a secret reference such as `{env:NAME}`)"
        );
    }
}

#[test]
fn booleans() {
    assert_eq!(read(json!(false), |t| t.bool("k")), Ok(Some(false)));
    assert_eq!(
        read(json!("yes"), |t| t.bool("k")),
        Err("settings [plugins.p] k: expected true or false, got `\"yes\"`".to_owned())
    );
    assert_eq!(
        read(Value::Null, |t| t.bool("k")),
        Err("settings [plugins.p] k: expected true or false, got `null`".to_owned())
    );
}

#[test]
fn whole_numbers_and_their_ranges() {
    assert_eq!(read(json!(0), |t| t.whole::<u64>("k")), Ok(Some(0)));
    assert_eq!(read(json!(7), |t| t.whole::<usize>("k")), Ok(Some(7)));
    assert_eq!(read(json!(7), |t| t.positive::<u32>("k")), Ok(Some(7)));
    for (bad, got) in [
        (json!(-1), "-1"),
        (json!(1.5), "1.5"),
        (json!("3"), "\"3\""),
    ] {
        assert_eq!(
            read(bad, |t| t.whole::<u32>("k")),
            Err(format!(
                "settings [plugins.p] k: expected a whole number, got `{got}`"
            ))
        );
    }
    assert_eq!(
        read(json!(0), |t| t.positive::<usize>("k")),
        Err("settings [plugins.p] k: expected a positive integer, got `0`".to_owned())
    );
    assert_eq!(
        read(json!(5_000_000_000_u64), |t| t.whole::<u32>("k")),
        Err("settings [plugins.p] k: expected a whole number no greater than 4294967295, got `5000000000`".to_owned())
    );
    assert_eq!(
        read(json!(256), |t| t.positive::<u8>("k")),
        Err(
            "settings [plugins.p] k: expected a positive integer no greater than 255, got `256`"
                .to_owned()
        )
    );
    assert_eq!(
        read(json!(u64::MAX), |t| t.whole::<u64>("k")),
        Ok(Some(u64::MAX))
    );
}

#[test]
fn durations_in_milliseconds_or_seconds() {
    assert_eq!(
        read(json!(1500), |t| t.duration("k", TimeUnit::Milliseconds)),
        Ok(Some(Duration::from_millis(1500)))
    );
    assert_eq!(
        read(json!(0), |t| t.duration("k", TimeUnit::Seconds)),
        Ok(Some(Duration::ZERO))
    );
    assert_eq!(
        read(json!(u64::MAX), |t| t
            .positive_duration("k", TimeUnit::Seconds)),
        Ok(Some(Duration::from_secs(u64::MAX)))
    );
    assert_eq!(
        read(json!(1.5), |t| t.duration("k", TimeUnit::Seconds)),
        Err("settings [plugins.p] k: expected a whole number of seconds, got `1.5`".to_owned())
    );
    assert_eq!(
        read(json!("1s"), |t| t.duration("k", TimeUnit::Milliseconds)),
        Err(
            "settings [plugins.p] k: expected a whole number of milliseconds, got `\"1s\"`"
                .to_owned()
        )
    );
    assert_eq!(
        read(json!(0), |t| t.positive_duration("k", TimeUnit::Seconds)),
        Err(
            "settings [plugins.p] k: expected a positive whole number of seconds, got `0`"
                .to_owned()
        )
    );
}

#[test]
fn lists() {
    assert_eq!(
        read(json!(["a", "b"]), |t| t.strings("k")),
        Ok(Some(vec!["a".to_owned(), "b".to_owned()]))
    );
    assert_eq!(read(json!([]), |t| t.strings("k")), Ok(Some(Vec::new())));
    for (bad, got) in [(json!("a"), "\"a\""), (json!(["a", 1]), "[\"a\",1]")] {
        assert_eq!(
            read(bad, |t| t.strings("k")),
            Err(format!(
                "settings [plugins.p] k: expected a list of strings, got `{got}`"
            ))
        );
    }
    assert_eq!(
        read(json!([1, 2]), |t| t
            .array("k", "a list of globs")
            .map(|a| a.map(<[Value]>::len))),
        Ok(Some(2))
    );
    assert_eq!(
        read(json!({}), |t| t
            .array("k", "a list of globs")
            .map(|a| a.map(|_| ()))),
        Err("settings [plugins.p] k: expected a list of globs, got `{}`".to_owned())
    );
    let config = with(json!([3]));
    let table = SettingsTable::new("p", &config, KNOWN).unwrap();
    let entry = &table.array("k", "a list").unwrap().unwrap()[0];
    assert_eq!(
        table.expected("k", "a path", entry).to_string(),
        "settings [plugins.p] k: expected a path, got `3`"
    );
    assert_eq!(
        table.invalid("k", "`x` is not a directory").to_string(),
        "settings [plugins.p] k: `x` is not a directory"
    );
}

#[test]
fn one_of_these_words() {
    let modes = [("off", 0), ("allowlist", 1), ("arbitrary", 2)];
    assert_eq!(
        read(json!("arbitrary"), |t| t.one_of("k", &modes)),
        Ok(Some(2))
    );
    for (bad, got) in [
        (json!("on"), "\"on\""),
        (json!(3), "3"),
        (json!("Off"), "\"Off\""),
    ] {
        assert_eq!(
            read(bad, |t| t.one_of("k", &modes)),
            Err(format!(
                "settings [plugins.p] k: expected `off`, `allowlist` or `arbitrary`, got `{got}`"
            ))
        );
    }
    assert_eq!(
        read(json!("x"), |t| t
            .one_of("k", &[("open", ()), ("trust-store", ())])),
        Err("settings [plugins.p] k: expected `open` or `trust-store`, got `\"x\"`".to_owned())
    );
    assert_eq!(
        read(json!("x"), |t| t.one_of("k", &[("only", ())])),
        Err("settings [plugins.p] k: expected `only`, got `\"x\"`".to_owned())
    );
    assert_eq!(
        read(json!("x"), |t| t.one_of::<()>("k", &[])),
        Err("settings [plugins.p] k: expected nothing, got `\"x\"`".to_owned())
    );
}

#[test]
fn nested_tables_name_their_keys_dotted() {
    let config = json!({ "price": { "input": 0.5, "output": -1 } });
    let table = SettingsTable::new("providers", &config, &["price"]).unwrap();
    let price = table.table("price", &["input", "output"]).unwrap().unwrap();
    assert_eq!(
        price.read("input", "dollars", Value::as_f64).unwrap(),
        Some(0.5)
    );
    assert_eq!(
        price
            .read("output", "dollars", |v| v.as_f64().filter(|d| *d >= 0.0))
            .unwrap_err()
            .to_string(),
        "settings [plugins.providers] price.output: expected dollars, got `-1`"
    );
    assert_eq!(
        table.table("price", &["input"]).unwrap_err().to_string(),
        "settings [plugins.providers] price: unknown key `output` (known: input)"
    );
    let config = json!({ "price": 7 });
    let table = SettingsTable::new("providers", &config, &["price"]).unwrap();
    assert_eq!(
        table.table("price", &[]).unwrap_err().to_string(),
        "settings [plugins.providers] price: expected a table, got `7`"
    );
    let config = json!({ "a": { "b": { "c": "x" } } });
    let table = SettingsTable::new("p", &config, &["a"]).unwrap();
    let b = table
        .table("a", &["b"])
        .unwrap()
        .unwrap()
        .table("b", &["c"])
        .unwrap()
        .unwrap();
    assert_eq!(
        b.bool("c").unwrap_err().to_string(),
        "settings [plugins.p] a.b.c: expected true or false, got `\"x\"`"
    );
}

#[test]
fn tables_of_strings() {
    assert_eq!(
        read(json!({ "A": "1", "B": "" }), |t| t.string_map("k")),
        Ok(Some(BTreeMap::from([
            ("A".to_owned(), "1".to_owned()),
            ("B".to_owned(), String::new())
        ])))
    );
    assert_eq!(
        read(json!({ "N": 1 }), |t| t.string_map("k")),
        Err("settings [plugins.p] k.N: expected a string, got `1`".to_owned())
    );
    assert_eq!(
        read(json!(["N"]), |t| t.string_map("k")),
        Err("settings [plugins.p] k: expected a table of strings, got `[\"N\"]`".to_owned())
    );
}

#[test]
fn odd_json_never_panics_and_every_error_names_the_plugin_and_the_key() {
    let odd = [
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(f64::MAX),
        json!(-0.0),
        json!(1e-300),
        json!(""),
        json!("\u{0}\n\u{202e}é🦀"),
        json!("{env:X}"),
        json!([]),
        json!([null, [[]], {}]),
        json!({}),
        json!({ "": { "": [] } }),
        json!({ "k": { "k": "k" } }),
    ];
    for value in &odd {
        match SettingsTable::new("p", value, KNOWN) {
            Ok(table) => drop(table.string("k")),
            Err(err) => assert!(err.to_string().starts_with("settings [plugins.p]"), "{err}"),
        }
        let config = with(value.clone());
        let table = SettingsTable::new("p", &config, KNOWN).unwrap();
        let errors = [
            table.string("k").err(),
            table.text("k").err(),
            table.secret("k").err(),
            table.bool("k").err(),
            table.whole::<u8>("k").err(),
            table.whole::<usize>("k").err(),
            table.positive::<u32>("k").err(),
            table.positive::<u64>("k").err(),
            table.duration("k", TimeUnit::Milliseconds).err(),
            table.positive_duration("k", TimeUnit::Seconds).err(),
            table.strings("k").err(),
            table.array("k", "a list").err(),
            table.one_of("k", &[("a", 1), ("b", 2)]).err(),
            table.table("k", &["k"]).err(),
            table.table("k", &[]).err(),
            table.string_map("k").err(),
            table.read("k", "anything", |_| None::<()>).err(),
        ];
        for err in errors.into_iter().flatten() {
            let text = err.to_string();
            assert!(text.starts_with("settings [plugins.p] k"), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }
}
