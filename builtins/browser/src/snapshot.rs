//! A page snapshot as the model reads it, and the page state a task records.

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What `page.js` returns.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) url: String,
    pub(crate) title: String,
    pub(crate) text: String,
    /// The numbered elements, each as the text shows it.
    pub(crate) elements: Vec<String>,
}

impl Snapshot {
    /// The snapshot as the model reads it.
    pub(crate) fn render(&self) -> String {
        let title = if self.title.is_empty() {
            "(no title)"
        } else {
            &self.title
        };
        let count = self.elements.len();
        let elements = match count {
            0 => "no interactive elements".to_owned(),
            1 => "1 interactive element, numbered [1] below (use the number with browser_click \
                  and browser_type)"
                .to_owned(),
            n => format!(
                "{n} interactive elements, numbered [1] to [{n}] below (use the numbers with \
                 browser_click and browser_type)"
            ),
        };
        let body = if self.text.is_empty() {
            "(the page shows no text)"
        } else {
            &self.text
        };
        format!("Page: {title}\nURL: {}\n{elements}\n\n{body}", self.url)
    }

    /// The hash of the numbered element map (which numbers mean which elements).
    pub(crate) fn elements_hash(&self) -> String {
        let mut hasher = Sha256::new();
        for element in &self.elements {
            hasher.update(element.as_bytes());
            hasher.update(b"\n");
        }
        let digest = hasher.finalize();
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    /// The `page` record: where the task's browser is.
    pub(crate) fn record(&self) -> Value {
        json!({
            "url": self.url,
            "title": self.title,
            "elements": self.elements.len(),
            "elements_hash": self.elements_hash(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(elements: &[&str]) -> Snapshot {
        Snapshot {
            url: "http://127.0.0.1/".to_owned(),
            title: "Home".to_owned(),
            text: "# Welcome\n[1] link \"About\" -> /about".to_owned(),
            elements: elements.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    #[test]
    fn the_snapshot_names_the_page_and_counts_its_elements() {
        let text = page(&["[1] link \"About\" -> /about"]).render();
        assert!(text.starts_with("Page: Home\nURL: http://127.0.0.1/\n1 interactive element"));
        assert!(text.ends_with("# Welcome\n[1] link \"About\" -> /about"));
        assert!(page(&[]).render().contains("no interactive elements"));
    }

    #[test]
    fn the_hash_follows_the_element_map() {
        let one = page(&["[1] link \"About\" -> /about"]);
        let two = page(&["[1] button \"About\""]);
        assert_eq!(one.elements_hash().len(), 16);
        assert_ne!(one.elements_hash(), two.elements_hash());
        assert_eq!(one.record()["elements"], 1);
    }
}
