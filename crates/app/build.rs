//! Records the source's git commit for the report's provenance: `PARKI_GIT_COMMIT` (the 40-digit
//! hash of `HEAD`, or `unknown` where git or the repository is absent, e.g. a build from a
//! tarball) and `PARKI_GIT_DIRTY` (`true` when `git status --porcelain` lists changes, `false`
//! when clean, `unknown` without git).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git args` run in `dir`: its trimmed standard output, or `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let commit =
        git(&manifest, &["rev-parse", "HEAD"]).filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()));
    let dirty = match &commit {
        Some(_) => match git(&manifest, &["status", "--porcelain"]) {
            Some(s) if s.is_empty() => "false",
            Some(_) => "true",
            None => "unknown",
        },
        None => "unknown",
    };
    println!("cargo:rustc-env=PARKI_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
    println!("cargo:rustc-env=PARKI_GIT_DIRTY={dirty}");
    if commit.is_none() {
        return;
    }
    // HEAD moves when a branch is checked out, the branch's ref (loose or packed) when a commit
    // is made, the index when changes are staged; `--git-path` finds each in a worktree too.
    let mut watch: Vec<PathBuf> = Vec::new();
    let mut paths = vec!["HEAD".to_string(), "packed-refs".to_string(), "index".to_string()];
    if let Some(r) = git(&manifest, &["symbolic-ref", "-q", "HEAD"]) {
        paths.push(r);
    }
    for p in paths {
        if let Some(found) = git(&manifest, &["rev-parse", "--path-format=absolute", "--git-path", &p]) {
            watch.push(found.into());
        }
    }
    // an edited source makes the tree dirty: the workspace's sources are watched as well
    if let Some(root) = manifest.parent().and_then(Path::parent) {
        watch.extend(["crates", "bench", "Cargo.toml", "Cargo.lock"].map(|p| root.join(p)));
    }
    for p in watch.into_iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
