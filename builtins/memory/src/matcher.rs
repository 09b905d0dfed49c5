//! The lexical matcher behind `memory_search` and recall: case-insensitive terms scored over a
//! memory's name, description, keywords and body; and the similarity of two short texts.

use crate::frontmatter::clip;
use crate::store::Memory;

/// Words too common to say anything about a memory.
const STOPWORDS: [&str; 48] = [
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "but", "by",
    "can", "do", "for", "from", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its",
    "me", "my", "no", "not", "of", "on", "or", "our", "so", "that", "the", "this", "to", "was",
    "we", "what", "when", "with", "you", "your",
];

/// The most terms one query is matched by (a long message keeps its first ones).
const MAX_TERMS: usize = 32;

/// What each field a term is found in adds to a memory's score.
const NAME_WEIGHT: u32 = 4;
const KEYWORDS_WEIGHT: u32 = 3;
const DESCRIPTION_WEIGHT: u32 = 2;
const BODY_WEIGHT: u32 = 1;

/// The query's terms: its words, lowercased, each once, in order, without stopwords and
/// one-letter words (a query made only of those keeps them).
pub(crate) fn terms(query: &str) -> Vec<String> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept = dedup(
        words
            .iter()
            .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str())),
    );
    if kept.is_empty() {
        kept = dedup(words.iter());
    }
    kept.truncate(MAX_TERMS);
    kept
}

/// Terms for recall: like [`terms`], but a message of stopwords only has none.
pub(crate) fn recall_terms(message: &str) -> Vec<String> {
    let mut kept: Vec<String> = dedup(
        message
            .split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str())),
    );
    kept.truncate(MAX_TERMS);
    kept
}

fn dedup<S: AsRef<str>>(words: impl Iterator<Item = S>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in words {
        let word = word.as_ref();
        if !out.iter().any(|w| w == word) {
            out.push(word.to_owned());
        }
    }
    out
}

/// One memory a query matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The memory's name.
    pub(crate) name: String,
    /// Its description, on one line.
    pub(crate) description: String,
    /// Its score: the higher, the better it matches.
    pub(crate) score: u32,
    /// Body lines holding a term: `(line of the file, text)`, in file order.
    pub(crate) lines: Vec<(usize, String)>,
}

/// Scores one memory; `None` when no term is found in it.
fn score(memory: &Memory, terms: &[String]) -> Option<Hit> {
    let doc = memory.doc.as_ref();
    let name = memory.name.to_lowercase();
    let description = doc.map(|d| d.description()).unwrap_or_default();
    let description_lower = description.to_lowercase();
    let keywords = doc.map(|d| d.keywords().to_lowercase()).unwrap_or_default();
    let body = doc.map(|d| d.body.to_lowercase()).unwrap_or_default();
    let mut total = 0;
    for term in terms {
        let t = term.as_str();
        for (field, weight) in [
            (&name, NAME_WEIGHT),
            (&keywords, KEYWORDS_WEIGHT),
            (&description_lower, DESCRIPTION_WEIGHT),
            (&body, BODY_WEIGHT),
        ] {
            if field.contains(t) {
                total += weight;
            }
        }
    }
    if total == 0 {
        return None;
    }
    let lines = doc
        .map(|d| {
            d.body
                .lines()
                .enumerate()
                .filter(|(_, line)| {
                    let lower = line.to_lowercase();
                    terms.iter().any(|t| lower.contains(t.as_str()))
                })
                .map(|(i, line)| (d.body_line + i, line.trim().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Some(Hit {
        name: memory.name.clone(),
        description,
        score: total,
        lines,
    })
}

/// Every memory a term is found in, best first: by score, then by name.
pub(crate) fn rank(memories: &[Memory], terms: &[String]) -> Vec<Hit> {
    let mut hits: Vec<Hit> = memories.iter().filter_map(|m| score(m, terms)).collect();
    hits.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
    hits
}

/// A line as a result shows it: at most `max` characters.
pub(crate) fn shown_line(line: &str, max: usize) -> String {
    clip(line, max)
}

/// How alike two short texts are, from 0 (nothing alike) to 1 (the same once case and
/// punctuation are ignored): one minus their edit distance over the longer length.
pub(crate) fn similarity(a: &str, b: &str) -> f64 {
    let a = normalize(a);
    let b = normalize(b);
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let longest = a.len().max(b.len());
    let distance = levenshtein(&a, &b);
    1.0 - distance as f64 / longest as f64
}

/// Lowercased characters, punctuation and spacing runs folded to one space.
fn normalize(text: &str) -> Vec<char> {
    let mut out: Vec<char> = Vec::new();
    for c in text.chars().take(400) {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if out.last().is_some_and(|last| *last != ' ') {
            out.push(' ');
        }
    }
    while out.last() == Some(&' ') {
        out.pop();
    }
    out
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stopwords_unless_nothing_else_is_left() {
        assert_eq!(terms("How do I deploy the API?"), ["deploy", "api"]);
        assert_eq!(terms("the"), ["the"]);
        assert!(recall_terms("the and of").is_empty());
        assert_eq!(terms("Deploy deploy DEPLOY"), ["deploy"]);
    }

    #[test]
    fn similarity_ignores_case_and_punctuation() {
        assert!((similarity("Deploy-Notes", "deploy notes") - 1.0).abs() < f64::EPSILON);
        assert!(similarity("deploy-notes", "deploy-note") > 0.9);
        assert!(similarity("deploy", "kitchen") < 0.3);
        assert!(similarity("", "x") < f64::EPSILON);
    }
}
