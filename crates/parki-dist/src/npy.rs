//! Reading and writing NumPy `.npy` files (format versions 1–3): `(N,)` and `(N, 3)` arrays of
//! little-endian `float64` or `float32`, C or Fortran order.

use std::io::Write;
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

/// Reads `path`; `field` names the input in error messages.
pub fn read(path: &Path, field: &str) -> Result<Array> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.into(), message: format!("{field}: {e}") })?;
    parse(&bytes, &format!("{field} ({})", path.display()))
}

/// Parses the bytes of a `.npy` file.
pub fn parse(bytes: &[u8], field: &str) -> Result<Array> {
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
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let width = match descr {
        "<f8" | "=f8" | "f8" => 8,
        "<f4" | "=f4" | "f4" => 4,
        other => return Err(shape_err(field, "float64 ('<f8') or float32 ('<f4') data", format!("dtype '{other}'"))),
    };
    let count: usize = shape.iter().product();
    let body = &bytes[start + hlen..];
    if body.len() < count * width {
        return Err(shape_err(field, &format!("{count} values"), format!("{} bytes of data", body.len())));
    }
    let mut data: Vec<f64> = (0..count)
        .map(|i| {
            let b = &body[i * width..(i + 1) * width];
            if width == 8 {
                f64::from_le_bytes(b.try_into().expect("8 bytes"))
            } else {
                f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64
            }
        })
        .collect();
    if fortran && shape.len() == 2 {
        let (n, m) = (shape[0], shape[1]);
        let mut t = vec![0.0; count];
        for i in 0..n {
            for j in 0..m {
                t[i * m + j] = data[j * n + i];
            }
        }
        data = t;
    }
    Ok(Array { shape, data })
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

/// Writes `data` with `shape` as a float64 `.npy` file.
pub fn write(path: &Path, shape: &[usize], data: &[f64]) -> Result<()> {
    assert_eq!(shape.iter().product::<usize>(), data.len());
    let dims = match shape {
        [n] => format!("({n},)"),
        s => format!("({})", s.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {dims}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 8);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let io = |e: std::io::Error| Error::Io { path: path.into(), message: e.to_string() };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(&out).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::{parse, write};

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
}
