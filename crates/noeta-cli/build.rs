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
    println!("cargo:rerun-if-env-changed=NOETA_LINK_PIE");
    if std::env::var("NOETA_LINK_PIE").as_deref() == Ok("0") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
        return;
    }
    if glibc_version().is_some_and(|(major, minor)| (major, minor) >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
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
