//! Reading and writing NumPy `.npy` files (format versions 1–3): `(N,)` and `(N, 3)` arrays of
//! little-endian `float64` or `float32`, C or Fortran order.

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use parki_core::{Error, Result};

/// A 1-D or 2-D float array read from a `.npy` file, as `f64`, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Shape: `[n]` or `[n, m]`.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f64>,
}

fn shape_err(field: &str, expected: &str, found: String) -> Error {
    Error::Shape { field: field.into(), expected: expected.into(), found }
}

/// The machine's memory in bytes (`MemTotal` of /proc/meminfo), where known.
fn physical_memory() -> Option<u128> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn gb(bytes: u128) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Checks that `rows` rows of `bytes_per_row` bytes (this rank's share of `count`, the value of
/// `field`) can be held: not more than the machine's memory, and an allocation of that size
/// succeeds (`try_reserve`). The error names the field, the count and the bytes, where the
/// allocation itself would abort the process.
pub fn ensure_fits(field: &str, count: usize, rows: usize, bytes_per_row: usize) -> Result<()> {
    let bytes = rows as u128 * bytes_per_row as u128;
    let refuse = |why: String| Error::Resource {
        message: format!(
            "{field} = {count}: {rows} rows on this rank need {} ({bytes_per_row} bytes each), {why}",
            gb(bytes)
        ),
    };
    if let Some(total) = physical_memory().filter(|&t| bytes > t) {
        return Err(refuse(format!("more than the {} of memory of this machine", gb(total))));
    }
    let probe = usize::try_from(bytes).map_err(|_| refuse("more than the address space".into()))?;
    Vec::<u8>::new().try_reserve_exact(probe).map_err(|e| refuse(format!("which cannot be allocated ({e})")))
}

/// A zeroed vector of `len` values for `field`, or an error naming the field where the memory
/// cannot be had (instead of an abort).
fn zeros(field: &str, len: usize) -> Result<Vec<f64>> {
    ensure_fits(field, len, len, 8)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|e| Error::Resource {
        message: format!("{field}: {len} values ({}) cannot be allocated ({e})", gb(len as u128 * 8)),
    })?;
    v.resize(len, 0.0);
    Ok(v)
}

/// Reads `path`; `field` names the input in error messages.
pub fn read(path: &Path, field: &str) -> Result<Array> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.into(), message: format!("{field}: {e}") })?;
    parse(&bytes, &format!("{field} ({})", path.display()))
}

/// The header of a `.npy` file: what is needed to read any rows of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Shape: `[n]` or `[n, m]`.
    pub shape: Vec<usize>,
    /// Bytes per value (8: float64, 4: float32).
    pub width: usize,
    /// Big-endian values (`'>f8'`, `'>f4'`: NumPy's on big-endian machines, or `astype('>f8')`).
    pub big_endian: bool,
    /// Column-major data.
    pub fortran: bool,
    /// Offset of the first value in the file.
    pub data_offset: usize,
}

impl Header {
    /// Rows (the first dimension; 1 for a 0-d array).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Values per row.
    pub fn columns(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// Values in the whole array, or an error naming `field` when the shape's product does not
    /// fit in an address (a corrupt or hostile header).
    pub fn values(&self, field: &str) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n.checked_mul(self.width).is_some())
            .ok_or_else(|| {
                shape_err(field, "a shape whose size fits in memory addresses", format!("shape {:?}", self.shape))
            })
    }

    /// Checks the shape against `(N, cols)` (or `(N,)` for `cols == 1`, `(N, 1)` accepted).
    pub fn expect_columns(&self, cols: usize, field: &str) -> Result<()> {
        let ok = match self.shape.as_slice() {
            [_] => cols == 1,
            [_, m] => *m == cols,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            let expected = if cols == 1 { "shape (N,)".to_string() } else { format!("shape (N, {cols})") };
            Err(shape_err(field, &expected, format!("shape {:?}", self.shape)))
        }
    }
}

/// Parses the header from the first bytes of a file (at least the whole header).
fn parse_header(bytes: &[u8], field: &str) -> Result<Header> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(shape_err(field, "a NumPy .npy file", "no .npy magic number".into()));
    }
    let major = bytes[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(shape_err(field, ".npy format version 1, 2 or 3", format!("version {v}"))),
    };
    if bytes.len() < start + hlen {
        return Err(shape_err(field, "a complete .npy header", "a truncated file".into()));
    }
    let header = std::str::from_utf8(&bytes[start..start + hlen])
        .map_err(|_| shape_err(field, "an ASCII header", "invalid UTF-8".into()))?;
    let descr = dict_value(header, "descr").ok_or_else(|| shape_err(field, "a 'descr' key", header.into()))?;
    let fortran = dict_value(header, "fortran_order").map(|v| v.trim() == "True").unwrap_or(false);
    let shape_txt = dict_value(header, "shape").ok_or_else(|| shape_err(field, "a 'shape' key", header.into()))?;
    let shape: Vec<usize> = shape_txt
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| shape_err(field, "integer dimensions", shape_txt.to_string())))
        .collect::<Result<_>>()?;
    if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).and_then(|n| n.checked_mul(8)).is_none() {
        return Err(shape_err(field, "a shape whose size fits in memory addresses", format!("shape {shape:?}")));
    }
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let (width, big_endian) = match descr {
        "<f8" | "=f8" | "f8" => (8, false),
        "<f4" | "=f4" | "f4" => (4, false),
        ">f8" => (8, true),
        ">f4" => (4, true),
        other => {
            return Err(shape_err(
                field,
                "float64 ('<f8', '>f8') or float32 ('<f4', '>f4') data",
                format!("dtype '{other}'"),
            ))
        }
    };
    let fortran = fortran && shape.len() == 2;
    Ok(Header { shape, width, big_endian, fortran, data_offset: start + hlen })
}

fn decode(b: &[u8], width: usize, big_endian: bool) -> f64 {
    match (width, big_endian) {
        (8, false) => f64::from_le_bytes(b.try_into().expect("8 bytes")),
        (8, true) => f64::from_be_bytes(b.try_into().expect("8 bytes")),
        (_, false) => f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
        (_, true) => f32::from_be_bytes(b.try_into().expect("4 bytes")) as f64,
    }
}

/// Parses the bytes of a `.npy` file.
pub fn parse(bytes: &[u8], field: &str) -> Result<Array> {
    let h = parse_header(bytes, field)?;
    let count = h.values(field)?;
    let body = &bytes[h.data_offset..];
    if (body.len() / h.width) < count {
        return Err(shape_err(field, &format!("{count} values"), format!("{} bytes of data", body.len())));
    }
    let mut data: Vec<f64> = body.chunks_exact(h.width).take(count).map(|b| decode(b, h.width, h.big_endian)).collect();
    if h.fortran {
        let (n, m) = (h.shape[0], h.shape[1]);
        let mut t = vec![0.0; count];
        for i in 0..n {
            for j in 0..m {
                t[i * m + j] = data[j * n + i];
            }
        }
        data = t;
    }
    Ok(Array { shape: h.shape, data })
}

/// Reads the header of `path` only.
pub fn read_header(path: &Path, field: &str) -> Result<Header> {
    use std::io::Read;
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: format!("{field}: {e}") };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::with_capacity(256);
    // a header is at most 12 bytes of preamble plus its declared length; read until complete
    let mut chunk = [0u8; 4096];
    loop {
        let n = f.read(&mut chunk).map_err(io)?;
        buf.extend_from_slice(&chunk[..n]);
        let complete = match buf.get(6) {
            Some(1) if buf.len() >= 10 => buf.len() >= 10 + u16::from_le_bytes([buf[8], buf[9]]) as usize,
            Some(2 | 3) if buf.len() >= 12 => {
                buf.len() >= 12 + u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize
            }
            _ => false,
        };
        if complete || n == 0 {
            break;
        }
    }
    parse_header(&buf, &format!("{field} ({})", path.display()))
}

/// Errors unless the file at `path` holds every value its header `h` declares (checked before
/// anything is allocated or planned: a header claiming more rows than the file has is a
/// truncated file, not a memory estimate).
pub fn check_complete(path: &Path, field: &str, h: &Header) -> Result<()> {
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: format!("{field}: {e}") };
    let len = std::fs::metadata(path).map_err(io)?.len() as u128;
    let values = h.rows() as u128 * h.columns().max(1) as u128;
    if h.data_offset as u128 + values * h.width as u128 > len {
        return Err(shape_err(
            &format!("{field} ({})", path.display()),
            &format!("{values} values of {} bytes after the header", h.width),
            format!("a file of {len} bytes (truncated)"),
        ));
    }
    Ok(())
}

/// Reads rows `rows` of the file whose header is `h` (row-major `f64`, `h.columns()` per row),
/// touching only their bytes: each rank of a distributed run reads its own slice.
pub fn read_rows(path: &Path, field: &str, h: &Header, rows: Range<usize>) -> Result<Vec<f64>> {
    use std::io::{Read, Seek, SeekFrom};
    let named = format!("{field} ({})", path.display());
    let (n, m) = (h.rows(), h.columns());
    if rows.end > n {
        return Err(shape_err(&named, &format!("at least {} rows", rows.end), format!("{n} rows")));
    }
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: format!("{field}: {e}") };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len() as u128;
    let count = rows.len();
    // (first value, values to read, destination column or None for whole rows)
    let spans: Vec<(usize, usize, Option<usize>)> = if h.fortran && m > 1 {
        (0..m).map(|j| (j * n + rows.start, count, Some(j))).collect()
    } else {
        vec![(rows.start * m, count * m, None)]
    };
    // the file must hold every span before anything is allocated (the header is checked to
    // fit in an address, the sizes here are computed wide)
    let end = |first: usize, values: usize| h.data_offset as u128 + (first as u128 + values as u128) * h.width as u128;
    if spans.iter().any(|&(first, values, _)| end(first, values) > len) {
        return Err(shape_err(
            &named,
            &format!("{} values of {} bytes after the header", n as u128 * m.max(1) as u128, h.width),
            format!("a file of {len} bytes, truncated inside rows {}..{}", rows.start, rows.end),
        ));
    }
    let mut out = zeros(&named, count * m)?;
    let mut bytes = Vec::new();
    for (first, values, column) in spans {
        let (lo, hi) = (h.data_offset + first * h.width, h.data_offset + (first + values) * h.width);
        bytes.resize(hi - lo, 0);
        f.seek(SeekFrom::Start(lo as u64)).map_err(io)?;
        f.read_exact(&mut bytes).map_err(io)?;
        let vals = bytes.chunks_exact(h.width).map(|b| decode(b, h.width, h.big_endian));
        match column {
            None => out.iter_mut().zip(vals).for_each(|(o, v)| *o = v),
            Some(j) => out.iter_mut().skip(j).step_by(m).zip(vals).for_each(|(o, v)| *o = v),
        }
    }
    Ok(out)
}

fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = header.find(&format!("'{key}'")).or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[k + key.len() + 2..];
    let colon = rest.find(':')?;
    let rest = &rest[colon + 1..];
    let rest = rest.trim_start();
    let end = if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}']).unwrap_or(rest.len()) };
    Some(&rest[..end])
}

impl Array {
    /// The array as `(N, 3)` rows.
    pub fn rows3(&self, field: &str) -> Result<Vec<[f64; 3]>> {
        if self.shape.len() != 2 || self.shape[1] != 3 {
            return Err(shape_err(field, "shape (N, 3)", format!("shape {:?}", self.shape)));
        }
        Ok(self.data.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }

    /// The array as `(N,)` values (an `(N, 1)` array is accepted).
    pub fn column(&self, field: &str) -> Result<Vec<f64>> {
        match self.shape.as_slice() {
            [_] | [_, 1] => Ok(self.data.clone()),
            s => Err(shape_err(field, "shape (N,)", format!("shape {s:?}"))),
        }
    }
}

/// The version 1.0 header of a float64 C-order array of `shape`, padded to 64 bytes.
fn header_bytes(shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        s => format!("({})", s.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {dims}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

fn le_bytes(data: &[f64]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `data` with `shape` as a float64 `.npy` file.
pub fn write(path: &Path, shape: &[usize], data: &[f64]) -> Result<()> {
    assert_eq!(shape.iter().product::<usize>(), data.len());
    let mut out = header_bytes(shape);
    out.extend_from_slice(&le_bytes(data));
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: e.to_string() };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(&out).map_err(io)
}

/// Creates a float64 `.npy` file of `shape` at its full length (values zero) for ranks to fill
/// with [`write_rows`]; returns the offset of the first value.
pub fn create(path: &Path, shape: &[usize]) -> Result<usize> {
    let header = header_bytes(shape);
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: e.to_string() };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(&header).map_err(io)?;
    f.set_len((header.len() + 8 * shape.iter().product::<usize>()) as u64).map_err(io)?;
    Ok(header.len())
}

/// Writes rows starting at `first_row` (of `columns` values each) into a file made by
/// [`create`] whose values start at `data_offset`: each rank writes its own slice, in place.
pub fn write_rows(path: &Path, data_offset: usize, first_row: usize, columns: usize, data: &[f64]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: e.to_string() };
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    f.write_all_at(&le_bytes(data), (data_offset + 8 * first_row * columns) as u64).map_err(io)
}

/// Reads this rank's `block` of a C-order grid array whose header is `h`: shape
/// `(n0, n1, n2)` or `(n0, n1, n2, comps)` (checked by the caller), `comps` values per cell.
/// Returns the block in C order, components fastest; touches only the block's bytes.
pub fn read_block(path: &Path, field: &str, h: &Header, block: &[Range<usize>; 3], comps: usize) -> Result<Vec<f64>> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: format!("{field}: {e}") };
    check_complete(path, field, h)?;
    let f = std::fs::File::open(path).map_err(io)?;
    let (n1, n2) = (h.shape[1], h.shape[2]);
    let run = block[2].len() * comps;
    let mut out = zeros(field, block.iter().map(|r| r.len()).product::<usize>() * comps)?;
    let mut bytes = vec![0u8; run * h.width];
    let mut q = 0;
    for i in block[0].clone() {
        for j in block[1].clone() {
            let first = ((i * n1 + j) * n2 + block[2].start) * comps;
            f.read_exact_at(&mut bytes, (h.data_offset + first * h.width) as u64).map_err(io)?;
            for (o, b) in out[q..q + run].iter_mut().zip(bytes.chunks_exact(h.width)) {
                *o = decode(b, h.width, h.big_endian);
            }
            q += run;
        }
    }
    Ok(out)
}

/// Writes this rank's `block` (C order, `comps` values per cell, components fastest) into a
/// float64 grid file of `shape` made by [`create`] whose values start at `data_offset`.
pub fn write_block(
    path: &Path,
    data_offset: usize,
    shape: [usize; 3],
    comps: usize,
    block: &[Range<usize>; 3],
    data: &[f64],
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: e.to_string() };
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    let run = block[2].len() * comps;
    let mut bytes = Vec::with_capacity(run * 8);
    let mut q = 0;
    for i in block[0].clone() {
        for j in block[1].clone() {
            let first = ((i * shape[1] + j) * shape[2] + block[2].start) * comps;
            bytes.clear();
            bytes.extend(data[q..q + run].iter().flat_map(|v| v.to_le_bytes()));
            f.write_all_at(&bytes, (data_offset + 8 * first) as u64).map_err(io)?;
            q += run;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse, write};

    #[test]
    fn grid_blocks_round_trip() {
        let dir = std::env::temp_dir().join(format!("parki-npy-block-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("g.npy");
        let shape = [4, 3, 5];
        let off = super::create(&p, &[4, 3, 5, 2]).unwrap();
        // two blocks that tile the grid, written in either order
        let blocks = [[0..4, 0..3, 0..2], [0..4, 0..3, 2..5]];
        let value = |i: usize, j: usize, k: usize, c: usize| (100 * i + 10 * j + k) as f64 + 0.5 * c as f64;
        let fill = |b: &[std::ops::Range<usize>; 3]| -> Vec<f64> {
            let mut v = Vec::new();
            for i in b[0].clone() {
                for j in b[1].clone() {
                    for k in b[2].clone() {
                        v.extend((0..2).map(|c| value(i, j, k, c)));
                    }
                }
            }
            v
        };
        for b in blocks.iter().rev() {
            super::write_block(&p, off, shape, 2, b, &fill(b)).unwrap();
        }
        let h = super::read_header(&p, "input.rhs").unwrap();
        assert_eq!(h.shape, vec![4, 3, 5, 2]);
        let b = [1..3, 0..2, 1..4];
        assert_eq!(super::read_block(&p, "input.rhs", &h, &b, 2).unwrap(), fill(&b));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn roundtrip_and_errors() {
        let dir = std::env::temp_dir().join(format!("parki-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        write(&p, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let a = super::read(&p, "x").unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.rows3("x").unwrap()[1], [4.0, 5.0, 6.0]);
        assert!(a.column("x").is_err());
        assert!(parse(b"not a file", "x").is_err());
        let e = super::read(&dir.join("missing.npy"), "sources.positions").unwrap_err().to_string();
        assert!(e.contains("missing.npy") && e.contains("sources.positions"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A hand-made file: header dict `dict`, values `vals` as f32 or f64.
    fn raw(dict: &str, vals: &[f64], f32s: bool) -> Vec<u8> {
        let mut h = dict.to_string();
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for &v in vals {
            if f32s {
                b.extend_from_slice(&(v as f32).to_le_bytes());
            } else {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    /// `bytes` (a file of 15 values) with each value's bytes reversed.
    fn big_endian(mut bytes: Vec<u8>, width: usize) -> Vec<u8> {
        let start = bytes.len() - 15 * width;
        bytes[start..].chunks_exact_mut(width).for_each(|v| v.reverse());
        bytes
    }

    #[test]
    fn row_slices_c_fortran_f32_and_truncated() {
        let dir = std::env::temp_dir().join(format!("parki-npy-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 5 x 3, value 10 i + j
        let c: Vec<f64> = (0..5).flat_map(|i| (0..3).map(move |j| (10 * i + j) as f64)).collect();
        let f: Vec<f64> = (0..3).flat_map(|j| (0..5).map(move |i| (10 * i + j) as f64)).collect();
        let cases = [
            ("c.npy", raw("{'descr': '<f8', 'fortran_order': False, 'shape': (5, 3), }", &c, false)),
            ("f.npy", raw("{'descr': '<f8', 'fortran_order': True, 'shape': (5, 3), }", &f, false)),
            ("c4.npy", raw("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3), }", &c, true)),
            ("be8.npy", big_endian(raw("{'descr': '>f8', 'fortran_order': False, 'shape': (5, 3), }", &c, false), 8)),
            ("be4.npy", big_endian(raw("{'descr': '>f4', 'fortran_order': False, 'shape': (5, 3), }", &c, true), 4)),
        ];
        for (name, bytes) in &cases {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            let h = super::read_header(&p, "x").unwrap();
            assert_eq!((h.rows(), h.columns()), (5, 3), "{name}");
            h.expect_columns(3, "x").unwrap();
            assert!(h.expect_columns(1, "x").is_err());
            let rows = super::read_rows(&p, "x", &h, 1..4).unwrap();
            assert_eq!(rows, c[3..12].to_vec(), "{name}");
            assert!(super::read_rows(&p, "x", &h, 4..6).is_err());
        }
        // a file cut after 3 rows: the first rows read, the last ones name the truncation
        let mut cut = cases[0].1.clone();
        cut.truncate(cut.len() - 2 * 3 * 8);
        let p = dir.join("cut.npy");
        std::fs::write(&p, &cut).unwrap();
        let h = super::read_header(&p, "sources.positions").unwrap();
        assert_eq!(super::read_rows(&p, "x", &h, 0..3).unwrap(), c[..9].to_vec());
        let e = super::read_rows(&p, "sources.positions", &h, 3..5).unwrap_err().to_string();
        assert!(e.contains("truncated") && e.contains("sources.positions"), "{e}");
        // ranks writing their rows into one file
        let p = dir.join("out.npy");
        let off = super::create(&p, &[5, 3]).unwrap();
        super::write_rows(&p, off, 3, 3, &c[9..]).unwrap();
        super::write_rows(&p, off, 0, 3, &c[..9]).unwrap();
        let a = super::read(&p, "out").unwrap();
        assert_eq!((a.shape.clone(), a.data.clone()), (vec![5, 3], c.clone()));
        std::fs::remove_dir_all(&dir).ok();
    }
}
