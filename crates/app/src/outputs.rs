//! The outputs of a run (`[output] potential`, `field` and `report`), settled before anything
//! is read or computed:
//!
//! - [`check`] refuses an output path that names an input (the run.toml, any `[sources]` or
//!   `[targets]` file, whether the kernel uses it or not) or the other output, compared as files
//!   (device and inode, so relative, absolute, `./` and symbolic-link spellings and hard links
//!   all count), a missing directory, and an output path that is a directory.
//! - [`Staged::begin`] creates each output's temporary file in its own directory (which proves
//!   the directory writable, on every rank for the potential, which every rank writes) and
//!   removes what an earlier run left at the output paths, so that a failed run leaves no
//!   output at all, never a stale one that looks current.
//! - The run writes into the temporary files; [`Staged::commit`] renames them into place (rank
//!   0, after every rank has written). A run that fails removes them ([`Drop`]).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use parki_comm::Comm;
use parki_core::{Error, Result};

use crate::config::{resolve, RunConfig};

/// The resolved output paths of a run.toml.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputPaths {
    /// The data every rank writes its part of: `[output] potential` (particles) or `solution`
    /// (Poisson).
    pub potential: Option<PathBuf>,
    /// `[output] field` (the Laplace field, particles only), written like the potential.
    pub field: Option<PathBuf>,
    /// `[output] report`.
    pub report: Option<PathBuf>,
    /// The data's field in run.toml, for messages.
    pub data_field: &'static str,
}

impl OutputPaths {
    /// Neither a potential, a field nor a report is written.
    pub fn is_empty(&self) -> bool {
        self.potential.is_none() && self.field.is_none() && self.report.is_none()
    }
}

/// What a path names, for comparing two spellings of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Identity {
    /// An existing file (symbolic links followed): device and inode.
    File(u64, u64),
    /// A path where nothing exists yet: the canonical directory and the name.
    Absent(PathBuf),
}

fn identity(path: &Path) -> Option<Identity> {
    if let Ok(m) = fs::metadata(path) {
        return Some(Identity::File(m.dev(), m.ino()));
    }
    let dir = parent(path);
    Some(Identity::Absent(fs::canonicalize(dir).ok()?.join(path.file_name()?)))
}

/// The directory of `path` (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The input files a run.toml names, with their fields (`run.toml` for the file itself).
pub fn inputs(cfg: &RunConfig, config: &Path) -> Vec<(String, PathBuf)> {
    particle_inputs(config, &cfg.sources, cfg.targets.as_ref())
}

/// The run.toml at `config` and the files of its `[sources]` and `[targets]` sections, with
/// their fields.
pub fn particle_inputs(
    config: &Path,
    sources: &crate::config::ParticleSection,
    targets: Option<&crate::config::ParticleSection>,
) -> Vec<(String, PathBuf)> {
    let mut v = vec![("run.toml".to_string(), config.to_path_buf())];
    for (section, s) in [("sources", Some(sources)), ("targets", targets)] {
        let Some(s) = s else { continue };
        let files = [
            ("positions", &s.positions),
            ("charges", &s.charges),
            ("forces", &s.forces),
            ("dipoles", &s.dipoles),
            ("normals", &s.normals),
        ];
        for (name, f) in files {
            if let Some(f) = f {
                v.push((format!("{section}.{name}"), resolve(config, f)));
            }
        }
    }
    v
}

/// Checks the outputs of `cfg` (read from `config`) and returns their resolved paths. Local:
/// agree on the result. Touches nothing.
pub fn check(cfg: &RunConfig, config: &Path) -> Result<OutputPaths> {
    let paths = OutputPaths {
        potential: cfg.output.potential.as_ref().map(|p| resolve(config, p)),
        field: cfg.output.field.as_ref().map(|p| resolve(config, p)),
        report: cfg.output.report.as_ref().map(|p| resolve(config, p)),
        data_field: "output.potential",
    };
    check_paths(config, &inputs(cfg, config), paths)
}

/// Checks resolved output `paths` against each other and against the `inputs` (field, path) of
/// the run.toml at `config` (see the module documentation). Local. Touches nothing.
pub fn check_paths(config: &Path, inputs: &[(String, PathBuf)], paths: OutputPaths) -> Result<OutputPaths> {
    let outputs: Vec<(&str, &PathBuf)> =
        [(paths.data_field, &paths.potential), ("output.field", &paths.field), ("output.report", &paths.report)]
            .into_iter()
            .filter_map(|(f, p)| p.as_ref().map(|p| (f, p)))
            .collect();
    let io = |path: &Path, message: String| Error::Io { path: path.into(), message };
    let mut ids = Vec::new();
    for &(field, path) in &outputs {
        let dir = parent(path);
        if path.file_name().is_none() {
            return Err(io(path, format!("{field}: not a file name")));
        }
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(io(dir, format!("{field}: not a directory"))),
            Err(e) => return Err(io(dir, format!("{field}: the output directory cannot be used: {e}"))),
        }
        if fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(io(path, format!("{field}: is a directory, not a file")));
        }
        let id = identity(path).ok_or_else(|| io(path, format!("{field}: the path cannot be resolved")))?;
        ids.push((field, path, id));
    }
    let same = |what: &str, a: &str, b: &str, path: &Path| Error::Config {
        path: config.into(),
        message: format!("{a} and {b} name the same file ({}): {what}; choose another path for {a}", path.display()),
    };
    for (field, path, id) in &ids {
        for (input, input_path) in inputs {
            if identity(input_path).as_ref() == Some(id) {
                return Err(same("the run would overwrite its input", field, input, path));
            }
        }
    }
    for (i, (b, _, y)) in ids.iter().enumerate() {
        if let Some((a, path, _)) = ids[..i].iter().find(|(_, _, x)| x == y) {
            return Err(same("each output needs its own file", b, a, path));
        }
    }
    Ok(paths)
}

/// Creates the float64 `.npy` file of `shape` at `path` at its full length (rank 0) for every
/// rank to write its part into; returns the offset of its first value on every rank (only
/// rank 0 knows the header's length). Collective, agreed.
pub fn create_npy(comm: &Comm, path: &Path, shape: &[usize]) -> Result<usize> {
    let created = if comm.rank() == 0 { crate::npy::create(path, shape) } else { Ok(0) };
    Ok(comm.max(comm.agree(created)? as u64) as usize)
}

/// One output being written: its place and its temporary file in the same directory.
#[derive(Debug)]
struct StagedFile {
    field: &'static str,
    path: PathBuf,
    temp: PathBuf,
}

/// The outputs of a run between [`Staged::begin`] and [`Staged::commit`] (see the module
/// documentation). Rank 0 owns the temporary files and removes them if the run fails.
#[derive(Debug)]
pub struct Staged {
    potential: Option<StagedFile>,
    field: Option<StagedFile>,
    report: Option<StagedFile>,
    owner: bool,
    committed: bool,
}

/// A name for the temporary file of `path`: hidden, in the same directory, unique to the run.
fn temp_name(path: &Path, tag: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parent(path).join(format!(".{name}.{tag}.partial"))
}

impl Staged {
    /// Creates the temporary files (rank 0), checks that every rank can open the potential's
    /// for writing, and removes the outputs of an earlier run at the output paths. Collective;
    /// every failure is agreed on (and leaves nothing behind).
    pub fn begin(comm: &Comm, paths: &OutputPaths) -> Result<Staged> {
        let owner = comm.rank() == 0;
        // a tag unique to this run, chosen by rank 0 and shared
        let mut tag = Vec::new();
        if owner {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            tag = format!("parki-{}-{nanos:x}", std::process::id()).into_bytes();
        }
        comm.broadcast_bytes(0, &mut tag);
        let tag = String::from_utf8_lossy(&tag).into_owned();
        let stage = |field: &'static str, p: &Option<PathBuf>| {
            p.as_ref().map(|p| StagedFile { field, path: p.clone(), temp: temp_name(p, &tag) })
        };
        let staged = Staged {
            potential: stage(paths.data_field, &paths.potential),
            field: stage("output.field", &paths.field),
            report: stage("output.report", &paths.report),
            owner,
            committed: false,
        };
        let created = if owner {
            staged.files().try_for_each(|f| {
                fs::OpenOptions::new().write(true).create_new(true).open(&f.temp).map(drop).map_err(|e| Error::Io {
                    path: f.temp.clone(),
                    message: format!("{}: cannot write in the directory of {}: {e}", f.field, f.path.display()),
                })
            })
        } else {
            Ok(())
        };
        comm.agree(created)?;
        // every rank writes its rows of the potential and the field into the files rank 0 created
        let opened = if owner {
            Ok(())
        } else {
            staged.potential.iter().chain(&staged.field).try_for_each(|f| {
                fs::OpenOptions::new().write(true).open(&f.temp).map(drop).map_err(|e| Error::Io {
                    path: f.temp.clone(),
                    message: format!("{}: this rank cannot open the file rank 0 created: {e}", f.field),
                })
            })
        };
        comm.agree(opened)?;
        let cleared = if owner {
            staged.files().try_for_each(|f| match fs::remove_file(&f.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                    path: f.path.clone(),
                    message: format!("{}: the output of an earlier run cannot be removed: {e}", f.field),
                }),
                _ => Ok(()),
            })
        } else {
            Ok(())
        };
        comm.agree(cleared)?;
        Ok(staged)
    }

    fn files(&self) -> impl Iterator<Item = &StagedFile> {
        self.potential.iter().chain(self.field.iter()).chain(self.report.iter())
    }

    /// The temporary file the potential is written into (every rank), if there is a potential.
    pub fn potential(&self) -> Option<&Path> {
        self.potential.as_ref().map(|f| f.temp.as_path())
    }

    /// The temporary file the field is written into (every rank), if there is a field.
    pub fn field(&self) -> Option<&Path> {
        self.field.as_ref().map(|f| f.temp.as_path())
    }

    /// The temporary file the report is written into (rank 0), if there is a report.
    pub fn report(&self) -> Option<&Path> {
        self.report.as_ref().map(|f| f.temp.as_path())
    }

    /// The final paths of the outputs that are written.
    pub fn paths(&self) -> Vec<&Path> {
        self.files().map(|f| f.path.as_path()).collect()
    }

    /// Renames the written temporary files into place (rank 0; the potential first). If a
    /// rename fails, the outputs already in place are removed again. Collective, agreed.
    pub fn commit(mut self, comm: &Comm) -> Result<()> {
        let renamed = if self.owner {
            let mut done: Vec<&Path> = Vec::new();
            let mut result = Ok(());
            for f in self.files() {
                if let Err(e) = fs::rename(&f.temp, &f.path) {
                    done.iter().for_each(|p| drop(fs::remove_file(p)));
                    result = Err(Error::Io { path: f.path.clone(), message: format!("{}: {e}", f.field) });
                    break;
                }
                done.push(&f.path);
            }
            result
        } else {
            Ok(())
        };
        self.committed = renamed.is_ok();
        comm.agree(renamed)
    }
}

impl Drop for Staged {
    /// A run that did not commit leaves no temporary file.
    fn drop(&mut self) {
        if self.owner && !self.committed {
            self.files().for_each(|f| drop(fs::remove_file(&f.temp)));
        }
    }
}
