//! `cargo xtask layout`: writes `crates/noeta-cli/layout.txt`, the functions the `noeta` binary
//! runs in what users do first, in the order the linker is to place them (`build.rs` hands
//! the list to `lld`).
//!
//! It links the release binary once with the linker's map (`NOETA_LINK_MAP`) and without the
//! current list, runs it under Valgrind's Callgrind on the workloads below (every instruction
//! run is recorded), finds the function section holding each, and lists the sections' symbols:
//! first those the first workload runs, then what each next one adds, each group in the
//! order the binary had them. Nothing here is timed: the list is the same whatever the
//! machine's load. Run it again after code or dependency changes: some names it lists change
//! with them (see `docs/performance.md`), and a stale list costs a run resident memory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::processes;

/// The workloads, most important first: what starting a task runs, then a step's tools, the
/// default store, and the commands people run next.
const WORKLOADS: &[&[&str]] = &[
    processes::ZERO,
    processes::FIFTY,
    &[
        "run",
        "--store",
        "sqlite:layout.db",
        "--provider",
        "scripted:fifty.json",
        "read the files",
    ],
    &["plugins", "check", "--resolve"],
    &["plugins", "list"],
    &["--help"],
];

/// One function section of the linked binary.
struct Section {
    start: u64,
    size: u64,
    /// The function's (mangled) symbol, what the ordering file names.
    symbol: String,
}

pub(crate) fn run(root: &Path) -> Result<()> {
    let valgrind = Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    if !valgrind.is_ok_and(|s| s.success()) {
        bail!(
            "`cargo xtask layout` needs Valgrind (`valgrind` on PATH; Debian: apt-get install valgrind)"
        );
    }
    let target =
        std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), PathBuf::from);
    let map = target.join("noeta-link.map");
    let status = Command::new(crate::bench::cargo())
        .args(["build", "--quiet", "--release", "-p", "noeta-cli"])
        .env("NOETA_LINK_MAP", &map)
        .env("NOETA_LINK_LAYOUT", "0")
        .current_dir(root)
        .status()
        .context("building the release noeta binary")?;
    if !status.success() {
        bail!("building the release noeta binary failed");
    }
    let binary = target.join("release").join("noeta");
    let sections = sections(
        &std::fs::read_to_string(&map)
            .with_context(|| format!("reading the linker's map {}", map.display()))?,
    )?;
    let dir = processes::scratch()?;
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, args) in WORKLOADS.iter().enumerate() {
        let out = dir.join(format!("callgrind.{i}"));
        let status = processes::in_scratch(Path::new("valgrind"), &dir)
            .args([
                "--tool=callgrind",
                "--dump-instr=yes",
                "--compress-pos=no",
                "--compress-strings=no",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&binary)
            .args(*args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running valgrind")?;
        if !status.success() {
            bail!(
                "`noeta {}` under Callgrind failed ({status})",
                args.join(" ")
            );
        }
        let hit = executed(&std::fs::read_to_string(&out)?, &sections);
        let new: Vec<usize> = hit.difference(&seen).copied().collect();
        let bytes: u64 = new.iter().map(|&i| sections[i].size).sum();
        println!(
            "noeta {}: {} functions, {} new ({} KiB)",
            args.join(" "),
            hit.len(),
            new.len(),
            bytes / 1024
        );
        order.extend(new);
        seen.extend(hit);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut text = String::new();
    for &i in &order {
        text.push_str(&sections[i].symbol);
        text.push('\n');
    }
    let list = root.join("crates/noeta-cli/layout.txt");
    std::fs::write(&list, text).with_context(|| format!("writing {}", list.display()))?;
    let bytes: u64 = order.iter().map(|&i| sections[i].size).sum();
    println!(
        "wrote {} ({} functions, {} KiB of code); `cargo build --release -p noeta-cli` links with it",
        list.display(),
        order.len(),
        bytes / 1024
    );
    Ok(())
}

/// The function sections of `.text` in an `lld` map (`-Map`), by address. Its lines are
/// `VMA LMA SIZE ALIGN` then, indented by 8 per level, an output section, an input section
/// (`FILE:(.text.SYMBOL)`, one per function) or a symbol (demangled, so not used).
fn sections(map: &str) -> Result<Vec<Section>> {
    let mut sections: Vec<Section> = Vec::new();
    let mut in_text = false;
    for line in map.lines().skip(1) {
        let mut fields = line.split_whitespace();
        let (Some(vma), Some(_lma), Some(size)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(start), Ok(size)) = (u64::from_str_radix(vma, 16), u64::from_str_radix(size, 16))
        else {
            continue;
        };
        let rest = after_numbers(line);
        let level = (rest.len() - rest.trim_start().len()) / 8;
        let rest = rest.trim();
        if level == 0 {
            in_text = rest == ".text";
            continue;
        }
        if level != 1 || !in_text || size == 0 {
            continue;
        }
        let Some(name) = rest
            .strip_suffix(')')
            .and_then(|r| r.rsplit_once(":(.text."))
            .map(|(_, name)| name)
        else {
            continue;
        };
        // LLVM's hot and cold code prefixes, which `lld` merges into `.text`.
        let symbol = ["unlikely.", "hot.", "startup.", "exit.", "split."]
            .iter()
            .find_map(|prefix| name.strip_prefix(prefix))
            .unwrap_or(name);
        sections.push(Section {
            start,
            size,
            symbol: symbol.to_owned(),
        });
    }
    sections.sort_by_key(|s| s.start);
    if sections.is_empty() {
        bail!("the linker's map lists no function sections of `.text`");
    }
    Ok(sections)
}

/// The text after the fourth number of a map line, from where its indentation starts.
fn after_numbers(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..4 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    rest
}

/// The sections (indexes into `sections`) holding an instruction Callgrind recorded: with
/// `--dump-instr=yes --compress-pos=no`, each cost line starts with its instruction's address.
fn executed(callgrind: &str, sections: &[Section]) -> BTreeSet<usize> {
    let mut hit = BTreeSet::new();
    for line in callgrind.lines() {
        let Some(hex) = line
            .strip_prefix("0x")
            .and_then(|rest| rest.split_whitespace().next())
        else {
            continue;
        };
        let Ok(address) = u64::from_str_radix(hex, 16) else {
            continue;
        };
        let i = sections.partition_point(|s| s.start <= address);
        if i > 0 && address < sections[i - 1].start + sections[i - 1].size {
            hit.insert(i - 1);
        }
    }
    hit
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "             VMA              LMA     Size Align Out     In      Symbol
          2002e0           2002e0       1c     1 .interp
          2002e0           2002e0       1c     1         <internal>:(.interp)
          77f1c0           77f1c0      200    64 .text
          77f1c0           77f1c0       31    16         /x/crt1.o:(.text)
          77f1c0           77f1c0       22     1                 _start
          77f2b0           77f2b0       c0    16         /x/a.o:(.text._RNvCs1_1a4kind)
          77f2b0           77f2b0       c0     1                 a::kind
          77f370           77f370       40    16         /x/a.o:(.text.unlikely._RNvCs1_1a4cold)
          77f370           77f370       40     1                 a::cold
          780000           780000      100    64 .rodata
          780000           780000       10    16         /x/a.o:(.text._RNvCs1_1a5other)
";

    #[test]
    fn function_sections_are_read_from_the_map_by_their_mangled_names() {
        let found = sections(MAP).unwrap();
        let found: Vec<(u64, u64, &str)> = found
            .iter()
            .map(|s| (s.start, s.size, s.symbol.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (0x77f2b0, 0xc0, "_RNvCs1_1a4kind"),
                (0x77f370, 0x40, "_RNvCs1_1a4cold")
            ]
        );
        assert!(sections("no map here\n").is_err());
    }

    #[test]
    fn an_instruction_counts_for_the_section_holding_it() {
        let read = sections(MAP).unwrap();
        let callgrind = "fn=(1) 0x77f2b0\n0x77f2b4 3 1\n0x77f3af 1 2\ncalls=1 0x77f370\n0x77f1c5 1 1\n0x900000 1 1\n";
        assert_eq!(
            executed(callgrind, &read).into_iter().collect::<Vec<_>>(),
            [0, 1]
        );
        assert!(executed("0x77f3b0 1 1\n", &read).is_empty());
    }
}
