//! FFTW wisdom files (`parki_fft3d::wisdom`): a measured plan's wisdom saved, loaded back and
//! planned from at once; missing, foreign and corrupt files reported; an unwritable folder an
//! error naming it. One test in its own process: wisdom is process-wide planner state.

use std::time::Instant;

use parki_comm::Comm;
use parki_decomp::{Decomposition, ProcGrid};
use parki_fft3d::wisdom::{self, Loaded};
use parki_fft3d::{proc_grid_limits_in_order, AxisSpec, DistFft, DistFftOptions, LineEngine, PlanRigor};

/// A 1P-like transform (the free axes zero-padded), planned with `rigor` on FFTW's lines (RustFFT's
/// plan nothing FFTW keeps); the seconds the plan took and the forward transform of a fixed input.
fn plan_and_transform(rigor: PlanRigor) -> (f64, Vec<f64>) {
    let comm = Comm::single();
    let axes = [AxisSpec::periodic(24), AxisSpec::padded_dft(20, 42), AxisSpec::padded_dft(18, 40)];
    let limits = proc_grid_limits_in_order(&axes, [0, 1, 2], false);
    let pg = ProcGrid::choose(1, Decomposition::Auto, None, limits).unwrap();
    let opts = DistFftOptions { threads: 1, rigor, lines: LineEngine::Fftw, ..DistFftOptions::new(2) };
    let t = Instant::now();
    let mut fft = DistFft::<f64>::with_axes_in_order(&comm, axes, [0, 1, 2], pg, opts).unwrap();
    let seconds = t.elapsed().as_secs_f64();
    for (i, v) in fft.data_mut().iter_mut().enumerate() {
        *v = ((i * 7919) % 1000) as f64 * 1e-3;
    }
    fft.forward();
    (seconds, fft.data_mut().to_vec())
}

#[test]
fn measured_plans_are_saved_loaded_and_planned_from() {
    let dir = std::env::temp_dir().join(format!("parki-fft3d-wisdom-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let comm = Comm::single();
    let file = wisdom::file_in::<f64>(&dir.join("new folder"), "Intel(R) Xeon(R)  CPU @ 2.0GHz");
    assert_eq!(
        file.file_name().unwrap().to_string_lossy(),
        "fftw-wisdom-f64-intel-r-xeon-r-cpu-2-0ghz.txt",
        "one file per precision and CPU"
    );
    assert_eq!(wisdom::load::<f64>(&comm, &file), Loaded::Missing);

    // measured, saved (the folder created), then planned again from the wisdom
    let (estimate_s, estimated) = plan_and_transform(PlanRigor::Estimate);
    let (measure_s, measured) = plan_and_transform(PlanRigor::Measure);
    let bytes = wisdom::save::<f64>(&comm, &file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(bytes, text.len());
    assert!(text.contains("fftw_wisdom") && text.len() > 100, "{text}");
    assert_eq!(wisdom::load::<f64>(&comm, &file), Loaded::Imported(bytes));
    let (again_s, again) = plan_and_transform(PlanRigor::Measure);
    println!("plans: estimate {estimate_s:.4} s, measure {measure_s:.4} s, measure from wisdom {again_s:.4} s");
    assert!(
        again_s < 0.5 * measure_s,
        "a measured plan from wisdom took {again_s:.4} s against {measure_s:.4} s measuring"
    );
    // every plan computes the same transform
    let scale = estimated.iter().map(|v| v * v).sum::<f64>().sqrt();
    for other in [&measured, &again] {
        let diff = estimated.iter().zip(other.iter()).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
        assert!(diff <= 1e-13 * scale, "plans differ by {diff:.2e} of {scale:.2e}");
    }
    // the merged file keeps what it had: saving again writes at least as much
    assert!(wisdom::save::<f64>(&comm, &file).unwrap() >= bytes);

    // the other precision's wisdom, garbage and an unreadable path are rejected, not errors
    assert!(matches!(wisdom::load::<f32>(&comm, &file), Loaded::Rejected(w) if w.contains("f32")));
    let garbage = dir.join("garbage.txt");
    std::fs::write(&garbage, "(not wisdom at all").unwrap();
    assert!(matches!(wisdom::load::<f64>(&comm, &garbage), Loaded::Rejected(_)));
    assert!(matches!(wisdom::load::<f64>(&comm, &dir), Loaded::Rejected(_)), "a folder is not a file");
    assert!(!wisdom::import_text::<f64>("(fftw-3.3 garbage"));

    // a folder that cannot be made: an error naming the path
    let blocked = wisdom::file_in::<f64>(&garbage.join("sub"), "cpu");
    let e = wisdom::save::<f64>(&comm, &blocked).unwrap_err().to_string();
    assert!(e.contains("garbage.txt") && e.contains("folder"), "{e}");
    // no temporary file left beside the wisdom
    let left: Vec<_> = std::fs::read_dir(dir.join("new folder")).unwrap().filter_map(|e| e.ok()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
