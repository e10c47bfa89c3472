//! The docs name the code as it is: every source path `docs/ARCHITECTURE.md` (and the other
//! docs) names exists, so a file moved without its docs fails here, not in a newcomer's hands.

#[test]
fn every_source_path_the_docs_name_exists() {
    let root = crate::test::repo_path("");
    let crates = root.join("crates");
    // `baton-runner/src/drive.rs`, `baton/src/commands/run.rs`, a directory `…/unit/`.
    let path =
        regex::Regex::new(r"\b(baton(?:-[a-z]+)*/(?:src|tests|benches)/[A-Za-z0-9_./-]*)").unwrap();
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.extend(
        std::fs::read_dir(root.join("docs/guide/src"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    docs.push(root.join("README.md"));
    let mut checked = 0;
    let mut stale = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            for found in path.captures_iter(line) {
                let named = found[1].trim_end_matches(['.', ',']);
                checked += 1;
                if !crates.join(named).exists() {
                    stale.push(format!(
                        "{}:{}: {named}",
                        doc.strip_prefix(&root).unwrap_or(doc).display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "found only {checked} paths: is the pattern right?"
    );
    assert!(
        stale.is_empty(),
        "paths in the docs that do not exist:\n{}",
        stale.join("\n")
    );
}
