//! The guide's links hold. For README.md and every page under docs/: each relative markdown link
//! resolves to a file or folder that exists (relative to the page), each `#anchor` names a heading of
//! its target (GitHub's and mdBook's slug rules), every page is listed in docs/SUMMARY.md and every
//! entry there exists. External http(s) links are not fetched. `mdbook build` in CI checks the book
//! builds; this test gives the same answers in `cargo test`, with the page and line of each failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.md` file under `dir`, sorted, skipping mdBook's default build folder.
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "book")
                && p.parent() == Some(&root().join("docs"))
            {
                continue;
            }
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// The lines of a markdown text that are prose: outside fenced code blocks, with inline code spans
/// removed (a link shown as code is not a link). Each comes with its 1-based line number.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| t.starts_with(m)) {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                still => still,
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        out.push((i + 1, strip_code_spans(line)));
    }
    out
}

/// `line` without its inline code spans (a run of n backticks up to the next run of exactly n).
fn strip_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + n;
        let mut closed = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|&&c| c == '`').count();
                if m == n {
                    closed = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                // Keep the span's text for headings' slugs, minus anything that looks like a link.
                let inner: String = chars[i + n..end - n].iter().collect();
                out.push_str(&inner.replace("](", "] ("));
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// The targets of the inline links and images `[text](target)` and of the reference definitions
/// `[label]: target` on one prose line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(close) = trimmed.find("]:")
        && !trimmed[..close].contains("](")
    {
        if let Some(t) = trimmed[close + 2..].split_whitespace().next() {
            out.push(t.trim_matches(|c| c == '<' || c == '>').to_string());
        }
        return out;
    }
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // The target ends at the ')' that balances the opening one.
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = k;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let inside = after[..end].trim();
        let target = if let Some(angled) = inside.strip_prefix('<') {
            angled.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        out.push(target.to_string());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// A heading's anchor as GitHub and mdBook make it: the heading's text (link targets dropped),
/// lowercased, spaces to '-', every character other than letters, digits, '-' and '_' dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) -> text
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if !after[..close].contains('[') => {
                text.push_str(&after[..close]);
                let tail = &after[close + 2..];
                rest = tail.find(')').map_or("", |p| &tail[p + 1..]);
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors a page offers: its headings' slugs (a repeated one gets -1, -2, ... as on GitHub and
/// in mdBook) and any HTML `id="..."` / `name="..."` on its lines.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let base = slug(t[hashes..].trim().trim_end_matches('#').trim());
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = t;
            while let Some(at) = rest.find(attr) {
                let after = &rest[at + attr.len()..];
                if let Some(end) = after.find('"') {
                    out.insert(after[..end].to_string());
                }
                rest = after;
            }
        }
    }
    out
}

/// `base/rel` with `.` and `..` folded away (no file system access).
fn join_normal(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken relative link and anchor of the page `page`, as "page:line: what".
fn broken_links(page: &Path, shown_as: &str) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let dir = page.parent().unwrap();
    let mut failures = Vec::new();
    for (n, line) in prose_lines(&text) {
        for target in link_targets(&line) {
            if target.is_empty() {
                failures.push(format!("{shown_as}:{n}: an empty link target"));
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                continue; // external: not fetched
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.to_path_buf()
            } else {
                join_normal(dir, path)
            };
            if !file.exists() {
                failures.push(format!("{shown_as}:{n}: `{target}`: {path} does not exist"));
                continue;
            }
            if let Some(anchor) = anchor
                && file.extension().is_some_and(|e| e == "md")
            {
                let target_text = std::fs::read_to_string(&file).unwrap();
                if !anchors(&target_text).contains(anchor) {
                    failures.push(format!(
                        "{shown_as}:{n}: `{target}`: no heading in {} has the anchor #{anchor}",
                        file.strip_prefix(root()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    failures
}

/// The pages SUMMARY.md lists (paths relative to docs/, anchors dropped), in order.
fn summary_entries(summary: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(summary).unwrap();
    prose_lines(&text)
        .iter()
        .flat_map(|(_, l)| link_targets(l))
        .filter(|t| !t.contains("://") && !t.is_empty())
        .map(|t| t.split('#').next().unwrap().to_string())
        .collect()
}

/// The SUMMARY problems of a book whose source folder is `docs`: pages not listed, entries missing.
fn summary_problems(docs: &Path) -> Vec<String> {
    let summary = docs.join("SUMMARY.md");
    if !summary.exists() {
        return vec![format!("{} does not exist", summary.display())];
    }
    let listed: BTreeSet<PathBuf> = summary_entries(&summary)
        .iter()
        .map(|e| join_normal(docs, e))
        .collect();
    let mut problems = Vec::new();
    for entry in &listed {
        if !entry.is_file() {
            problems.push(format!(
                "SUMMARY.md lists {}, which does not exist",
                entry.display()
            ));
        }
    }
    let mut pages = Vec::new();
    markdown_under(docs, &mut pages);
    for page in pages {
        if page != summary && !listed.contains(&page) {
            problems.push(format!(
                "{} is not listed in SUMMARY.md",
                page.strip_prefix(docs).unwrap().display()
            ));
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut pages = vec![root().join("README.md")];
    markdown_under(&root().join("docs"), &mut pages);
    assert!(pages.len() > 15, "{pages:?}");
    let mut failures = Vec::new();
    for page in &pages {
        let shown = page.strip_prefix(root()).unwrap().display().to_string();
        failures.extend(broken_links(page, &shown));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_docs_page_is_in_summary_and_every_entry_exists() {
    let problems = summary_problems(&root().join("docs"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_catch_broken_links_and_unlisted_pages() {
    let dir = std::env::temp_dir().join(format!("fleetsim-guide-check-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("sub/target.md"),
        "# A title: with `code`, punctuation & [a link](x.md)\n\n## Twice\n\n## Twice\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("page.md"),
        "# Page\n\
         Good: [t](sub/target.md), [a](sub/target.md#a-title-with-code-punctuation--a-link),\n\
         [second](sub/target.md#twice-1), [self](#page), [dir](sub/).\n\
         Broken: [gone](missing.md), [anchor](sub/target.md#nope), [own](#nothing-here),\n\
         [twice-2](sub/target.md#twice-2).\n\
         `[not a link](shown-as-code.md)`\n\
         ```\n[in a code block](also-not.md)\n```\n\
         [ref]: sub/gone-too.md\n",
    )
    .unwrap();
    let failures = broken_links(&dir.join("page.md"), "page.md");
    let joined = failures.join("\n");
    assert_eq!(failures.len(), 5, "{joined}");
    for expected in [
        "page.md:4: `missing.md`",
        "page.md:4: `sub/target.md#nope`",
        "page.md:4: `#nothing-here`",
        "page.md:5: `sub/target.md#twice-2`",
        "page.md:10: `sub/gone-too.md`",
    ] {
        assert!(joined.contains(expected), "{expected} not in\n{joined}");
    }

    std::fs::write(
        dir.join("SUMMARY.md"),
        "# Summary\n\n- [Page](page.md)\n- [Gone](gone.md)\n",
    )
    .unwrap();
    let problems = summary_problems(&dir);
    let joined = problems.join("\n");
    assert_eq!(problems.len(), 2, "{joined}");
    assert!(joined.contains("gone.md, which does not exist"), "{joined}");
    assert!(joined.contains("sub/target.md is not listed"), "{joined}");
    let _ = std::fs::remove_dir_all(&dir);
}
