//! Jupyter notebooks as `Read` shows them: each cell's source under a header line, and a code
//! cell's text outputs under `--- output ---`.
//!
//! Only nbformat 4 is rendered. A cell reads `--- cell N (code) ---` (cells counted from 1,
//! `code`, `markdown` or `raw`) followed by its source. A code cell with outputs goes on with
//! `--- output ---` and, in order: `stream` text; the `text/plain` of `execute_result` and
//! `display_data` (each other, non-text form named as `[<mime> output omitted]`, every form
//! named when there is no `text/plain`); `error` as `ename: evalue` (the traceback left out).

use serde_json::Value;

/// Whether `path` names a notebook (`.ipynb`, in any case).
pub(crate) fn is_notebook(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("ipynb"))
}

/// The notebook `text` rendered, or why it is not a notebook this renders.
pub(crate) fn render(text: &str) -> Result<String, String> {
    let notebook: Value =
        serde_json::from_str(text).map_err(|err| format!("it is not valid JSON: {err}"))?;
    match notebook.get("nbformat").and_then(Value::as_u64) {
        Some(4) => {}
        Some(other) => return Err(format!("its nbformat is {other}, not 4")),
        None => return Err("it has no `nbformat` number".to_owned()),
    }
    let cells = notebook
        .get("cells")
        .and_then(Value::as_array)
        .ok_or("it has no `cells` list")?;
    let mut out: Vec<String> = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let n = i + 1;
        let kind = cell
            .get("cell_type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("cell {n} has no `cell_type`"))?;
        let source = cell
            .get("source")
            .map_or(Some(String::new()), multiline)
            .ok_or_else(|| format!("the source of cell {n} is not text"))?;
        out.push(format!("--- cell {n} ({kind}) ---"));
        push_lines(&mut out, &source);
        if kind != "code" {
            continue;
        }
        let outputs = match cell.get("outputs") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(outputs)) => outputs.as_slice(),
            Some(_) => return Err(format!("the outputs of cell {n} are not a list")),
        };
        if outputs.is_empty() {
            continue;
        }
        out.push("--- output ---".to_owned());
        for output in outputs {
            render_output(&mut out, output).map_err(|why| format!("cell {n}: {why}"))?;
        }
    }
    Ok(out.join("\n"))
}

/// One output of a code cell, as lines.
fn render_output(out: &mut Vec<String>, output: &Value) -> Result<(), String> {
    let kind = output
        .get("output_type")
        .and_then(Value::as_str)
        .ok_or("an output has no `output_type`")?;
    match kind {
        "stream" => {
            let text = output
                .get("text")
                .and_then(multiline)
                .ok_or("a stream output has no text")?;
            push_lines(out, &text);
        }
        "execute_result" | "display_data" => {
            let data = output
                .get("data")
                .and_then(Value::as_object)
                .ok_or_else(|| format!("an {kind} output has no `data`"))?;
            let plain = data.get("text/plain").and_then(multiline);
            if let Some(text) = &plain {
                push_lines(out, text);
            }
            for mime in data.keys() {
                let shown_as_plain = plain.is_some() && mime.starts_with("text/");
                if mime != "text/plain" && !shown_as_plain {
                    out.push(format!("[{mime} output omitted]"));
                }
            }
        }
        "error" => {
            let field = |name: &str| output.get(name).and_then(Value::as_str).unwrap_or("");
            out.push(format!("{}: {}", field("ename"), field("evalue")));
        }
        other => out.push(format!("[{other} output omitted]")),
    }
    Ok(())
}

/// nbformat's multiline string: one string, or a list of strings to join.
fn multiline(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => parts.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// `text`'s lines (none for empty text).
fn push_lines(out: &mut Vec<String>, text: &str) {
    out.extend(text.lines().map(str::to_owned));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_without_plain_text_are_all_named_and_unknown_ones_too() {
        let notebook = json!({
            "nbformat": 4,
            "cells": [{
                "cell_type": "code",
                "source": "show()",
                "outputs": [
                    { "output_type": "display_data", "data": { "text/html": "<b>x</b>", "image/png": "AAAA" } },
                    { "output_type": "update_display_data", "data": {} }
                ]
            }]
        });
        assert_eq!(
            render(&notebook.to_string()),
            Ok("--- cell 1 (code) ---\nshow()\n--- output ---\n[image/png output omitted]\n[text/html output omitted]\n[update_display_data output omitted]".to_owned())
        );
    }

    #[test]
    fn malformed_notebooks_say_why() {
        let cases = [
            ("{", "it is not valid JSON: "),
            (
                r#"{"nbformat": 3, "worksheets": []}"#,
                "its nbformat is 3, not 4",
            ),
            (r#"{"cells": []}"#, "it has no `nbformat` number"),
            (r#"{"nbformat": 4}"#, "it has no `cells` list"),
            (
                r#"{"nbformat": 4, "cells": [{}]}"#,
                "cell 1 has no `cell_type`",
            ),
            (
                r#"{"nbformat": 4, "cells": [{"cell_type": "code", "source": 1}]}"#,
                "the source of cell 1 is not text",
            ),
            (
                r#"{"nbformat": 4, "cells": [{"cell_type": "code", "source": "", "outputs": [{}]}]}"#,
                "cell 1: an output has no `output_type`",
            ),
        ];
        for (text, why) in cases {
            let err = render(text).unwrap_err();
            assert!(err.starts_with(why), "{text}: {err}");
        }
        assert!(is_notebook(std::path::Path::new("a/B.IPYNB")));
        assert!(!is_notebook(std::path::Path::new("ipynb")));
    }
}
