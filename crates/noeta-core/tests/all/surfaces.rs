//! The surface registry: the sixteen standard surfaces, their JSON spellings, and construction refusals.

use std::str::FromStr;

use noeta_core::{
    ActivationBinding, ActivationScope, CollisionKey, Plane, STANDARD_SURFACES, SurfaceError,
    SurfaceOrder, SurfaceRegistry, SurfaceSpec, standard_registry,
};
use serde_json::json;

use crate::support::assert_mentions;

/// (name, plane, activation_scope, collision_key, ordering, activation_binding) — `-` is no binding.
const CATALOGUE: [(&str, &str, &str, &str, &str, &str); 16] = [
    ("tool", "identity", "per-agent", "name", "sorted", "tool"),
    ("agent", "identity", "per-agent", "name", "sorted", "agent"),
    (
        "content_kind",
        "identity",
        "per-agent",
        "kind",
        "sorted",
        "content_kind",
    ),
    (
        "prompt_fragment",
        "identity",
        "per-agent",
        "name",
        "sorted",
        "prompt_fragment",
    ),
    (
        "policy",
        "identity",
        "per-agent",
        "single-valued",
        "sorted",
        "policy",
    ),
    ("guard", "wiring", "process", "none", "sorted", "-"),
    ("observer", "wiring", "process", "none", "sorted", "-"),
    (
        "provider",
        "wiring",
        "host-wired",
        "single-valued",
        "sorted",
        "-",
    ),
    (
        "reminder_provider",
        "wiring",
        "per-agent",
        "name",
        "sorted",
        "-",
    ),
    ("reminder", "wiring", "per-agent", "name", "priority", "-"),
    (
        "tool_result_transform",
        "wiring",
        "per-agent",
        "name",
        "priority",
        "-",
    ),
    ("mcp_server", "host", "host-wired", "alias", "sorted", "-"),
    ("skills", "host", "host-wired", "none", "sorted", "-"),
    (
        "sandbox_provider",
        "host",
        "host-wired",
        "name",
        "sorted",
        "-",
    ),
    (
        "session_pack",
        "wiring",
        "per-agent",
        "name",
        "priority",
        "-",
    ),
    (
        "control_tool",
        "identity",
        "per-agent",
        "name",
        "priority",
        "elsewhere",
    ),
];

#[test]
fn the_standard_registry_holds_exactly_the_sixteen_catalogued_surfaces() {
    let registry = standard_registry();
    let mut expected: Vec<&str> = CATALOGUE.iter().map(|row| row.0).collect();
    assert_eq!(
        expected, STANDARD_SURFACES,
        "STANDARD_SURFACES is in catalogue order"
    );
    expected.sort_unstable();
    assert_eq!(registry.names(), expected);
    assert_eq!(registry.specs().count(), 16);
}

#[test]
fn every_standard_surface_has_its_catalogued_plane_scope_key_ordering_and_binding() {
    let registry = standard_registry();
    for (name, plane, scope, collision, ordering, binding) in CATALOGUE {
        let spec = registry.get(name).unwrap();
        assert_eq!(spec.name(), name);
        assert_eq!(spec.plane().as_str(), plane, "plane of {name}");
        assert_eq!(spec.scope().as_str(), scope, "activation_scope of {name}");
        assert_eq!(
            spec.collision().as_str(),
            collision,
            "collision_key of {name}"
        );
        assert_eq!(spec.ordering().as_str(), ordering, "ordering of {name}");
        assert_eq!(
            spec.binding().map(ActivationBinding::as_str).unwrap_or("-"),
            binding,
            "activation_binding of {name}"
        );
    }
}

#[test]
fn to_json_uses_the_manifest_spellings_and_null_for_no_binding() {
    let registry = standard_registry();
    for (name, plane, scope, collision, ordering, binding) in CATALOGUE {
        let binding = if binding == "-" {
            json!(null)
        } else {
            json!(binding)
        };
        assert_eq!(
            registry.get(name).unwrap().to_json(),
            json!({
                "name": name,
                "plane": plane,
                "activation_scope": scope,
                "collision_key": collision,
                "ordering": ordering,
                "activation_binding": binding,
            })
        );
    }
    let listing = registry.to_json();
    let listed: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, registry.names(), "the listing is sorted by name");
}

#[test]
fn the_json_spellings_are_kebab_case_where_the_catalogue_says_so() {
    let policy = standard_registry().get("policy").unwrap().to_json();
    assert_eq!(policy["activation_scope"], "per-agent");
    assert_eq!(policy["collision_key"], "single-valued");
    let provider = standard_registry().get("provider").unwrap().to_json();
    assert_eq!(provider["activation_scope"], "host-wired");
    let guard = standard_registry().get("guard").unwrap().to_json();
    assert_eq!(guard["collision_key"], "none");
    assert_eq!(guard["activation_binding"], json!(null));
    let control = standard_registry().get("control_tool").unwrap().to_json();
    assert_eq!(control["activation_binding"], "elsewhere");
}

#[test]
fn an_identity_surface_without_a_binding_is_refused() {
    let err = SurfaceSpec::builder("badge", Plane::Identity, ActivationScope::PerAgent)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        SurfaceError::MissingBinding {
            name: "badge".to_owned()
        }
    );
    assert_mentions(
        &err.to_string(),
        &["surface `badge`", "identity-plane", "no activation_binding"],
    );
}

#[test]
fn a_binding_on_a_wiring_or_host_surface_is_refused() {
    let err = SurfaceSpec::builder("hook", Plane::Wiring, ActivationScope::PerAgent)
        .binding(ActivationBinding::Tool)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "surface `hook` is wiring-plane but declares activation_binding=tool — only identity-plane surfaces bind into an agent"
    );
    let err = SurfaceSpec::builder("route", Plane::Host, ActivationScope::HostWired)
        .binding(ActivationBinding::Elsewhere)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        SurfaceError::UnexpectedBinding {
            name: "route".to_owned(),
            plane: Plane::Host,
            binding: ActivationBinding::Elsewhere,
        }
    );
    assert_mentions(
        &err.to_string(),
        &[
            "surface `route`",
            "host-plane",
            "activation_binding=elsewhere",
        ],
    );
}

#[test]
fn a_third_process_scoped_surface_is_refused() {
    let mut registry = standard_registry();
    let audit = SurfaceSpec::builder("audit", Plane::Wiring, ActivationScope::Process)
        .collision(CollisionKey::None)
        .build()
        .unwrap();
    let err = registry.register(audit).unwrap_err();
    assert_eq!(
        err.to_string(),
        "surface `audit` is process-scoped, but the registry already has two process-scoped surfaces (guard, observer) — a third has no runtime channel"
    );
    assert!(!registry.contains("audit"));
}

#[test]
fn two_process_scoped_surfaces_fit_in_an_empty_registry() {
    let mut registry = SurfaceRegistry::new();
    for name in ["first", "second"] {
        let spec = SurfaceSpec::builder(name, Plane::Wiring, ActivationScope::Process)
            .build()
            .unwrap();
        registry.register(spec).unwrap();
    }
    assert_eq!(registry.names(), ["first", "second"]);
}

#[test]
fn a_duplicate_surface_name_is_refused() {
    let mut registry = standard_registry();
    let tool_again = SurfaceSpec::builder("tool", Plane::Wiring, ActivationScope::PerAgent)
        .build()
        .unwrap();
    let err = registry.register(tool_again).unwrap_err();
    assert_eq!(
        err.to_string(),
        "surface `tool` is already registered — surface names must be unique (no override)"
    );
    assert_eq!(
        registry.get("tool").unwrap().plane(),
        Plane::Identity,
        "the original stays"
    );
}

#[test]
fn a_surface_name_must_be_a_plain_lowercase_identifier() {
    for bad in ["", "Route", "http-route", "http route", "routé"] {
        let err = SurfaceSpec::builder(bad, Plane::Host, ActivationScope::HostWired)
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::BadName {
                name: bad.to_owned()
            }
        );
        assert_eq!(
            err.to_string(),
            format!("surface name `{bad}` is not valid — use lowercase letters, digits and `_`")
        );
    }
    for good in ["http_route", "v2", "a_1"] {
        SurfaceSpec::builder(good, Plane::Host, ActivationScope::HostWired)
            .build()
            .unwrap();
    }
}

#[test]
fn every_enum_round_trips_its_spellings() {
    for v in Plane::ALL {
        assert_eq!(Plane::from_str(v.as_str()).unwrap(), *v);
        assert_eq!(v.to_string(), v.as_str());
    }
    for v in ActivationScope::ALL {
        assert_eq!(ActivationScope::from_str(v.as_str()).unwrap(), *v);
    }
    for v in CollisionKey::ALL {
        assert_eq!(CollisionKey::from_str(v.as_str()).unwrap(), *v);
    }
    for v in SurfaceOrder::ALL {
        assert_eq!(SurfaceOrder::from_str(v.as_str()).unwrap(), *v);
    }
    for v in ActivationBinding::ALL {
        assert_eq!(ActivationBinding::from_str(v.as_str()).unwrap(), *v);
    }
}

#[test]
fn from_str_rejects_unknown_spellings_naming_the_field_and_the_vocabulary() {
    let cases = [
        (
            Plane::from_str("identiy").map(|_| ()).unwrap_err(),
            "`identiy` is not a valid plane — expected one of: identity, wiring, host",
        ),
        (
            ActivationScope::from_str("per_agent")
                .map(|_| ())
                .unwrap_err(),
            "`per_agent` is not a valid activation_scope — expected one of: per-agent, process, host-wired",
        ),
        (
            CollisionKey::from_str("single_valued")
                .map(|_| ())
                .unwrap_err(),
            "`single_valued` is not a valid collision_key — expected one of: name, kind, alias, single-valued, none",
        ),
        (
            SurfaceOrder::from_str("random").map(|_| ()).unwrap_err(),
            "`random` is not a valid ordering — expected one of: sorted, priority",
        ),
        (
            ActivationBinding::from_str("tools")
                .map(|_| ())
                .unwrap_err(),
            "`tools` is not a valid activation_binding — expected one of: tool, agent, content_kind, prompt_fragment, policy, elsewhere",
        ),
    ];
    for (err, message) in cases {
        assert!(matches!(err, SurfaceError::UnknownValue { .. }), "{err:?}");
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn standard_registry_builds_a_fresh_registry_every_call_and_copies_are_independent() {
    let route = || {
        SurfaceSpec::builder("http_route", Plane::Host, ActivationScope::HostWired)
            .build()
            .unwrap()
    };
    let mut first = standard_registry();
    first.register(route()).unwrap();
    assert!(first.contains("http_route"));
    assert!(
        !standard_registry().contains("http_route"),
        "a later call is unaffected"
    );

    let mut copy = first.copy();
    let metrics = SurfaceSpec::builder("metrics", Plane::Host, ActivationScope::HostWired)
        .build()
        .unwrap();
    copy.register(metrics).unwrap();
    assert!(copy.contains("metrics") && copy.contains("http_route"));
    assert!(
        !first.contains("metrics"),
        "registering on a copy leaves the original alone"
    );
    assert_eq!(first.names().len(), 17);
    assert_eq!(copy.names().len(), 18);
}

#[test]
fn get_of_an_unknown_surface_lists_the_known_ones() {
    let registry = standard_registry();
    let err = registry.get("tools").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "unknown surface `tools` — not registered (known: {})",
            registry.names().join(", ")
        )
    );
    assert_mentions(
        &err.to_string(),
        &["agent, content_kind, control_tool, guard"],
    );
    let empty = SurfaceRegistry::new();
    assert_eq!(
        empty.get("tool").unwrap_err().to_string(),
        "unknown surface `tool` — not registered (known: none)"
    );
}

#[test]
fn names_are_sorted_and_contains_answers_for_registered_names_only() {
    let registry = standard_registry();
    let names = registry.names();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(registry.contains("tool_result_transform"));
    assert!(!registry.contains("tool-result-transform"));
    assert!(!registry.contains(""));
}

#[test]
fn the_standard_validators_name_the_expected_and_the_given_kind() {
    let registry = standard_registry();
    let err = registry
        .get("tool")
        .unwrap()
        .validate(&noeta_core::Resolved::PromptFragment("hi".to_owned()))
        .unwrap_err();
    assert_eq!(
        err,
        "illegal contribution value (must be a tool); got a prompt fragment"
    );
    let skills = registry.get("skills").unwrap();
    let relative = noeta_core::Resolved::SkillsPath("skills/here".into());
    assert_eq!(
        skills.validate(&relative).unwrap_err(),
        "illegal contribution value (the skills path `skills/here` is not absolute)"
    );
    skills
        .validate(&noeta_core::Resolved::SkillsPath("/srv/skills".into()))
        .unwrap();
}
