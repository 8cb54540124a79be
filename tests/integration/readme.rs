//! Every command in the code blocks of the README and of the guide's walkthrough pages runs: concrete
//! command lines are executed (with the arrival window shortened where a full run would take minutes in a
//! debug build, and outputs redirected to a scratch directory), and every option of the synopsis lines
//! exists in that command's `--help`. Blocks marked `text` are output, not commands.

use std::path::Path;
use std::process::Command;

/// The pages whose commands run: the README and the guide's walkthroughs, which a newcomer follows
/// command by command.
const PAGES: [&str; 5] = [
    "README.md",
    "docs/getting-started.md",
    "docs/jobs/compare.md",
    "docs/jobs/size.md",
    "docs/jobs/incident.md",
];

fn page_commands(page: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).unwrap();
    let mut out = Vec::new();
    let mut fenced = false;
    let mut output_block = false;
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fenced = !fenced;
            output_block = fenced && info.trim() == "text";
            continue;
        }
        if !fenced || output_block {
            continue;
        }
        let line = line.trim().trim_start_matches("$ ");
        let line = line.split("  #").next().unwrap().trim();
        if let Some(rest) = line.strip_prefix("cargo run --release -- ") {
            out.push(format!("fleetsim {rest}"));
        } else if line.starts_with("fleetsim ") {
            out.push(line.to_string());
        }
    }
    out
}

/// A synopsis line names placeholders (`SCENARIO`, `[--out DIR]`) rather than values.
fn is_synopsis(line: &str) -> bool {
    line.contains('[')
        || line.split_whitespace().any(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c == '.' || c == '_')
        })
}

fn fleetsim(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetsim"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn every_command_of_the_readme_and_the_walkthroughs_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = std::env::temp_dir().join(format!("fleetsim-readme-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut commands = Vec::new();
    for page in PAGES {
        let found = page_commands(page);
        assert!(!found.is_empty(), "{page} has no fleetsim command");
        commands.extend(found.into_iter().map(|c| (page, c)));
    }
    assert!(commands.len() >= 10, "{commands:?}");
    let mut failures = Vec::new();
    for (page, line) in &commands {
        let line = line.as_str();
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        if is_synopsis(line) {
            // The command exists and takes every option the synopsis names.
            let sub: Vec<&str> = words
                .iter()
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
                .copied()
                .collect();
            let mut help_args = sub.clone();
            help_args.push("--help");
            let (ok, help) = fleetsim(&help_args, root);
            if !ok {
                failures.push(format!(
                    "{page}: {line}: `fleetsim {}` failed\n{help}",
                    help_args.join(" ")
                ));
                continue;
            }
            for w in &words {
                let w = w.trim_matches(|c| c == '[' || c == ']' || c == '|');
                if let Some(flag) = w.strip_prefix("--") {
                    let flag = flag.split('=').next().unwrap();
                    if !help.contains(&format!("--{flag}")) {
                        failures.push(format!(
                            "{page}: {line}: `--{flag}` is not an option of `{}`",
                            sub.join(" ")
                        ));
                    }
                }
            }
            continue;
        }
        // A concrete command: run it, shortened, outputs into the scratch directory.
        let mut args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        if matches!(args[0].as_str(), "run" | "compare" | "sweep" | "size") {
            // A full window takes minutes in a debug build; 20 s of arrivals exercise the same code.
            args.extend(["--set".into(), "duration=\"20s\"".into()]);
        }
        if args[0] == "run" {
            args.push("--quiet".into());
        }
        // Each page's outputs in a folder of their own: pages name the same folders (the README's
        // commands are the walkthroughs' first steps), and fleetsim refuses to overwrite a results folder.
        let page_scratch = scratch.join(page.replace('/', "_"));
        for i in 0..args.len() {
            if matches!(args[i].as_str(), "--out" | "-o") && i + 1 < args.len() {
                args[i + 1] = page_scratch.join(&args[i + 1]).display().to_string();
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, text) = fleetsim(&refs, root);
        if !ok {
            failures.push(format!("{page}: {line}: failed\n{text}"));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn help_names_only_commands_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (ok, help) = fleetsim(&["--help"], root);
    assert!(ok);
    for built in ["sweep", "merge", "size"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(built)),
            "--help does not list `{built}`:\n{help}"
        );
    }
    // Every command --help lists runs its own --help.
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "{commands:?}");
    for c in commands {
        let (ok, text) = fleetsim(&[c, "--help"], root);
        assert!(ok, "fleetsim {c} --help\n{text}");
    }
}
