//! `[run] fftw_wisdom`: where the FFTW wisdom of this machine is kept (parki_fft3d::wisdom).
//!
//! `"auto"` (the default): the folder `$PARKI_FFTW_WISDOM` (`"off"` there turns it off), else
//! the cache folder of the cost model (`$XDG_CACHE_HOME/parki` or `~/.cache/parki`); `"off"`:
//! none; any other value: a folder (relative to the run.toml). Runs import the file of their
//! precision and CPU before planning; runs with `fft_plan = "measure"` or `"measure-lines"` save
//! what they measured.

use std::path::{Path, PathBuf};

use parki_comm::Comm;
use parki_fft3d::wisdom::{self, Loaded};
use parki_fft3d::{FftReal, PlanRigor};
use serde_json::{json, Value};

use crate::app::Log;

/// Environment variable naming the wisdom folder of `"auto"` (or `"off"`).
pub const FOLDER_ENV: &str = "PARKI_FFTW_WISDOM";

/// The folder `setting` names (`None`: no wisdom), relative paths against `base`.
pub fn folder(setting: Option<&str>, base: &Path) -> Option<PathBuf> {
    match setting.unwrap_or("auto") {
        "off" => None,
        "auto" => match crate::calibrate::env_path(FOLDER_ENV) {
            Some(p) if p.as_os_str() == "off" => None,
            Some(p) => Some(p),
            None => crate::calibrate::cache_folder(),
        },
        other => Some(base.join(other)),
    }
}

/// The wisdom of one run: imported before planning (`Wisdom::load`), saved after a measured
/// plan (`Wisdom::save`), and its report entry.
pub struct Wisdom {
    file: Option<PathBuf>,
    loaded: Option<Loaded>,
    saved: Option<usize>,
    warning: Option<String>,
}

impl Wisdom {
    /// Imports the file of precision `T` and this CPU in `folder` on every rank (collective).
    pub(crate) fn load<T: FftReal>(comm: &Comm, folder: Option<PathBuf>, log: Log) -> Self {
        let file = folder.map(|f| wisdom::file_in::<T>(&f, &crate::calibrate::this_cpu()));
        let loaded = file.as_ref().map(|p| wisdom::load::<T>(comm, p));
        let mut warning = None;
        match (&file, &loaded) {
            (Some(p), Some(Loaded::Imported(b))) => {
                log.line(&format!("FFTW wisdom: imported {} ({b} bytes)", p.display()))
            }
            (Some(p), Some(Loaded::Rejected(why))) => {
                warning = Some(format!("FFTW wisdom {} not used: {why}", p.display()));
            }
            _ => {}
        }
        Self { file, loaded, saved: None, warning }
    }

    /// After planning with `rigor`: a measured plan's wisdom is merged over the ranks and saved
    /// (collective). A file that cannot be written is a warning: the run does not depend on it.
    pub(crate) fn save<T: FftReal>(&mut self, comm: &Comm, rigor: PlanRigor, log: Log) {
        let Some(path) = self.file.as_ref().filter(|_| rigor.measures()) else {
            return;
        };
        match wisdom::save::<T>(comm, path) {
            Ok(b) => {
                log.line(&format!("FFTW wisdom: saved {} ({b} bytes)", path.display()));
                self.saved = Some(b);
            }
            Err(e) => self.warning = Some(format!("FFTW wisdom not saved: {e}")),
        }
    }

    /// A warning for the report and stderr (an unreadable or unwritable file).
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The report's `fftw_wisdom` entry.
    pub fn report(&self) -> Value {
        let loaded = match &self.loaded {
            None => json!(null),
            Some(Loaded::Imported(b)) => json!({"imported_bytes": b}),
            Some(Loaded::Missing) => json!("no file yet"),
            Some(Loaded::Rejected(why)) => json!({"rejected": why}),
        };
        json!({
            "file": self.file.as_ref().map(|p| p.display().to_string()),
            "loaded": loaded,
            "saved_bytes": self.saved,
        })
    }
}
