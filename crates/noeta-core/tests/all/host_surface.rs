//! A host-registered surface (`http_route`) travels through parsing, merging, ordering and resolution with no loader edit.

use std::collections::BTreeSet;

use noeta_core::manifest::parse_manifest;
use noeta_core::{
    ActivationScope, CollisionKey, HostValue, LoadError, LoadOptions, Origin, Plane, PluginSource,
    RefTable, ResolveError, Resolved, SurfaceOrder, SurfaceRegistry, SurfaceSpec, load_plugins,
    standard_registry,
};

use crate::support::{Manifest, agent, assert_mentions, compile};

/// The value an `http_route` contribution resolves to.
#[derive(Debug, Clone, PartialEq)]
struct Route {
    method: &'static str,
    path: &'static str,
}

fn http_route() -> SurfaceSpec {
    SurfaceSpec::builder("http_route", Plane::Host, ActivationScope::HostWired)
        .collision(CollisionKey::Name)
        .ordering(SurfaceOrder::Priority)
        .validator(|value| match value {
            Resolved::Host(host) if host.downcast::<Route>().is_some() => Ok(()),
            Resolved::Host(host) => Err(format!(
                "an http route must wrap a Route, got a host value of type {}",
                host.type_name()
            )),
            other => Err(format!("an http route must be a host value, got {other:?}")),
        })
        .build()
        .unwrap()
}

fn host_registry() -> SurfaceRegistry {
    let mut registry = standard_registry();
    registry.register(http_route()).unwrap();
    registry
}

fn routes(name: &str) -> RefTable {
    RefTable::new()
        .with("routes::health", |_| {
            Ok(Resolved::Host(HostValue::new(Route {
                method: "GET",
                path: "/health",
            })))
        })
        .with("routes::metrics", |_| {
            Ok(Resolved::Host(HostValue::new(Route {
                method: "GET",
                path: "/metrics",
            })))
        })
        .with("routes::number", |_| {
            Ok(Resolved::Host(HostValue::new(42_u32)))
        })
        .with("routes::text", |_| {
            Ok(Resolved::PromptFragment("GET /".to_owned()))
        })
        .with("routes::owner", {
            let name = name.to_owned();
            move |request| {
                assert_eq!(
                    request.plugin, name,
                    "each plugin resolves through its own table"
                );
                Ok(Resolved::Host(HostValue::new(Route {
                    method: "POST",
                    path: "/owner",
                })))
            }
        })
}

fn route_entry(name: &str, reference: &str, priority: Option<i64>) -> String {
    let priority = priority
        .map(|p| format!("priority = {p}"))
        .unwrap_or_default();
    format!("name = \"{name}\"\nref = \"{reference}\"\n{priority}")
}

fn host_options() -> LoadOptions {
    LoadOptions::new(host_registry())
}

#[test]
fn the_surface_is_unknown_to_manifests_until_the_host_registers_it() {
    let text = Manifest::new("web")
        .entry("http_route", &route_entry("health", "routes::health", None))
        .text();
    let origin = Origin::Crate("web-crate".to_owned());

    let err = parse_manifest(&text, &origin, &standard_registry()).unwrap_err();
    assert_mentions(
        &err.to_string(),
        &[
            "manifest crate `web-crate` (plugin `web`)",
            "contribution #1 names unknown surface `http_route`",
            "(known: agent, content_kind,",
        ],
    );

    let manifest = parse_manifest(&text, &origin, &host_registry()).unwrap();
    assert_eq!(manifest.contributions[0].surface, "http_route");
    assert_eq!(manifest.contributions[0].name, "health");
}

#[test]
fn a_linked_crate_using_an_unregistered_surface_stops_loading() {
    let web =
        Manifest::new("web").entry("http_route", &route_entry("health", "routes::health", None));
    let sources = [PluginSource::Linked(web.linked("web-crate", routes("web")))];
    let err = load_plugins(&sources, &LoadOptions::new(standard_registry())).unwrap_err();
    assert!(matches!(err, LoadError::LinkedManifest(_)), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &[
            "linked plugin manifest is invalid",
            "crate `web-crate`",
            "unknown surface `http_route`",
        ],
    );
    let set = load_plugins(&sources, &host_options()).unwrap();
    assert_eq!(set.names(), ["web"]);
}

#[test]
fn two_plugins_routing_the_same_name_collide() {
    let sources = [
        PluginSource::Linked(
            Manifest::new("web-b")
                .entry("http_route", &route_entry("health", "routes::health", None))
                .linked("web-b-crate", routes("web-b")),
        ),
        PluginSource::Linked(
            Manifest::new("web-a")
                .entry("http_route", &route_entry("health", "routes::health", None))
                .linked("web-a-crate", routes("web-a")),
        ),
    ];
    let set = load_plugins(&sources, &host_options()).unwrap();
    let err = set.merged().unwrap_err();
    assert_eq!(
        err.to_string(),
        "http_route `health` is contributed by both plugin `web-a` and plugin `web-b` — no override"
    );
}

#[test]
fn routes_are_ordered_by_the_surface_declared_ordering() {
    let sources = [
        PluginSource::Linked(
            Manifest::new("web-a")
                .entry(
                    "http_route",
                    &route_entry("metrics", "routes::metrics", Some(10)),
                )
                .entry("http_route", &route_entry("health", "routes::health", None))
                .linked("web-a-crate", routes("web-a")),
        ),
        PluginSource::Linked(
            Manifest::new("web-b")
                .entry(
                    "http_route",
                    &route_entry("owner", "routes::owner", Some(-5)),
                )
                .linked("web-b-crate", routes("web-b")),
        ),
    ];
    let set = load_plugins(&sources, &host_options()).unwrap();
    let merged = set.merged().unwrap();
    let order: Vec<(&str, &str)> = merged
        .for_surface("http_route")
        .iter()
        .map(|e| (e.plugin.as_str(), e.contribution.name.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("web-b", "owner"),
            ("web-a", "health"),
            ("web-a", "metrics")
        ]
    );
}

#[test]
fn routes_resolve_through_a_ref_table_and_the_surface_validator() {
    let sources = [PluginSource::Linked(
        Manifest::new("web")
            .entry("http_route", &route_entry("health", "routes::health", None))
            .entry("http_route", &route_entry("owner", "routes::owner", None))
            .entry("http_route", &route_entry("number", "routes::number", None))
            .entry("http_route", &route_entry("text", "routes::text", None))
            .entry("http_route", &route_entry("ghost", "routes::ghost", None))
            .linked("web-crate", routes("web")),
    )];
    let set = load_plugins(&sources, &host_options()).unwrap();

    let health = set
        .resolve_contribution("web", "http_route", "health")
        .unwrap();
    let Resolved::Host(host) = health else {
        panic!("expected a host value, got {health:?}");
    };
    assert_eq!(
        host.downcast::<Route>(),
        Some(&Route {
            method: "GET",
            path: "/health"
        })
    );
    set.resolve_contribution("web", "http_route", "owner")
        .unwrap();

    let err = set
        .resolve_contribution("web", "http_route", "number")
        .unwrap_err();
    assert!(matches!(err, ResolveError::Invalid { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin `web`: contribution `number` to surface `http_route` failed validation: an http route must wrap a Route, got a host value of type u32"
    );

    let err = set
        .resolve_contribution("web", "http_route", "text")
        .unwrap_err();
    assert_mentions(
        &err.to_string(),
        &[
            "plugin `web`",
            "contribution `text`",
            "surface `http_route`",
            "must be a host value",
        ],
    );

    let err = set
        .resolve_contribution("web", "http_route", "ghost")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `web`: ref `routes::ghost` of http_route `ghost` failed to resolve: this plugin's resolver knows no ref `routes::ghost` (known: routes::health, routes::metrics, routes::number, routes::owner, routes::text)"
    );
}

#[test]
fn host_wired_routes_are_left_for_the_host_and_never_auto_resolved() {
    // The `number` route would fail validation: compiling an agent must not touch it.
    let sources = [PluginSource::Linked(
        Manifest::new("web")
            .entry("http_route", &route_entry("number", "routes::number", None))
            .linked("web-crate", routes("web")),
    )];
    let set = load_plugins(&sources, &host_options()).unwrap();
    let merged = set.merged().unwrap();
    let everything: BTreeSet<String> = set.names().into_iter().map(str::to_owned).collect();
    let resolution = set.resolve_for(&merged, &everything).unwrap();
    assert!(resolution.for_surface("http_route").is_empty());
    let compiled = compile(&set, &agent("main", &["web"])).unwrap();
    assert_eq!(compiled.spec.plugins, ["web"]);
}

#[test]
fn a_panicking_validator_is_a_failed_validation_not_a_crash() {
    let mut registry = standard_registry();
    let spec = SurfaceSpec::builder("strict_route", Plane::Host, ActivationScope::HostWired)
        .validator(|_| panic!("validator bug"))
        .build()
        .unwrap();
    registry.register(spec).unwrap();
    let manifest =
        Manifest::new("web").entry("strict_route", "name = \"r\"\nref = \"routes::health\"");
    let sources = [PluginSource::Linked(
        manifest.linked("web-crate", routes("web")),
    )];
    let set = load_plugins(&sources, &LoadOptions::new(registry)).unwrap();
    let err = set
        .resolve_contribution("web", "strict_route", "r")
        .unwrap_err();
    assert!(matches!(err, ResolveError::Invalid { .. }), "{err}");
    assert_mentions(
        &err.to_string(),
        &[
            "plugin `web`",
            "strict_route",
            "validator panicked: validator bug",
        ],
    );
}
