//! Did-you-mean: the known name nearest to a misspelt one.

/// The name in `known` nearest to `name` by edit distance, when it is near enough to be a typo.
pub(crate) fn closest<'a>(
    name: &str,
    known: &'a std::collections::BTreeSet<String>,
) -> Option<&'a str> {
    let distance = |a: &str, b: &str| {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut last = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let next = (row[j + 1] + 1)
                    .min(row[j] + 1)
                    .min(last + usize::from(ca != *cb));
                last = row[j + 1];
                row[j + 1] = next;
            }
        }
        row[b.len()]
    };
    known
        .iter()
        .map(|k| (distance(name, k), k.as_str()))
        .filter(|(d, k)| *d <= 2.max(k.chars().count() / 4))
        .min()
        .map(|(_, k)| k)
}
