//! Links the `noeta` binary. On a Linux host building for itself (glibc) it is
//! position-independent, as a program that runs commands a model chooses should be: its code,
//! like its libraries, stack and heap, is at a random address in each process (address-space
//! layout randomisation). It is linked with packed relative relocations (`-z
//! pack-relative-relocs`) when the C library loads them (glibc 2.36 or later), which keeps the
//! loader's start-up work and the relocated pages small.
//!
//! `NOETA_LINK_PIE=0` at build time links a fixed-address executable instead (`-no-pie`):
//! slightly less to relocate at start, but the binary's own code at a known address — for
//! measurements only (`docs/performance.md`). Anywhere else the binary is linked as usual.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    layout(&target);
    println!("cargo:rerun-if-env-changed=NOETA_LINK_PIE");
    if std::env::var("NOETA_LINK_PIE").as_deref() == Ok("0") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
        return;
    }
    if glibc_version().is_some_and(|(major, minor)| (major, minor) >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// In a release build for x86-64 Linux, which Rust links with its own `lld`: the functions
/// `layout.txt` lists (those a run of `noeta` uses, in that order; `cargo xtask layout` writes
/// it) are placed together at the start of the binary's code. A run then maps a few
/// megabytes of code instead of pieces of the whole binary's thirty (the kernel maps the
/// pages around each one touched), which lowers its resident memory and its start-up time.
/// Names the list has and the binary lacks are passed over, so a stale list costs only
/// locality, but much of it: any code change renames some functions (LLVM's numbered local
/// copies), each missed one costing a run a 64 KiB window of resident code, so the list is
/// written again after code changes. `NOETA_LINK_LAYOUT=0` links without it (another
/// linker); `NOETA_LINK_MAP=FILE` writes the linker's map, which `cargo xtask layout` reads.
fn layout(target: &str) {
    println!("cargo:rerun-if-changed=layout.txt");
    println!("cargo:rerun-if-env-changed=NOETA_LINK_LAYOUT");
    println!("cargo:rerun-if-env-changed=NOETA_LINK_MAP");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    if target != "x86_64-unknown-linux-gnu" || !release {
        return;
    }
    if let Ok(map) = std::env::var("NOETA_LINK_MAP") {
        println!("cargo:rustc-link-arg-bins=-Wl,-Map={map}");
    }
    let list = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("layout.txt");
    if std::env::var("NOETA_LINK_LAYOUT").as_deref() == Ok("0") || !list.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// The host's glibc version, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc_version() -> Option<(u32, u32)> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}
