//! The collision table: full names for fingerprint collisions, bucket
//! overflows and "not stored" markers (§5.1, §6.2).

use crate::error::Result;
use crate::wire::{Reader, Writer};
use hashbrown::HashTable;

/// One CT entry: a full name and either a value or the "not stored" marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CtEntry {
    pub h: u64,
    pub name: Box<[u8]>,
    /// `None`: the name is known not to be stored here (default port).
    pub val: Option<u64>,
}

/// Collision table keyed by the structure's own name hash (one hash per lookup).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ct {
    t: HashTable<CtEntry>,
    name_bytes: usize,
}

impl Ct {
    #[inline]
    pub fn len(&self) -> usize {
        self.t.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    #[inline]
    pub fn get(&self, h: u64, name: &[u8]) -> Option<&CtEntry> {
        self.t.find(h, |e| e.h == h && &*e.name == name)
    }

    pub fn put(&mut self, h: u64, name: &[u8], val: Option<u64>) {
        match self.t.find_mut(h, |e| e.h == h && &*e.name == name) {
            Some(e) => e.val = val,
            None => {
                self.name_bytes += name.len();
                self.t.insert_unique(h, CtEntry { h, name: name.into(), val }, |e| e.h);
            }
        }
    }

    pub fn del(&mut self, h: u64, name: &[u8]) -> bool {
        match self.t.find_entry(h, |e| e.h == h && &*e.name == name) {
            Ok(e) => {
                let (e, _) = e.remove();
                self.name_bytes -= e.name.len();
                true
            }
            Err(_) => false,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CtEntry> + '_ {
        self.t.iter()
    }

    /// Heap bytes: table slots, control bytes and the names.
    pub fn memory_bytes(&self) -> usize {
        self.t.capacity() * (std::mem::size_of::<CtEntry>() + 1) + self.name_bytes
    }

    /// Entries as a sorted list (deterministic encoding).
    pub fn sorted(&self) -> Vec<(&[u8], Option<u64>)> {
        let mut v: Vec<(&[u8], Option<u64>)> = self.t.iter().map(|e| (&*e.name, e.val)).collect();
        v.sort_unstable();
        v
    }
}

pub(crate) fn encode_val(w: &mut Writer, v: Option<u64>) {
    match v {
        None => {
            w.u8(0);
        }
        Some(v) => {
            w.u8(1).varint(v);
        }
    }
}

pub(crate) fn decode_val(r: &mut Reader<'_>, vbits: u32) -> Result<Option<u64>> {
    match r.u8()? {
        0 => Ok(None),
        1 => {
            let v = r.varint()?;
            Reader::ensure(v & !crate::mask(vbits) == 0, || format!("CT value {v:#x} wider than {vbits} bits"))?;
            Ok(Some(v))
        }
        t => Err(crate::Error::Corrupt(format!("CT value tag {t}"))),
    }
}
