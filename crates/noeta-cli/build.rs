//! Links the `noeta` binary with packed relative relocations (`-z pack-relative-relocs`) when
//! building for this very Linux host and its C library (glibc 2.36 or later) loads them: the
//! loader then applies a few kilobytes of relocations at start instead of some 1.8 MB, which
//! makes every `noeta` process start faster and smaller (`cargo xtask bench`,
//! `run_zero_step_process_ms`). Anywhere else the binary is linked as usual.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
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
