//! Python bindings for keyplane: the `keyplane._keyplane` extension module,
//! re-exported by the pure-Python package `keyplane` (see
//! `python/keyplane/__init__.py` and the type stubs next to it).
//!
//! Keys may be `bytes`-like, `str` (UTF-8) or `int` (0..2^64, encoded as 8
//! little-endian bytes like `keyplane::key::u64_key`), or NumPy arrays of
//! those; every structure registered in `keyplane-any` is available by name.
#![deny(missing_docs)]

use keyplane_any::{AnyControl, AnyLookup, Opts, STRUCTURES, split_frames};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyInt, PyString};

create_exception!(keyplane, KeyplaneError, PyException, "Base class of every keyplane error.");
create_exception!(
    keyplane,
    CorruptError,
    KeyplaneError,
    "Bytes that are not a valid keyplane blob or delta: bad magic, truncated, checksum mismatch, unsupported version."
);
create_exception!(
    keyplane,
    WrongKindError,
    KeyplaneError,
    "A valid keyplane object of the wrong kind (a delta passed as a blob, another structure's delta)."
);
create_exception!(
    keyplane,
    DeltaMismatchError,
    KeyplaneError,
    "A delta that does not fit this table (out of order, lost, repeated, or from another table). The table is unchanged."
);
create_exception!(
    keyplane,
    ValueTooWideError,
    KeyplaneError,
    "A value wider than the table's value_bits (values are never truncated)."
);
create_exception!(
    keyplane,
    InvalidParameterError,
    KeyplaneError,
    "An unknown structure or option, or an option or value_bits out of range."
);
create_exception!(
    keyplane,
    CapacityError,
    KeyplaneError,
    "Construction failed or the table cannot hold more keys with its parameters."
);
create_exception!(
    keyplane,
    UnsupportedError,
    KeyplaneError,
    "The structure does not support this operation or blob kind."
);

fn to_py(e: keyplane::Error) -> PyErr {
    use keyplane::Error as E;
    let m = e.to_string();
    match e {
        E::KindMismatch { .. } => WrongKindError::new_err(m),
        E::DeltaMismatch(_) => DeltaMismatchError::new_err(m),
        E::ValueTooWide { .. } => ValueTooWideError::new_err(m),
        E::InvalidParameter(_) | E::InvalidValueBits { .. } => InvalidParameterError::new_err(m),
        E::BuildFailed(_) | E::CapacityExceeded(_) => CapacityError::new_err(m),
        E::Unsupported(_) => UnsupportedError::new_err(m),
        _ => CorruptError::new_err(m),
    }
}

/// Appends the canonical bytes of one key.
fn key_into(obj: &Bound<'_, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        buf.extend_from_slice(b.as_bytes());
    } else if let Ok(s) = obj.cast::<PyString>() {
        buf.extend_from_slice(s.to_cow()?.as_bytes());
    } else if obj.is_instance_of::<PyInt>() || obj.hasattr("__index__")? && !obj.hasattr("__len__")? {
        let v: u64 = obj.extract().map_err(|_| PyValueError::new_err("integer keys must be in 0..2**64"))?;
        buf.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        buf.extend_from_slice(&b.to_vec());
    } else if let Ok(v) = obj.extract::<Vec<u8>>() {
        buf.extend_from_slice(&v);
    } else {
        return Err(PyTypeError::new_err(format!(
            "keys must be bytes, str or int, not {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
        )));
    }
    Ok(())
}

fn key(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut b = Vec::new();
    key_into(obj, &mut b)?;
    Ok(b)
}

/// `get_many`'s `(values, found)`.
type ManyResult<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<bool>>);
/// `(name, summary, [(option, help)])`.
type StructureRow = (&'static str, &'static str, Vec<(&'static str, &'static str)>);

/// Many keys in one buffer.
struct Keys {
    data: Vec<u8>,
    offs: Vec<usize>,
}

impl Keys {
    fn len(&self) -> usize {
        self.offs.len() - 1
    }
    fn get(&self, i: usize) -> &[u8] {
        &self.data[self.offs[i]..self.offs[i + 1]]
    }
}

/// Collects keys from an iterable or a NumPy array (integer arrays take a
/// fast path).
fn keys_of(obj: &Bound<'_, PyAny>) -> PyResult<Keys> {
    let mut k = Keys { data: Vec::new(), offs: vec![0] };
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, u64>>() {
        for v in a.as_array().iter() {
            k.data.extend_from_slice(&v.to_le_bytes());
            k.offs.push(k.data.len());
        }
        return Ok(k);
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, i64>>() {
        for v in a.as_array().iter() {
            let v = u64::try_from(*v).map_err(|_| PyValueError::new_err("integer keys must be in 0..2**64"))?;
            k.data.extend_from_slice(&v.to_le_bytes());
            k.offs.push(k.data.len());
        }
        return Ok(k);
    }
    if obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("expected an iterable of keys, got a single bytes/str key"));
    }
    for item in obj.try_iter()? {
        key_into(&item?, &mut k.data)?;
        k.offs.push(k.data.len());
    }
    Ok(k)
}

fn values_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, u64>>() {
        return Ok(a.as_array().to_vec());
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, i64>>() {
        return a
            .as_array()
            .iter()
            .map(|v| u64::try_from(*v).map_err(|_| ValueTooWideError::new_err(format!("negative value {v}"))))
            .collect();
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        out.push(item.extract::<u64>().map_err(|_| {
            ValueTooWideError::new_err(format!(
                "value {} is not an integer in 0..2**64",
                item.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?);
    }
    Ok(out)
}

fn opts_of(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Opts> {
    let mut o = Opts::new();
    if let Some(d) = kwargs {
        for (k, v) in d.iter() {
            let k: String = k.extract()?;
            let v = if let Ok(b) = v.extract::<bool>() { b.to_string() } else { v.str()?.to_cow()?.into_owned() };
            o.push(&k, &v);
        }
    }
    Ok(o)
}

/// The control form of a table: keeps every key and value, builds the
/// table, and turns each update into delta bytes for lookup forms.
///
/// `Table(structure="othello", value_bits=8, **options)` is empty;
/// `Table.build(keys, values, ...)` constructs in bulk.
#[pyclass(module = "keyplane")]
struct Table {
    inner: AnyControl,
}

#[pymethods]
impl Table {
    /// An empty table.
    #[new]
    #[pyo3(signature = (structure = "othello", value_bits = 8, **options))]
    fn new(structure: &str, value_bits: u32, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let o = opts_of(options)?;
        Ok(Table { inner: AnyControl::empty(structure, value_bits, &o).map_err(to_py)? })
    }

    /// Builds a table from keys and values (iterables or NumPy arrays of
    /// equal length). A repeated key: the last value wins.
    #[staticmethod]
    #[pyo3(signature = (keys, values, structure = "othello", value_bits = 8, **options))]
    fn build(
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        structure: &str,
        value_bits: u32,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let o = opts_of(options)?;
        let k = keys_of(keys)?;
        let v = values_of(values)?;
        if k.len() != v.len() {
            return Err(PyValueError::new_err(format!("{} keys but {} values", k.len(), v.len())));
        }
        let structure = structure.to_string();
        let inner = py
            .detach(|| AnyControl::build(&structure, (0..k.len()).map(|i| (k.get(i), v[i])), value_bits, &o))
            .map_err(to_py)?;
        Ok(Table { inner })
    }

    /// Inserts or overwrites a key; returns the delta (bytes) that brings a
    /// lookup form up to date.
    fn insert<'py>(&mut self, py: Python<'py>, key: &Bound<'py, PyAny>, value: u64) -> PyResult<Bound<'py, PyBytes>> {
        let k = self::key(key)?;
        let d = self.inner.insert(&k, value).map_err(to_py)?;
        Ok(PyBytes::new(py, &d))
    }

    /// Removes a key; returns the delta, or `None` when the key was absent.
    fn remove<'py>(&mut self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = self::key(key)?;
        Ok(self.inner.remove(&k).map_err(to_py)?.map(|d| PyBytes::new(py, &d)))
    }

    /// The value of a key, or `None` (exact: the control form knows every key).
    fn get(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.inner.get(&self::key(key)?))
    }

    /// A fresh lookup form of the current state.
    fn export(&self) -> Lookup {
        Lookup { inner: self.inner.export() }
    }

    /// The structure's name.
    #[getter]
    fn structure(&self) -> &'static str {
        self.inner.name()
    }

    /// Value width in bits.
    #[getter]
    fn value_bits(&self) -> u32 {
        self.inner.value_bits()
    }

    /// Heap bytes held by the control form.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.get(&self::key(key)?).is_some())
    }

    fn __repr__(&self) -> String {
        format!("<keyplane.Table {} n={} value_bits={}>", self.inner.name(), self.inner.len(), self.inner.value_bits())
    }
}

/// The data-plane form of a table: small, answers lookups, applies deltas
/// in place, serialises to a checksummed blob. Thread-safe.
#[pyclass(module = "keyplane", frozen)]
struct Lookup {
    inner: AnyLookup,
}

#[pymethods]
impl Lookup {
    /// Decodes a blob of any structure (from `to_bytes`, `keyplane build`, C or Rust).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Lookup { inner: AnyLookup::from_bytes(data).map_err(to_py)? })
    }

    /// The framed, checksummed blob.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// The value of a key; `None` when the structure can tell it is absent.
    /// (Structures without fingerprints return an arbitrary value for keys
    /// never inserted; see `detects_absent`.)
    fn get(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.inner.get(&self::key(key)?))
    }

    /// Vectorised lookup: returns `(values, found)`, a `uint64` array (0
    /// where absent) and a `bool` array.
    fn get_many<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<ManyResult<'py>> {
        let k = keys_of(keys)?;
        let n = k.len();
        let (vals, found) = py.detach(|| {
            let mut vals = vec![0u64; n];
            let mut found = vec![false; n];
            let mut refs: [&[u8]; 32] = [&[]; 32];
            let mut out = [None; 32];
            let mut i = 0;
            while i < n {
                let m = (n - i).min(32);
                for (j, r) in refs[..m].iter_mut().enumerate() {
                    *r = k.get(i + j);
                }
                self.inner.get_batch(&refs[..m], &mut out[..m]);
                for j in 0..m {
                    vals[i + j] = out[j].unwrap_or(0);
                    found[i + j] = out[j].is_some();
                }
                i += m;
            }
            (vals, found)
        });
        Ok((PyArray1::from_vec(py, vals), PyArray1::from_vec(py, found)))
    }

    /// Typed vectorised lookup of 8-byte integer keys: `keys` is a 1-D
    /// `numpy.uint64` array (each key is its 8 little-endian bytes, as
    /// `get_many` and `--key-format u64` encode integers); returns
    /// `(values, found)` like `get_many`, with no per-key Python objects and
    /// each key answered on the structure's `get_u64` path (Othello and
    /// SetSep hash the integer directly). Raises `TypeError` for another dtype.
    fn get_u64_array<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<ManyResult<'py>> {
        let a = keys.extract::<PyReadonlyArray1<'_, u64>>().map_err(|_| {
            PyTypeError::new_err("get_u64_array expects a 1-D numpy.uint64 array (use keys.astype(numpy.uint64))")
        })?;
        let view = a.as_array();
        let owned;
        let ks: &[u64] = match view.as_slice() {
            Some(s) => s,
            None => {
                owned = view.to_vec();
                &owned
            }
        };
        let (vals, found) = py.detach(|| {
            let mut vals = vec![0u64; ks.len()];
            let mut found = vec![false; ks.len()];
            let rd = self.inner.reader();
            for ((&k, v), f) in ks.iter().zip(vals.iter_mut()).zip(found.iter_mut()) {
                if let Some(x) = rd.get_u64(k) {
                    *v = x;
                    *f = true;
                }
            }
            (vals, found)
        });
        Ok((PyArray1::from_vec(py, vals), PyArray1::from_vec(py, found)))
    }

    /// Typed batched lookup of 8-byte integer keys: `keys` is a 1-D
    /// `numpy.uint64` array; returns `(values, found)` like `get_many`, with
    /// `values[i], found[i]` what `get_u64_array` gives for `keys[i]`. The
    /// array's memory is read in place (no per-key conversion, no copy for a
    /// contiguous array) and answered in batches on the structure's typed
    /// batch path (Othello and the full cuckoo map hash the integers
    /// directly and prefetch a batch's lines; other structures take
    /// `get_many`'s batch path on each key's bytes), without the GIL.
    /// Raises `TypeError` for another dtype or a non-1-D array.
    fn get_batch_u64<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<ManyResult<'py>> {
        let a = keys.extract::<PyReadonlyArray1<'_, u64>>().map_err(|_| {
            PyTypeError::new_err("get_batch_u64 expects a 1-D numpy.uint64 array (use keys.astype(numpy.uint64))")
        })?;
        let view = a.as_array();
        let owned;
        let ks: &[u64] = match view.as_slice() {
            Some(s) => s,
            None => {
                owned = view.to_vec();
                &owned
            }
        };
        let (vals, found) = py.detach(|| {
            const CHUNK: usize = 64;
            let mut vals = vec![0u64; ks.len()];
            let mut found = vec![false; ks.len()];
            let rd = self.inner.reader();
            let mut out = [None; CHUNK];
            for ((kc, vc), fc) in ks.chunks(CHUNK).zip(vals.chunks_mut(CHUNK)).zip(found.chunks_mut(CHUNK)) {
                let o = &mut out[..kc.len()];
                rd.get_batch_u64(kc, o);
                for ((a, v), f) in o.iter().zip(vc.iter_mut()).zip(fc.iter_mut()) {
                    *v = a.unwrap_or(0);
                    *f = a.is_some();
                }
            }
            (vals, found)
        });
        Ok((PyArray1::from_vec(py, vals), PyArray1::from_vec(py, found)))
    }

    /// Applies a delta (or several concatenated deltas, as `keyplane update`
    /// writes them) in place. Raises `DeltaMismatchError` for a delta out of
    /// order; the deltas before it stay applied.
    fn apply(&self, py: Python<'_>, delta: &[u8]) -> PyResult<()> {
        let frames = split_frames(delta).map_err(to_py)?;
        if frames.is_empty() {
            return Err(CorruptError::new_err("empty delta"));
        }
        py.detach(|| {
            for f in frames {
                self.inner.apply_bytes(f)?;
            }
            Ok(())
        })
        .map_err(to_py)
    }

    /// The structure's name.
    #[getter]
    fn structure(&self) -> &'static str {
        self.inner.name()
    }

    /// Wire kind code of the blob.
    #[getter]
    fn kind(&self) -> u16 {
        self.inner.kind().code()
    }

    /// Value width in bits, when the structure exposes it.
    #[getter]
    fn value_bits(&self) -> Option<u32> {
        self.inner.value_bits()
    }

    /// Every heap byte the lookup form holds.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// True when `get` answers `None` for (most) keys never inserted.
    #[getter]
    fn detects_absent(&self) -> bool {
        self.inner.rejects_aliens()
    }

    /// The table id (hex): deltas of any other table are refused with
    /// `DeltaMismatchError`.
    #[getter]
    fn table_id(&self) -> String {
        self.inner.table_id().to_string()
    }

    /// The key format recorded when the table was built (`"ipv4"`, ...), or `None`.
    #[getter]
    fn key_format(&self) -> Option<&'static str> {
        self.inner.key_format().map(|f| f.name())
    }

    /// Sequence number of the last delta applied.
    #[getter]
    fn seq(&self) -> u64 {
        self.inner.seq()
    }

    /// Structure parameters (as strings): value bits, sequence number, how
    /// absent keys are detected, then the structure's own parameters.
    fn describe(&self) -> Vec<(&'static str, String)> {
        let mut d = vec![
            ("value_bits", self.inner.value_bits().map_or_else(String::new, |v| v.to_string())),
            ("seq", self.inner.seq().to_string()),
            ("table_id", self.inner.table_id().to_string()),
            ("absent_keys", self.inner.absent_keys().to_string()),
        ];
        d.extend(self.inner.describe());
        d
    }

    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.inner.get(&self::key(key)?).ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.clone().unbind()))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.get(&self::key(key)?).is_some())
    }

    fn __repr__(&self) -> String {
        format!("<keyplane.Lookup {} {} bytes>", self.inner.name(), self.inner.memory_bytes())
    }
}

/// Names of the structures this build supports, with their options.
#[pyfunction]
fn structures() -> Vec<StructureRow> {
    STRUCTURES.iter().map(|s| (s.name, s.summary, s.options.to_vec())).collect()
}

/// The keyplane extension module.
#[pymodule]
fn _keyplane(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Table>()?;
    m.add_class::<Lookup>()?;
    m.add_function(wrap_pyfunction!(structures, m)?)?;
    m.add("KeyplaneError", py.get_type::<KeyplaneError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("WrongKindError", py.get_type::<WrongKindError>())?;
    m.add("DeltaMismatchError", py.get_type::<DeltaMismatchError>())?;
    m.add("ValueTooWideError", py.get_type::<ValueTooWideError>())?;
    m.add("InvalidParameterError", py.get_type::<InvalidParameterError>())?;
    m.add("CapacityError", py.get_type::<CapacityError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
