//! A store file checked row by row, and what is readable of a damaged one copied into a new file.
//!
//! Both read the file read-only and tolerate damage: a scan that hits a damaged page stops
//! there and the rows after it are looked up one key at a time, so one bad page costs the rows
//! on it and no more. A task's log is kept as its longest readable prefix — a log with a hole
//! in it would fold into a state no run ever had.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use noeta_core::store::{ContentRef, content_ref};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use crate::error::OpenError;
use crate::schema::{self, integrity, read_only, sqlite_error};

/// What a check of a store file found. The store is sound when `problems` is empty.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StoreCheck {
    /// Tasks whose row could be read.
    pub tasks: usize,
    /// Events read, over every task.
    pub events: u64,
    /// Content bodies read and verified against their address.
    pub bodies: usize,
    /// Everything wrong, one line each, in the order found.
    pub problems: Vec<String>,
}

/// What a salvage copied, and what it could not.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Salvage {
    /// Every task whose row could be read, in creation order.
    pub tasks: Vec<SalvagedTask>,
    /// Task rows that could not be read, with why.
    pub lost_tasks: Vec<String>,
    /// Content bodies copied (each verified against its address).
    pub bodies: usize,
    /// Bodies a copied event refers to that could not be copied, with why.
    pub lost_bodies: Vec<String>,
    /// Snapshots copied (the others are rebuilt by folding when the task is next opened).
    pub snapshots: usize,
}

impl Salvage {
    /// Whether everything readable was everything there was.
    pub fn complete(&self) -> bool {
        self.lost_tasks.is_empty()
            && self.lost_bodies.is_empty()
            && self.tasks.iter().all(|t| t.lost.is_none())
    }
}

/// One task of a salvage.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SalvagedTask {
    /// The task's id.
    pub id: String,
    /// Events copied: the log's readable prefix.
    pub copied: u64,
    /// What stopped the copy before the end of the log, if anything did.
    pub lost: Option<String>,
}

/// A `tasks` row.
struct TaskRow {
    no: i64,
    id: String,
    parent: Option<i64>,
    created_ms: i64,
    epoch: i64,
}

/// An `events` row whose data parsed as JSON.
struct EventRow {
    seq: i64,
    extension: String,
    kind: String,
    data: String,
    message: Option<String>,
    refs: Vec<ContentRef>,
}

/// A task's readable events, how many of them are its intact prefix, and what is wrong.
struct Log {
    events: Vec<EventRow>,
    prefix: usize,
    problems: Vec<String>,
}

/// How many rows a scan reads per statement.
const PAGE: i64 = 256;

/// Checks the store file at `path` without writing to it: SQLite's integrity and foreign-key
/// checks, then every task's log (sequence numbers from 1 with no gap, data that parses), the
/// snapshots, every content body against its address, and every body a log refers to.
///
/// A file that cannot be opened as a noeta store at all is the error.
pub fn check_store(path: &Path) -> Result<StoreCheck, OpenError> {
    let (conn, damage) = read_only(path, true)?;
    let mut check = StoreCheck::default();
    let problems = &mut check.problems;
    problems.extend(damage.map(|d| format!("its `noeta_meta` table cannot be read: {d}")));
    for line in integrity(&conn, path, "integrity_check", 100)? {
        problems.push(format!("SQLite's integrity check: {line}"));
    }
    problems.extend(foreign_keys(&conn));
    let (tasks, lost) = tasks(&conn);
    problems.extend(lost);
    check.tasks = tasks.len();
    let mut heads = BTreeMap::new();
    let mut refs: Vec<(String, i64, ContentRef)> = Vec::new();
    for task in &tasks {
        let log = events(&conn, task.no);
        check.events += log.events.len() as u64;
        for problem in log.problems {
            problems.push(format!("task `{}`: {problem}", task.id));
        }
        for event in log.events {
            refs.extend(
                event
                    .refs
                    .into_iter()
                    .map(|r| (task.id.clone(), event.seq, r)),
            );
        }
        heads.insert(task.no, (task.id.as_str(), check_len(&conn, task.no)));
    }
    problems.extend(snapshot_problems(&conn, &heads));
    let wanted = refs.iter().map(|(_, _, r)| r.sha256.clone()).collect();
    let (bodies, lost) = bodies(&conn, &wanted);
    problems.extend(lost);
    check.bodies = bodies.len();
    for (task, seq, reference) in refs {
        if !bodies.contains_key(&reference.sha256) {
            problems.push(format!(
                "task `{task}`, event {seq}: refers to content {} ({} bytes, {}) that the store \
                 does not hold intact",
                reference.sha256, reference.len, reference.media_type
            ));
        }
    }
    Ok(check)
}

/// Copies every readable task of the store file `from` into the new store file `to`: each
/// task's row (without its lease: no worker holds a task in a new file), the readable prefix of
/// its log, its snapshot when that prefix covers it, and every readable, intact content body.
/// `from` is opened read-only and never written; `to` must not exist, and appears only once it
/// is complete.
pub fn salvage(from: &Path, to: &Path) -> Result<Salvage, OpenError> {
    if to.exists() {
        return Err(OpenError::Exists {
            path: to.to_owned(),
        });
    }
    // A file whose format row is unreadable may still hold readable tasks.
    let (source, _) = read_only(from, true)?;
    let partial = partial_path(to);
    let _ = std::fs::remove_file(&partial);
    let result = copy(&source, &partial).and_then(|salvage| {
        publish(&partial, to)?;
        Ok(salvage)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn copy(source: &Connection, partial: &Path) -> Result<Salvage, OpenError> {
    let mut target = schema::open_file(partial)?.conn;
    let err = |e| sqlite_error(partial, e);
    let mut salvage = Salvage::default();
    let (tasks, lost) = tasks(source);
    salvage.lost_tasks = lost;
    let copied: BTreeSet<i64> = tasks.iter().map(|t| t.no).collect();
    let tx = target.transaction().map_err(err)?;
    let mut wanted = BTreeSet::new();
    for task in &tasks {
        // A parent whose row was lost is dropped from the link; the child's log is intact.
        let parent = task.parent.filter(|p| copied.contains(p));
        tx.execute(
            "INSERT INTO tasks (task_no, id, parent_no, created_ms, epoch) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![task.no, task.id, parent, task.created_ms, task.epoch],
        )
        .map_err(err)?;
        let log = events(source, task.no);
        for event in &log.events[..log.prefix] {
            tx.execute(
                "INSERT INTO events (task_no, seq, extension, kind, data, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![task.no, event.seq, event.extension, event.kind, event.data, event.message],
            )
            .map_err(err)?;
            wanted.extend(event.refs.iter().map(|r| r.sha256.clone()));
        }
        let copied = log.prefix as u64;
        let snapshot: Option<(i64, String, String)> = source
            .query_row(
                "SELECT seq, plugin_set, state FROM snapshots WHERE task_no = ?1",
                [task.no],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .ok()
            .flatten();
        if let Some((seq, plugin_set, state)) = snapshot
            && u64::try_from(seq).is_ok_and(|seq| seq <= copied)
            && serde_json::from_str::<Value>(&state).is_ok()
        {
            tx.execute(
                "INSERT INTO snapshots (task_no, seq, plugin_set, state) VALUES (?1, ?2, ?3, ?4)",
                params![task.no, seq, plugin_set, state],
            )
            .map_err(err)?;
            salvage.snapshots += 1;
        }
        salvage.tasks.push(SalvagedTask {
            id: task.id.clone(),
            copied,
            lost: (!log.problems.is_empty()).then(|| log.problems.join("; ")),
        });
    }
    let (bodies, lost) = bodies(source, &wanted);
    for (sha256, body) in &bodies {
        tx.execute(
            "INSERT INTO content (sha256, len, body) VALUES (?1, ?2, ?3)",
            params![sha256, body.len() as i64, body],
        )
        .map_err(err)?;
    }
    salvage.bodies = bodies.len();
    // A body no copied event refers to is no loss; one that is referred to is, with its cause.
    salvage.lost_bodies = wanted
        .iter()
        .filter(|sha| !bodies.contains_key(*sha))
        .map(|sha| {
            lost.iter()
                .find(|line| line.contains(sha.as_str()))
                .cloned()
                .unwrap_or_else(|| format!("content {sha}: the store holds no copy"))
        })
        .collect();
    tx.commit().map_err(err)?;
    // Fold the write-ahead log into the file, so the one file is the whole copy.
    target
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .map_err(err)?;
    target.close().map_err(|(_, e)| err(e))?;
    Ok(salvage)
}

/// Where a salvage into `to` is written until it is complete.
fn partial_path(to: &Path) -> PathBuf {
    let mut name = to.file_name().unwrap_or_default().to_owned();
    name.push(format!(".salvage-{}", std::process::id()));
    to.with_file_name(name)
}

/// Gives the finished copy its name without replacing a file that appeared meanwhile.
fn publish(partial: &Path, to: &Path) -> Result<(), OpenError> {
    let io = |source: std::io::Error| OpenError::Write {
        path: to.to_owned(),
        source,
    };
    if to.exists() {
        return Err(OpenError::Exists {
            path: to.to_owned(),
        });
    }
    std::fs::hard_link(partial, to).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            OpenError::Exists {
                path: to.to_owned(),
            }
        } else {
            io(e)
        }
    })?;
    std::fs::remove_file(partial).map_err(io)?;
    for suffix in ["-wal", "-shm"] {
        let mut side = partial.as_os_str().to_owned();
        side.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(side));
    }
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    Ok(())
}

/// Every readable task row in creation order, and a line for each row that could not be read.
fn tasks(conn: &Connection) -> (Vec<TaskRow>, Vec<String>) {
    let mut rows = Vec::new();
    let mut lost = Vec::new();
    let read = |row: &rusqlite::Row<'_>| {
        Ok(TaskRow {
            no: row.get(0)?,
            id: row.get(1)?,
            parent: row.get(2)?,
            created_ms: row.get(3)?,
            epoch: row.get(4)?,
        })
    };
    let columns = "SELECT task_no, id, parent_no, created_ms, epoch FROM tasks";
    let mut last = 0;
    let failure = loop {
        let page = conn
            .prepare_cached(&format!(
                "{columns} WHERE task_no > ?1 ORDER BY task_no LIMIT {PAGE}"
            ))
            .and_then(|mut stmt| stmt.query_map([last], read)?.collect::<Result<Vec<_>, _>>());
        match page {
            Ok(page) if page.is_empty() => break None,
            Ok(page) => {
                last = page.last().map_or(last, |t| t.no);
                rows.extend(page);
            }
            Err(e) => break Some(e),
        }
    };
    if let Some(failure) = failure {
        // Past the damage, one key at a time up to the highest key SQLite can still find.
        let end = conn
            .query_row("SELECT max(task_no) FROM tasks", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .ok()
            .flatten();
        let mut unread = Vec::new();
        for no in last + 1..=end.unwrap_or(last) {
            match conn
                .query_row(&format!("{columns} WHERE task_no = ?1"), [no], read)
                .optional()
            {
                Ok(Some(row)) => rows.push(row),
                Ok(None) => {}
                Err(_) => unread.push(no),
            }
        }
        if end.is_none() {
            lost.push(format!(
                "the task list cannot be read past task row {last}: {failure}"
            ));
        } else if !unread.is_empty() {
            lost.push(format!(
                "task row(s) {} cannot be read: {failure}",
                ranges(&unread)
            ));
        }
    }
    rows.retain(|row| match noeta_core::store::TaskId::new(row.id.clone()) {
        Ok(_) => true,
        Err(e) => {
            lost.push(format!("task row {}: {e}", row.no));
            false
        }
    });
    (rows, lost)
}

/// Every readable event of task `no`'s log whose data parses, in order; how many of them form
/// the log's intact prefix (from event 1, with no gap); and what is wrong past it.
fn events(conn: &Connection, no: i64) -> Log {
    type Raw = (i64, String, String, String, Option<String>);
    let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<Raw> {
        Ok((
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
        ))
    };
    let columns = "SELECT seq, extension, kind, data, message FROM events";
    let mut raw: Vec<Raw> = Vec::new();
    let mut unreadable: Vec<i64> = Vec::new();
    let mut failure = None;
    loop {
        let after = raw.last().map_or(0, |r| r.0);
        let mut page = 0;
        let scanned = conn
            .prepare_cached(&format!(
                "{columns} WHERE task_no = ?1 AND seq > ?2 ORDER BY seq LIMIT {PAGE}"
            ))
            .and_then(|mut stmt| {
                // Rows before a damaged one are kept.
                for row in stmt.query_map(params![no, after], read)? {
                    raw.push(row?);
                    page += 1;
                }
                Ok(())
            });
        match scanned {
            Ok(()) if page < PAGE => break,
            Ok(()) => {}
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    if failure.is_some() {
        // Past the damage, one key at a time up to the highest SQLite can still find.
        let after = raw.last().map_or(0, |r| r.0);
        let end = check_len(conn, no).unwrap_or(after + 1).max(after + 1);
        for seq in after + 1..=end {
            match conn
                .query_row(
                    &format!("{columns} WHERE task_no = ?1 AND seq = ?2"),
                    params![no, seq],
                    read,
                )
                .optional()
            {
                Ok(Some(row)) => raw.push(row),
                Ok(None) => {}
                Err(_) => unreadable.push(seq),
            }
        }
    }
    let mut log = Log {
        events: Vec::with_capacity(raw.len()),
        prefix: 0,
        problems: Vec::new(),
    };
    if let (Some(failure), false) = (&failure, unreadable.is_empty()) {
        log.problems.push(format!(
            "event(s) {} cannot be read: {failure}",
            ranges(&unreadable)
        ));
    }
    let mut intact = true;
    let mut expected = 1;
    for (seq, extension, kind, data, message) in raw {
        if seq != expected {
            intact = false;
            let missing: Vec<i64> = (expected..seq)
                .filter(|s| !unreadable.contains(s))
                .collect();
            if !missing.is_empty() {
                log.problems.push(format!(
                    "the log has no event(s) {}: it jumps from event {} to event {seq}",
                    ranges(&missing),
                    expected - 1
                ));
            }
        }
        expected = seq + 1;
        match serde_json::from_str::<Value>(&data) {
            Ok(value) => {
                log.events.push(EventRow {
                    seq,
                    extension,
                    kind,
                    refs: ContentRef::find_in(&value),
                    data,
                    message,
                });
                if intact {
                    log.prefix += 1;
                }
            }
            Err(e) => {
                intact = false;
                log.problems
                    .push(format!("event {seq}'s data is not JSON ({e})"));
            }
        }
    }
    log
}

/// Sorted numbers as `1, 4 to 6, 9`.
fn ranges(numbers: &[i64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            numbers[i].to_string()
        } else {
            format!("{} to {}", numbers[i], numbers[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// The highest sequence number task `no`'s log holds, when SQLite can find it.
fn check_len(conn: &Connection, no: i64) -> Option<i64> {
    conn.query_row(
        "SELECT max(seq) FROM events WHERE task_no = ?1",
        [no],
        |row| row.get::<_, Option<i64>>(0),
    )
    .ok()
    .flatten()
}

/// Snapshots that claim more of a log than it holds, or whose state is not JSON.
fn snapshot_problems(conn: &Connection, heads: &BTreeMap<i64, (&str, Option<i64>)>) -> Vec<String> {
    let mut problems = Vec::new();
    let rows = conn
        .prepare("SELECT task_no, seq, state FROM snapshots ORDER BY task_no")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()
        });
    match rows {
        Ok(rows) => {
            for (no, seq, state) in rows {
                let Some((id, head)) = heads.get(&no) else {
                    continue;
                };
                if head.is_some_and(|head| seq > head) {
                    problems.push(format!(
                        "task `{id}`: its snapshot is at event {seq}, past the end of its log"
                    ));
                }
                if serde_json::from_str::<Value>(&state).is_err() {
                    problems.push(format!("task `{id}`: its snapshot's state is not JSON"));
                }
            }
        }
        Err(e) => problems.push(format!("the snapshots cannot be read: {e}")),
    }
    problems
}

/// Every readable content body whose bytes match its address, looking up each of `wanted` one
/// by one when the scan fails; and a line for each body that is damaged or unreadable.
fn bodies(
    conn: &Connection,
    wanted: &BTreeSet<String>,
) -> (BTreeMap<String, Vec<u8>>, Vec<String>) {
    let mut good = BTreeMap::new();
    let mut problems = Vec::new();
    let mut take = |sha256: String, len: i64, body: Vec<u8>, problems: &mut Vec<String>| {
        let actual = content_ref("", &body);
        if actual.sha256 != sha256 {
            problems.push(format!(
                "content {sha256}: its {} byte(s) hash to {}, not to its address",
                body.len(),
                actual.sha256
            ));
        } else if u64::try_from(len).ok() != Some(actual.len) {
            problems.push(format!(
                "content {sha256}: recorded as {len} byte(s), holds {}",
                actual.len
            ));
        } else {
            good.insert(sha256, body);
        }
    };
    let mut last = String::new();
    let mut failure = None;
    loop {
        let page = conn
            .prepare_cached(&format!(
                "SELECT sha256, len, body FROM content WHERE sha256 > ?1 ORDER BY sha256 LIMIT {PAGE}"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([&last], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, Vec<u8>>(2)?))
                })?
                .collect::<Result<Vec<_>, _>>()
            });
        match page {
            Ok(page) if page.is_empty() => break,
            Ok(page) => {
                for (sha256, len, body) in page {
                    last.clone_from(&sha256);
                    take(sha256, len, body, &mut problems);
                }
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(failure) = failure {
        problems.push(format!(
            "the content table cannot be read in full: {failure}"
        ));
        for sha256 in wanted.iter().filter(|sha| **sha > last) {
            match conn
                .query_row(
                    "SELECT len, body FROM content WHERE sha256 = ?1",
                    [sha256],
                    |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?)),
                )
                .optional()
            {
                Ok(Some((len, body))) => take(sha256.clone(), len, body, &mut problems),
                Ok(None) => {}
                Err(e) => problems.push(format!("content {sha256} cannot be read: {e}")),
            }
        }
    }
    (good, problems)
}

/// Rows that name a task (or parent) the `tasks` table does not hold.
fn foreign_keys(conn: &Connection) -> Vec<String> {
    let rows = conn
        .prepare("PRAGMA foreign_key_check")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<i64>>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()
        });
    match rows {
        Ok(rows) => rows
            .into_iter()
            .map(|(table, rowid, parent)| match rowid {
                Some(rowid) => format!(
                    "a row of `{table}` (row id {rowid}) names a `{parent}` row that does not exist"
                ),
                None => format!("a row of `{table}` names a `{parent}` row that does not exist"),
            })
            .collect(),
        Err(e) => vec![format!("the foreign-key check cannot run: {e}")],
    }
}
