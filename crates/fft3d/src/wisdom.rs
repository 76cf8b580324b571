//! FFTW wisdom kept across runs: the plans FFTW_MEASURE found, one file per precision.
//!
//! FFTW's planner reuses wisdom made at the same or a more patient rigor (FFTW 3 manual, §4.7
//! "Wisdom"): once the measured plan of a transform is in the wisdom, planning that transform
//! again takes no time and returns the measured plan, with FFTW_ESTIMATE too. A measured run
//! therefore pays its planning once per machine and problem; later runs, measured or estimated,
//! import the file and plan in milliseconds with the measured plans (docs/design.md, "FFTW
//! wisdom").
//!
//! [`load`] imports a file before planning: rank 0 reads it and every rank imports the same
//! bytes (one read on a shared file system). [`save`], after planning, gathers every rank's
//! wisdom on rank 0 (the ranks plan different local transforms), merges it there and replaces
//! the file atomically (a temporary file in the same folder, renamed), so that concurrent runs
//! never read half a file. Both hold FFTW's planner mutex: wisdom is planner state.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use parki_comm::Comm;
use parki_core::{Error, Result};

use crate::FftReal;

extern "C" {
    // FFTW allocates the exported wisdom with malloc; the caller frees it (FFTW 3 manual,
    // `fftw_export_wisdom_to_string`).
    fn free(p: *mut std::ffi::c_void);
}

/// The wisdom file of precision `T` for the machine `machine` in `folder`:
/// `fftw-wisdom-f64-<machine>.txt` (FFTW keeps the precisions' wisdom apart, so one file could
/// not hold both; a measured plan is the fastest on the CPU it was measured on, so a folder
/// shared by different machines keeps one file each). `machine` is reduced to letters, digits
/// and single dashes.
pub fn file_in<T: FftReal>(folder: &Path, machine: &str) -> PathBuf {
    let mut slug = String::new();
    for c in machine.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "unknown" } else { slug };
    folder.join(format!("fftw-wisdom-{}-{slug}.txt", T::NAME))
}

/// This process's wisdom of precision `T` in FFTW's text form.
pub fn export_text<T: FftReal>() -> String {
    crate::ensure_fftw_threads();
    let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: planner state under the planner mutex; the string FFTW returns is NUL-terminated,
    // copied, then freed once with the allocator FFTW used.
    unsafe {
        let raw = T::export_wisdom();
        if raw.is_null() {
            return String::new();
        }
        let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
        free(raw.cast());
        text
    }
}

/// Adds `text` (FFTW's text form) to this process's wisdom of precision `T`; false when FFTW
/// rejects it (not wisdom, or the other precision's).
pub fn import_text<T: FftReal>(text: &str) -> bool {
    let Ok(c) = CString::new(text) else {
        return false;
    };
    crate::ensure_fftw_threads();
    let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a NUL-terminated string, planner state under the planner mutex.
    unsafe { T::import_wisdom(c.as_ptr()) != 0 }
}

/// What [`load`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// The file's wisdom was imported on every rank (its bytes).
    Imported(usize),
    /// No file yet.
    Missing,
    /// The file could not be read or FFTW rejected it (the reason); planning goes on without.
    Rejected(String),
}

/// Imports the wisdom file `path` of precision `T` on every rank of `comm` (collective): rank
/// 0 reads it and broadcasts its bytes. A missing, unreadable or rejected file is reported,
/// never an error: wisdom only makes planning faster.
pub fn load<T: FftReal>(comm: &Comm, path: &Path) -> Loaded {
    // one message: tag 1 and the bytes, tag 0 missing, tag 2 and the read error
    let mut message = Vec::new();
    if comm.rank() == 0 {
        message = match std::fs::read(path) {
            Ok(b) => [vec![1], b].concat(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => vec![0],
            Err(e) => [vec![2], e.to_string().into_bytes()].concat(),
        };
    }
    comm.broadcast_bytes(0, &mut message);
    let (tag, bytes) = message.split_first().map_or((0, &[][..]), |(t, b)| (*t, b));
    match tag {
        1 => {
            let text = String::from_utf8_lossy(bytes);
            let ok = import_text::<T>(&text);
            // every rank imported the same bytes, so one answer holds for all
            if ok {
                Loaded::Imported(bytes.len())
            } else {
                Loaded::Rejected(format!("FFTW did not accept it as {} wisdom", T::NAME))
            }
        }
        2 => Loaded::Rejected(String::from_utf8_lossy(bytes).into_owned()),
        _ => Loaded::Missing,
    }
}

/// Gathers every rank's wisdom of precision `T` on rank 0, merges it with the file's (already
/// imported by [`load`], or read now) and replaces `path` (collective; the folder is created).
/// Returns the bytes written.
///
/// # Errors
/// The folder or the file cannot be written (every rank returns the same error).
pub fn save<T: FftReal>(comm: &Comm, path: &Path) -> Result<usize> {
    let mine = export_text::<T>().into_bytes();
    let lengths = comm.all_gather(&[mine.len() as u64]);
    let all = comm.all_gatherv(&mine);
    let written = if comm.rank() == 0 {
        // the file may have grown since it was loaded (another run): merge it too
        if let Ok(text) = std::fs::read_to_string(path) {
            import_text::<T>(&text);
        }
        let mut at = 0;
        for (r, &len) in lengths.iter().enumerate() {
            let len = len as usize;
            if r > 0 {
                import_text::<T>(&String::from_utf8_lossy(&all[at..at + len]));
            }
            at += len;
        }
        write_atomically(path, export_text::<T>().as_bytes())
    } else {
        Ok(0)
    };
    comm.agree(written)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<usize> {
    let err = |what: &str, e: std::io::Error| Error::Io { path: path.to_path_buf(), message: format!("{what}: {e}") };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| err("creating its folder", e))?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| err("writing the FFTW wisdom", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err("replacing the FFTW wisdom", e)
    })?;
    Ok(bytes.len())
}
