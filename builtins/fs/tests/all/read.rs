//! `Read`: the `cat -n` form, offset and limit, every limit and error, the recorded digest.

use futures::executor::block_on;
use noeta_core::canonical::sha256_hex;
use serde_json::{Value, json};

use crate::common::{Ws, call, err, numbered, ok, run, run_in};

#[test]
fn a_file_reads_in_cat_n_form_and_its_digest_is_recorded() {
    let ws = Ws::new();
    ws.put("notes/a.txt", "alpha\nbeta\r\ngamma\n");
    let r = run(&ws, &[call("Read", json!({ "file_path": "notes/a.txt" }))]);
    assert_eq!(r.last(), (numbered(1, &["alpha", "beta", "gamma"]), false));
    let digest = sha256_hex(b"alpha\nbeta\r\ngamma\n");
    assert_eq!(
        r.records("read"),
        [json!({ "path": "notes/a.txt", "digest": digest })]
    );
    assert_eq!(r.state(), json!({ "files": { "notes/a.txt": digest } }));
}

#[test]
fn absolute_and_dotted_paths_inside_the_workspace_resolve_to_one_key() {
    let ws = Ws::new();
    ws.put("a.txt", "x\n");
    let absolute = ws.path("a.txt").to_string_lossy().into_owned();
    let r = run(
        &ws,
        &[
            call("Read", json!({ "file_path": absolute })),
            call("Read", json!({ "file_path": "./sub/../a.txt" })),
        ],
    );
    assert!(r.results().iter().all(|(_, e)| !e));
    let paths: Vec<Value> = r
        .records("read")
        .iter()
        .map(|d| d["path"].clone())
        .collect();
    assert_eq!(paths, [json!("a.txt"), json!("a.txt")]);
}

#[test]
fn offset_and_limit_select_lines() {
    let ws = Ws::new();
    ws.put("a.txt", "1\n2\n3\n4\n5\n");
    let text = ok(
        &ws,
        "Read",
        json!({ "file_path": "a.txt", "offset": 2, "limit": 2 }),
    );
    assert_eq!(text, numbered(2, &["2", "3"]));
    let text = ok(&ws, "Read", json!({ "file_path": "a.txt", "offset": 4 }));
    assert_eq!(text, numbered(4, &["4", "5"]));
}

#[test]
fn without_a_limit_2000_lines_are_read_with_a_note() {
    let ws = Ws::new();
    let body: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    ws.put("long.txt", &body);
    let text = ok(&ws, "Read", json!({ "file_path": "long.txt" }));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1999], "  2000\tline 2000");
    assert_eq!(
        lines.last().copied(),
        Some("(showing lines 1–2000 of 2500; use offset and limit to read more)")
    );
    assert_eq!(lines.len(), 2002);
}

#[test]
fn long_lines_are_clipped() {
    let ws = Ws::new();
    ws.put("wide.txt", format!("{}\nshort\n", "é".repeat(2500)));
    let text = ok(&ws, "Read", json!({ "file_path": "wide.txt" }));
    let first = format!("{} … [line truncated]", "é".repeat(2000));
    assert_eq!(text, numbered(1, &[&first, "short"]));
}

#[test]
fn a_file_over_256_kib_needs_a_limit() {
    let ws = Ws::new();
    let body: String = (0..30_000).map(|i| format!("row {i:05}\n")).collect();
    assert!(body.len() > 262_144);
    ws.put("big.txt", &body);
    let text = err(&ws, "Read", json!({ "file_path": "big.txt" }));
    assert_eq!(
        text,
        format!(
            "Read: `big.txt` is {} bytes, more than the 262144 bytes (256 KiB) read at once; use offset and limit to read part of it",
            body.len()
        )
    );
    let text = ok(
        &ws,
        "Read",
        json!({ "file_path": "big.txt", "offset": 3, "limit": 1 }),
    );
    assert_eq!(text, numbered(3, &["row 00002"]));
}

#[test]
fn a_part_of_a_large_file_is_streamed_with_the_whole_files_digest() {
    let ws = Ws::new();
    // 4 MiB: read in parts without loading it; the digest still covers every byte.
    let body: String = (0..200_000)
        .map(|i| format!("entry {i:07} {}\r\n", "-".repeat(8)))
        .collect();
    ws.put("huge.log", &body);
    let run = run(
        &ws,
        &[
            call(
                "Read",
                json!({ "file_path": "huge.log", "offset": 150_000, "limit": 2 }),
            ),
            call(
                "Read",
                json!({ "file_path": "huge.log", "offset": 300_000, "limit": 2 }),
            ),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[0].0,
        numbered(
            150_000,
            &["entry 0149999 --------", "entry 0150000 --------"]
        )
    );
    assert_eq!(
        results[1].0,
        "(offset 300000 is past the end of `huge.log`, which has 200000 lines)"
    );
    let digests: Vec<Value> = run
        .records("read")
        .iter()
        .map(|r| r["digest"].clone())
        .collect();
    assert_eq!(
        digests,
        [
            json!(sha256_hex(body.as_bytes())),
            json!(sha256_hex(body.as_bytes()))
        ]
    );

    // A NUL in the range asked for is not text; elsewhere it is only hashed.
    let mut bytes = body.into_bytes();
    bytes[10] = 0;
    std::fs::write(ws.path("huge.log"), &bytes).unwrap();
    assert_eq!(
        err(
            &ws,
            "Read",
            json!({ "file_path": "huge.log", "offset": 1, "limit": 1 })
        ),
        "Read: `huge.log` is not utf-8 text (binary files other than images, and PDFs, are not supported)"
    );
    assert_eq!(
        ok(
            &ws,
            "Read",
            json!({ "file_path": "huge.log", "offset": 2, "limit": 1 })
        ),
        numbered(2, &["entry 0000001 --------"])
    );
}

#[test]
fn a_read_over_25000_tokens_is_refused() {
    let ws = Ws::new();
    let body: String = (0..1500)
        .map(|_| format!("{}\n", "y".repeat(100)))
        .collect();
    ws.put("dense.txt", &body);
    let text = err(
        &ws,
        "Read",
        json!({ "file_path": "dense.txt", "limit": 1500 }),
    );
    assert!(
        text.starts_with("Read: lines 1–1500 of `dense.txt` come to about "),
        "{text}"
    );
    assert!(
        text.ends_with(
            "tokens, more than the 25000 read at once; read fewer lines with offset and limit"
        ),
        "{text}"
    );
}

#[test]
fn an_empty_file_and_an_offset_past_the_end_give_notes_and_still_record() {
    let ws = Ws::new();
    ws.put("empty.txt", "");
    ws.put("two.txt", "a\nb\n");
    let r = run(
        &ws,
        &[
            call("Read", json!({ "file_path": "empty.txt" })),
            call("Read", json!({ "file_path": "two.txt", "offset": 5 })),
        ],
    );
    assert_eq!(
        r.results(),
        [
            ("(the file `empty.txt` is empty)".to_owned(), false),
            (
                "(offset 5 is past the end of `two.txt`, which has 2 lines)".to_owned(),
                false
            ),
        ]
    );
    assert_eq!(r.records("read").len(), 2);
}

#[test]
fn binary_and_non_utf8_files_are_not_text() {
    let ws = Ws::new();
    ws.put("bin.dat", b"abc\0def");
    ws.put("latin1.txt", b"caf\xe9\n");
    for name in ["bin.dat", "latin1.txt"] {
        let r = run(&ws, &[call("Read", json!({ "file_path": name }))]);
        assert_eq!(
            r.last(),
            (
                format!(
                    "Read: `{name}` is not utf-8 text (binary files other than images, and PDFs, are not supported)"
                ),
                true
            )
        );
        assert!(r.records("read").is_empty());
    }
}

#[test]
fn missing_files_and_directories_are_errors() {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("dir")).unwrap();
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": "nope.txt" })),
        "Read: file `nope.txt` does not exist"
    );
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": "dir" })),
        "Read: `dir` is a directory, not a file; use Glob to list its files"
    );
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": " " })),
        "Read: the path is empty"
    );
}

#[test]
fn a_named_pipe_is_refused_at_once_by_every_file_tool() {
    let ws = Ws::new();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path("pipe"))
        .status()
        .expect("mkfifo (coreutils) is needed to make a named pipe");
    assert!(made.success());
    // Opening a pipe no one writes to would block forever: each tool must refuse it first.
    let started = std::time::Instant::now();
    for (tool, input) in [
        ("Read", json!({ "file_path": "pipe" })),
        ("Read", json!({ "file_path": "pipe", "limit": 5 })),
        ("Grep", json!({ "pattern": "x", "path": "pipe" })),
        (
            "Edit",
            json!({ "file_path": "pipe", "old_string": "a", "new_string": "b" }),
        ),
        ("Write", json!({ "file_path": "pipe", "content": "x" })),
    ] {
        let message = err(&ws, tool, input);
        assert_eq!(
            message,
            format!(
                "{tool}: `pipe` is a named pipe, not a regular file; the file tools read and write regular files only"
            )
        );
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn paths_outside_the_workspace_are_refused() {
    let ws = Ws::new();
    let root = ws.root().display().to_string();
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": "../outside.txt" })),
        format!("Read: `../outside.txt` is outside the workspace `{root}`")
    );
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": "/etc/hostname" })),
        format!("Read: `/etc/hostname` is outside the workspace `{root}`")
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_leading_out_of_the_workspace_is_refused() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path("link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("linkdir")).unwrap();
    let real = std::fs::canonicalize(outside.path()).unwrap();
    let text = err(&ws, "Read", json!({ "file_path": "link.txt" }));
    assert_eq!(
        text,
        format!(
            "Read: `link.txt` leads through a symlink to `{}`, outside the workspace `{}`",
            real.join("secret.txt").display(),
            ws.root().display()
        )
    );
    let text = err(&ws, "Read", json!({ "file_path": "linkdir/secret.txt" }));
    assert!(text.contains("leads through a symlink"), "{text}");
    // A symlink that stays inside is followed.
    ws.put("real.txt", "inside\n");
    std::os::unix::fs::symlink(ws.path("real.txt"), ws.path("alias.txt")).unwrap();
    assert_eq!(
        ok(&ws, "Read", json!({ "file_path": "alias.txt" })),
        numbered(1, &["inside"])
    );
}

#[test]
fn input_outside_the_schema_is_an_error_for_the_model() {
    let ws = Ws::new();
    ws.put("a.txt", "a\n");
    let text = err(&ws, "Read", json!({ "file_path": "a.txt", "offset": 0 }));
    assert!(text.starts_with("Read: "), "{text}");
    let text = err(&ws, "Read", json!({ "file_path": "a.txt", "pages": "1" }));
    assert!(text.starts_with("Read: "), "{text}");
}

#[test]
fn without_an_execution_environment_there_is_no_workspace() {
    let r = run_in(
        None,
        Value::Null,
        &[call("Read", json!({ "file_path": "a.txt" }))],
    );
    let (text, is_error) = r.last();
    assert!(is_error);
    assert!(
        text.contains("Read: no workspace is available to this tool here"),
        "{text}"
    );
}

/// An nbformat 4 notebook with every kind of cell and output.
fn notebook() -> Value {
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": { "kernelspec": { "name": "python3" } },
        "cells": [
            { "cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "Some *notes*."] },
            {
                "cell_type": "code",
                "execution_count": 1,
                "metadata": {},
                "source": "import sys\nprint('hi')\nprint('oops', file=sys.stderr)",
                "outputs": [
                    { "output_type": "stream", "name": "stdout", "text": ["hi\n"] },
                    { "output_type": "stream", "name": "stderr", "text": "oops\n" }
                ]
            },
            {
                "cell_type": "code",
                "execution_count": 2,
                "metadata": {},
                "source": ["df.head()"],
                "outputs": [{
                    "output_type": "execute_result",
                    "execution_count": 2,
                    "metadata": {},
                    "data": { "text/plain": ["   a\n", "0  1"], "text/html": "<table></table>" }
                }]
            },
            {
                "cell_type": "code",
                "execution_count": 3,
                "metadata": {},
                "source": "plot()",
                "outputs": [{
                    "output_type": "display_data",
                    "metadata": {},
                    "data": { "image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 640x480 with 1 Axes>" }
                }]
            },
            {
                "cell_type": "code",
                "execution_count": 4,
                "metadata": {},
                "source": "1 / 0",
                "outputs": [{
                    "output_type": "error",
                    "ename": "ZeroDivisionError",
                    "evalue": "division by zero",
                    "traceback": ["\u{1b}[0;31mTraceback\u{1b}[0m"]
                }]
            },
            { "cell_type": "code", "execution_count": null, "metadata": {}, "source": "", "outputs": [] },
            { "cell_type": "raw", "metadata": {}, "source": "raw text" }
        ]
    })
}

/// The lines `Read` shows for [`notebook`].
const RENDERED: [&str; 23] = [
    "--- cell 1 (markdown) ---",
    "# Title",
    "Some *notes*.",
    "--- cell 2 (code) ---",
    "import sys",
    "print('hi')",
    "print('oops', file=sys.stderr)",
    "--- output ---",
    "hi",
    "oops",
    "--- cell 3 (code) ---",
    "df.head()",
    "--- output ---",
    "   a",
    "0  1",
    "--- cell 4 (code) ---",
    "plot()",
    "--- output ---",
    "<Figure size 640x480 with 1 Axes>",
    "[image/png output omitted]",
    "--- cell 5 (code) ---",
    "1 / 0",
    "--- output ---",
];

#[test]
fn a_notebook_is_rendered_cell_by_cell_and_its_bytes_digest_is_recorded() {
    let ws = Ws::new();
    let body = serde_json::to_string_pretty(&notebook()).unwrap();
    ws.put("nb/analysis.ipynb", &body);
    let r = run(
        &ws,
        &[call("Read", json!({ "file_path": "nb/analysis.ipynb" }))],
    );
    let mut lines = RENDERED.to_vec();
    lines.extend([
        "ZeroDivisionError: division by zero",
        "--- cell 6 (code) ---",
        "--- cell 7 (raw) ---",
        "raw text",
    ]);
    assert_eq!(r.last(), (numbered(1, &lines), false));
    assert_eq!(
        r.records("read"),
        [json!({ "path": "nb/analysis.ipynb", "digest": sha256_hex(body.as_bytes()) })]
    );
}

#[test]
fn offset_and_limit_count_a_notebooks_rendered_lines() {
    let ws = Ws::new();
    ws.put("a.ipynb", notebook().to_string());
    assert_eq!(
        ok(
            &ws,
            "Read",
            json!({ "file_path": "a.ipynb", "offset": 11, "limit": 5 })
        ),
        numbered(11, &RENDERED[10..15])
    );
    assert_eq!(
        ok(&ws, "Read", json!({ "file_path": "a.ipynb", "offset": 30 })),
        "(offset 30 is past the end of `a.ipynb`, which has 27 lines)"
    );
    ws.put(
        "empty.ipynb",
        r#"{"nbformat": 4, "nbformat_minor": 5, "cells": []}"#,
    );
    assert_eq!(
        ok(&ws, "Read", json!({ "file_path": "empty.ipynb" })),
        "(the notebook `empty.ipynb` has no cells)"
    );
}

#[test]
fn a_notebook_read_first_can_be_edited_as_its_json() {
    let ws = Ws::new();
    let body = serde_json::to_string_pretty(&notebook()).unwrap();
    ws.put("a.ipynb", &body);
    let r = run_in(
        Some(&ws),
        json!({ "write_mode": "apply" }),
        &[
            call("Read", json!({ "file_path": "a.ipynb" })),
            call(
                "Edit",
                json!({ "file_path": "a.ipynb", "old_string": "plot()", "new_string": "plot(df)" }),
            ),
            call(
                "Read",
                json!({ "file_path": "a.ipynb", "offset": 17, "limit": 1 }),
            ),
        ],
    );
    let results = r.results();
    assert!(results.iter().all(|(_, e)| !e), "{results:?}");
    assert_eq!(results[2].0, numbered(17, &["plot(df)"]));
    assert_eq!(ws.get("a.ipynb"), body.replace("plot()", "plot(df)"));
}

#[test]
fn an_invalid_notebook_is_shown_as_raw_text_with_a_note() {
    let ws = Ws::new();
    ws.put("broken.ipynb", "{\"cells\": [\n");
    ws.put("old.ipynb", "{\"nbformat\": 3, \"worksheets\": []}\n");
    let r = run(
        &ws,
        &[
            call("Read", json!({ "file_path": "broken.ipynb" })),
            call("Read", json!({ "file_path": "old.ipynb" })),
        ],
    );
    let results = r.results();
    let (broken, is_error) = &results[0];
    assert!(!is_error);
    let raw = numbered(1, &["{\"cells\": ["]);
    assert!(
        broken.starts_with(&format!(
            "{raw}\n\n(`broken.ipynb` is shown as raw text: it is not an nbformat 4 notebook, since it is not valid JSON: "
        )),
        "{broken}"
    );
    assert_eq!(
        results[1],
        (
            format!(
                "{}\n\n(`old.ipynb` is shown as raw text: it is not an nbformat 4 notebook, since its nbformat is 3, not 4)",
                numbered(1, &["{\"nbformat\": 3, \"worksheets\": []}"])
            ),
            false
        )
    );
    assert_eq!(r.records("read").len(), 2);
}

#[test]
fn a_notebooks_size_limit_counts_what_is_shown_not_its_images() {
    let ws = Ws::new();
    let image = "A".repeat(400_000);
    let pictured = json!({
        "nbformat": 4,
        "cells": [{
            "cell_type": "code",
            "source": "plot()",
            "outputs": [{ "output_type": "display_data", "data": { "image/png": image } }]
        }]
    });
    ws.put("pictured.ipynb", pictured.to_string());
    assert_eq!(
        ok(&ws, "Read", json!({ "file_path": "pictured.ipynb" })),
        numbered(
            1,
            &[
                "--- cell 1 (code) ---",
                "plot()",
                "--- output ---",
                "[image/png output omitted]"
            ]
        )
    );
    let long: String = (0..30_000).map(|i| format!("row {i:05}\n")).collect();
    let wordy = json!({
        "nbformat": 4,
        "cells": [{ "cell_type": "markdown", "source": long }]
    });
    ws.put("wordy.ipynb", wordy.to_string());
    let shown = long.len() + "--- cell 1 (markdown) ---\n".len() - 1;
    assert_eq!(
        err(&ws, "Read", json!({ "file_path": "wordy.ipynb" })),
        format!(
            "Read: the notebook `wordy.ipynb` comes to {shown} bytes as shown, more than the 262144 bytes (256 KiB) read at once; use offset and limit to read part of it"
        )
    );
    assert_eq!(
        ok(
            &ws,
            "Read",
            json!({ "file_path": "wordy.ipynb", "offset": 2, "limit": 1 })
        ),
        numbered(2, &["row 00000"])
    );
}

#[test]
fn an_image_is_shown_as_itself_kept_in_the_content_store_and_may_then_be_overwritten() {
    let ws = Ws::new();
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0, 0, 0, 13, 1, 2, 3]].concat();
    ws.put("shot.png", &png);
    let jpeg = [0xff, 0xd8, 0xff, 0xe0, 9, 9];
    ws.put("photo.jpg", jpeg);
    let r = run(
        &ws,
        &[
            call("Read", json!({ "file_path": "shot.png" })),
            call("Read", json!({ "file_path": "photo.jpg" })),
        ],
    );
    let state = block_on(r.rt.load(&r.session, &r.task)).unwrap();
    let results: Vec<&noeta_core::model::Message> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == noeta_core::model::Role::Tool)
        .collect();
    assert_eq!(
        results[0].text,
        "Image file `shot.png` (image/png, 15 bytes)."
    );
    assert!(!results[0].is_error);
    let image = &results[0].attachments[0];
    assert_eq!(image.media_type, "image/png");
    assert_eq!(block_on(r.rt.content().get(image)).unwrap(), png);
    assert_eq!(results[1].attachments[0].media_type, "image/jpeg");
    assert_eq!(
        r.records("read").len(),
        2,
        "the digest is kept, so Write may replace it"
    );
}

#[test]
fn an_image_over_five_mib_is_refused_naming_its_size() {
    let ws = Ws::new();
    let mut big = b"GIF89a".to_vec();
    big.resize(5 * 1024 * 1024 + 1, 0);
    ws.put("huge.gif", &big);
    let r = run(&ws, &[call("Read", json!({ "file_path": "huge.gif" }))]);
    assert_eq!(
        r.last(),
        (
            "Read: the image `huge.gif` is 5242881 bytes, more than the 5242880 bytes (5 MiB) shown"
                .to_owned(),
            true
        )
    );
}

/// A PDF of `count` pages, page N saying `Page N says hello`.
fn pdf(count: u32) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut kids: Vec<Object> = Vec::new();
    for n in 1..=count {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![100.into(), 600.into()]),
                Operation::new(
                    "Tj",
                    vec![Object::string_literal(format!("Page {n} says hello"))],
                ),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => i64::from(count),
            "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

#[test]
fn a_pdf_is_read_as_the_text_of_its_pages() {
    let ws = Ws::new();
    ws.put("short.pdf", pdf(2));
    ws.put("long.pdf", pdf(12));
    let shown = ok(&ws, "Read", json!({ "file_path": "short.pdf" }));
    assert!(
        shown.starts_with("--- page 1 of 2 ---\nPage 1 says hello"),
        "{shown}"
    );
    assert!(
        shown.contains("--- page 2 of 2 ---\nPage 2 says hello"),
        "{shown}"
    );
    let picked = ok(
        &ws,
        "Read",
        json!({ "file_path": "long.pdf", "pages": "3, 11-12" }),
    );
    let headers: Vec<&str> = picked
        .lines()
        .filter(|l| l.starts_with("--- page"))
        .collect();
    assert_eq!(
        headers,
        [
            "--- page 3 of 12 ---",
            "--- page 11 of 12 ---",
            "--- page 12 of 12 ---"
        ]
    );
    let r = run(&ws, &[call("Read", json!({ "file_path": "short.pdf" }))]);
    assert_eq!(r.records("read").len(), 1, "the digest is kept");
}

#[test]
fn pdf_reads_name_what_is_wrong() {
    let ws = Ws::new();
    ws.put("long.pdf", pdf(12));
    ws.put("notes.txt", "a\n");
    ws.put("broken.pdf", b"%PDF-1.5\nnot really\n");
    for (input, message) in [
        (
            json!({ "file_path": "long.pdf" }),
            "Read: the PDF `long.pdf` has 12 pages, more than the 10 read without `pages`; give `pages`, such as \"1-20\"",
        ),
        (
            json!({ "file_path": "long.pdf", "pages": "13" }),
            "Read: `pages` `13`: page 13 is past the end (the PDF has 12 pages)",
        ),
        (
            json!({ "file_path": "long.pdf", "pages": "2-x" }),
            "Read: `pages` `2-x`: `2-x` is not a page or a range such as 3 or 1-5",
        ),
        (
            json!({ "file_path": "long.pdf", "pages": "0" }),
            "Read: `pages` `0`: `0` is not a page or a range such as 3 or 1-5",
        ),
        (
            json!({ "file_path": "long.pdf", "offset": 2 }),
            "Read: `long.pdf` is a PDF: choose what to read with `pages`, not offset and limit",
        ),
        (
            json!({ "file_path": "notes.txt", "pages": "1" }),
            "Read: `pages` is for PDF files, and `notes.txt` is not one; use offset and limit",
        ),
    ] {
        assert_eq!(err(&ws, "Read", input), message);
    }
    assert!(
        err(&ws, "Read", json!({ "file_path": "broken.pdf" }))
            .starts_with("Read: cannot read the PDF `broken.pdf`: "),
    );
    ws.put("big.pdf", pdf(25));
    assert_eq!(
        err(
            &ws,
            "Read",
            json!({ "file_path": "big.pdf", "pages": "1-21" })
        ),
        "Read: `pages` `1-21` names more than 20 pages; read at most 20 at a time"
    );
}
