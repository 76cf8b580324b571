//! The kernels' parameter blocks (`CellParams`, `WindowParams` of `kernels/common.cuh`),
//! `#[repr(C)]` with the same fields in the same order, checked by the `abi_probe` kernel.

use parki_core::{Kernel, Real};
use parki_farfield::GridWindow;
use parki_nearfield::CellGrid;

/// A rank's window of the cell grid, as [`CellGrid`] describes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CellParams {
    /// Unwrapped global cell of local cell 0 along windowed axes.
    pub origin: [i64; 3],
    /// Cell widths.
    pub width: [f64; 3],
    /// Box lengths.
    pub lengths: [f64; 3],
    /// Local cells per axis.
    pub n: [i32; 3],
    /// Global cells per axis.
    pub global_n: [i32; 3],
    /// 1 where the axis holds every cell and wraps.
    pub wrap: [i32; 3],
    /// Padding to 8 bytes.
    pub pad: i32,
}

impl CellParams {
    /// The block of `cells`.
    pub fn new(cells: &CellGrid) -> Self {
        let (n, g) = (cells.dims(), cells.global_dims());
        let wrap = cells.wrap_axes();
        Self {
            origin: cells.window_origin(),
            width: cells.widths(),
            lengths: cells.lengths(),
            n: n.map(|v| v as i32),
            global_n: g.map(|v| v as i32),
            wrap: wrap.map(i32::from),
            pad: 0,
        }
    }
}

/// The window on a grid block and the layout a kernel reads or writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowParams {
    /// Unwrapped global point of local point 0 along windowed axes.
    pub origin: [i64; 3],
    /// Reals between components of the grid read or written.
    pub component_stride: i64,
    /// `1/h` per axis.
    pub inv_h: [f64; 3],
    /// Points per axis of the block.
    pub m: [i32; 3],
    /// Points per axis of the global grid.
    pub global: [i32; 3],
    /// 1 where the axis holds the whole periodic grid.
    pub wrap: [i32; 3],
    /// Support.
    pub p: i32,
    /// Polynomial degree per bin.
    pub degree: i32,
    /// Reals per x row of the grid read or written.
    pub row_stride: i32,
    /// Padding to 8 bytes.
    pub pad: i32,
}

impl WindowParams {
    /// The window `w` on its own layout (padded rows, components `real_len` apart).
    pub fn new<T: Real>(w: &GridWindow<T>) -> Self {
        Self {
            origin: w.origin,
            component_stride: w.layout.real_len() as i64,
            inv_h: w.inv_h,
            m: w.layout.global.map(|v| v as i32),
            global: w.global.map(|v| v as i32),
            wrap: w.wrap.map(i32::from),
            p: w.p as i32,
            degree: w.degree() as i32,
            row_stride: w.layout.row_stride() as i32,
            pad: 0,
        }
    }
}

/// The kernel selector of `kernels/common.cuh`.
pub fn kernel_code(kernel: Kernel) -> i32 {
    match kernel {
        Kernel::Laplace => 0,
        Kernel::Stokeslet => 1,
        Kernel::Stresslet => 2,
        Kernel::Stokes => 3,
    }
}
