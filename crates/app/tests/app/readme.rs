//! The README's quick start must work as written: .ci/run executes its two commands (the lines
//! after the markers `<!-- ci: quick-start` and `<!-- ci: tests`), and this test checks what
//! they name without running them: the package exists and `cargo run -p` can tell which binary
//! to run, the example exists and is a valid run.toml, the test command tests the workspace.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The command of a README marker, found the way .ci/run finds it: the first line indented by
/// four spaces after the line that starts with `<!-- ci: NAME `, with only blank lines between.
fn readme_command(readme: &str, name: &str) -> Option<String> {
    let marker = format!("<!-- ci: {name} ");
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(&marker));
    lines.next()?;
    for l in lines {
        if let Some(cmd) = l.strip_prefix("    ").filter(|c| !c.starts_with(' ')) {
            return Some(cmd.to_string());
        }
        if !l.trim().is_empty() {
            return None;
        }
    }
    None
}

/// The manifest of the workspace member whose package is `name`.
fn member_manifest(name: &str) -> Option<(PathBuf, String)> {
    let ws = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = ws.split("members").nth(1)?.split(']').next()?;
    members.split('"').skip(1).step_by(2).map(|m| root().join(m).join("Cargo.toml")).find_map(|p| {
        let text = std::fs::read_to_string(&p).ok()?;
        let package = text.split("[package]").nth(1)?;
        let declared = package.lines().find_map(|l| l.trim().strip_prefix("name = ").map(|v| v.trim_matches('"')))?;
        (declared == name).then_some((p, text))
    })
}

/// Why `cargo run -p name` could not pick a binary, if it could not.
fn runnable(name: &str) -> Result<(), String> {
    let (path, text) = member_manifest(name).ok_or(format!("no workspace package {name:?}"))?;
    let mut bins: Vec<String> = text
        .split("[[bin]]")
        .skip(1)
        .filter_map(|b| {
            b.lines().find_map(|l| l.trim().strip_prefix("name = ").map(|v| v.trim_matches('"').to_string()))
        })
        .collect();
    if bins.is_empty() {
        // no [[bin]]: the binaries cargo discovers, src/main.rs and src/bin/*.rs
        let src = path.parent().unwrap().join("src");
        if src.join("main.rs").exists() {
            bins.push(name.to_string());
        }
        let found = std::fs::read_dir(src.join("bin")).into_iter().flatten().flatten();
        bins.extend(found.map(|e| e.path().file_stem().unwrap().to_string_lossy().into_owned()));
    }
    let default_run =
        text.lines().find_map(|l| l.trim().strip_prefix("default-run = ").map(|v| v.trim_matches('"').to_string()));
    match (bins.len(), default_run) {
        (_, Some(d)) if bins.contains(&d) => Ok(()),
        (_, Some(d)) => Err(format!("{}: default-run = {d:?} names no binary of {bins:?}", path.display())),
        (0, None) => Err(format!("{}: package {name} has no binary", path.display())),
        (1, None) => Ok(()),
        (_, None) => Err(format!("{}: binaries {bins:?} and no default-run", path.display())),
    }
}

/// Checks a quick-start command: `... cargo run --release -p PKG -- run EXAMPLE`.
fn check_quick_start(cmd: &str) -> Result<(), String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let at = words.windows(2).position(|w| w == ["cargo", "run"]).ok_or("no `cargo run`")?;
    let args = &words[at + 2..];
    let p = args.iter().position(|w| *w == "-p" || *w == "--package").ok_or("no -p PACKAGE")?;
    runnable(args.get(p + 1).ok_or("-p without a package")?)?;
    let dashes = args.iter().position(|w| *w == "--").ok_or("no `--` before the program's arguments")?;
    let (sub, example) = (args.get(dashes + 1), args.get(dashes + 2));
    if sub != Some(&"run") {
        return Err(format!("the program's arguments start {sub:?}, not `run`"));
    }
    let example = root().join(example.ok_or("no run.toml")?);
    parki_app::config::RunConfig::load(&example).map(drop).map_err(|e| e.to_string())
}

#[test]
fn readme_quick_start_and_test_commands_work_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let quick = readme_command(&readme, "quick-start").expect("README.md: no command after <!-- ci: quick-start");
    check_quick_start(&quick).unwrap_or_else(|e| panic!("README quick start `{quick}`: {e}"));
    let tests = readme_command(&readme, "tests").expect("README.md: no command after <!-- ci: tests");
    assert!(tests.contains("cargo test") && tests.contains("--workspace"), "README test command: {tests}");
    // .ci/run runs both as written
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.contains("readme_command quick-start") && ci.contains("readme_command tests"), ".ci/run");
}

#[test]
fn the_checks_catch_the_old_readme() {
    // the quick start of the old README: the package had two binaries and no default-run
    let old = "bash .ci/setup && PATH=\"$HOME/.cargo/bin:$PATH\" cargo run --release -p parki-dist -- run examples/stokes/run.toml";
    let e = check_quick_start(old).unwrap_err();
    assert!(e.contains("parki-dist"), "{e}");
    // a marker followed by prose, a missing example, a wrong subcommand
    assert_eq!(readme_command("<!-- ci: tests -->\nRun:\n\n    cargo test", "tests"), None);
    let e = check_quick_start("cargo run --release -p parki-app -- run examples/none/run.toml").unwrap_err();
    assert!(e.contains("none"), "{e}");
    assert!(check_quick_start("cargo run --release -p parki-app -- examples/stokes/run.toml").is_err());
    assert!(check_quick_start("cargo run --release -p parki-app -- run examples/stokes/run.toml").is_ok());
}
