//! Links the `noeta` binary, on a Linux host building for itself (glibc), as a fixed-address
//! executable (`-no-pie`): the loader then has next to nothing to relocate at start, where a
//! position-independent binary patches every pointer of its read-only tables and so copies
//! those pages into each process's private memory (`cargo xtask bench`,
//! `run_zero_step_process_ms`, `run_zero_step_peak_rss_kib`). The binary's own code then has
//! no random address; its libraries, stack and heap still do.
//!
//! `NOETA_LINK_PIE=1` at build time keeps it position-independent, linked with packed relative
//! relocations (`-z pack-relative-relocs`) when the C library loads them (glibc 2.36 or
//! later). Anywhere else the binary is linked as usual.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    println!("cargo:rerun-if-env-changed=NOETA_LINK_PIE");
    if std::env::var("NOETA_LINK_PIE").as_deref() != Ok("1") {
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
