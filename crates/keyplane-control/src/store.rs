//! The durable embedded store (redb): table records and entries.
//!
//! What is durable: for every table its record ([`TableRecord`]: structure,
//! options, key format, topology, sequence number) and its entries (key ->
//! value). One redb write transaction per group commit holds every batch of
//! the group, and redb commits it with an fsync before any of them is
//! acknowledged ([`redb::Durability::Immediate`]), so an acknowledged write
//! survives `kill -9` and power loss, and a write that was not committed is
//! absent as a whole.
//!
//! What is not: the delta log. Deltas only apply to lookup forms exported
//! by the control form that emitted them, and the control form is rebuilt
//! from the entries (`from_items`) when the service starts, which starts a
//! new epoch: subscribers of an older epoch resync from one blob. See
//! docs/control.md.

use crate::error::Result;
use redb::{Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::collections::BTreeMap;
use std::path::Path;

const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("tables");

/// A table's durable description.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TableRecord {
    /// Table name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Structure name.
    #[prost(string, tag = "2")]
    pub structure: String,
    /// Value bits.
    #[prost(uint32, tag = "3")]
    pub value_bits: u32,
    /// Structure options.
    #[prost(btree_map = "string, string", tag = "4")]
    pub options: BTreeMap<String, String>,
    /// Key format (protocol enum value).
    #[prost(int32, tag = "5")]
    pub key_format: i32,
    /// Sequence number after the last committed update.
    #[prost(uint64, tag = "6")]
    pub sequence: u64,
    /// Topology file text (network-wide tables).
    #[prost(string, tag = "7")]
    pub topology: String,
    /// Failed links of the topology, as "a b" endpoint pairs.
    #[prost(string, repeated, tag = "8")]
    pub down_links: Vec<String>,
}

/// A table's entries, sorted by key.
pub type Entries = Vec<(Vec<u8>, u64)>;

/// One change to the store, part of a group commit.
#[derive(Debug)]
pub enum Op {
    /// Create or replace a table record (an existing table keeps its entries).
    Record(TableRecord),
    /// Drop a table with its entries.
    Drop(String),
    /// Set (`Some`) or delete (`None`) one entry.
    Entry {
        /// Table name.
        table: String,
        /// Key.
        key: Vec<u8>,
        /// New value or deletion.
        value: Option<u64>,
    },
}

fn entries_def(name: &str) -> TableDefinition<'_, &'static [u8], u64> {
    // The record table is "tables"; entry tables live in their own namespace.
    TableDefinition::new(name)
}

fn entries_name(table: &str) -> String {
    format!("e/{table}")
}

/// The embedded store: one redb file `keyplane.redb` in the store directory.
pub struct Store {
    db: Database,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let db = Database::create(dir.join("keyplane.redb"))?;
        let tx = db.begin_write()?;
        tx.open_table(RECORDS)?;
        tx.commit()?;
        Ok(Self { db })
    }

    /// Every table record with its entries (sorted by key).
    pub fn load(&self) -> Result<Vec<(TableRecord, Entries)>> {
        let tx = self.db.begin_read()?;
        let recs = tx.open_table(RECORDS)?;
        let mut out = Vec::new();
        for item in recs.iter()? {
            let (_, v) = item?;
            let rec = <TableRecord as prost::Message>::decode(v.value())
                .map_err(|e| crate::ControlError::Store(format!("table record does not decode: {e}")))?;
            let name = entries_name(&rec.name);
            let mut entries = Vec::new();
            match tx.open_table(entries_def(&name)) {
                Ok(t) => {
                    entries.reserve(t.len()? as usize);
                    for e in t.iter()? {
                        let (k, v) = e?;
                        entries.push((k.value().to_vec(), v.value()));
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(e.into()),
            }
            out.push((rec, entries));
        }
        Ok(out)
    }

    /// Entries of one table (sorted by key).
    pub fn entries(&self, table: &str) -> Result<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        self.scan(table, None, |_, k, v| {
            out.push((k.to_vec(), v));
            true
        })?;
        Ok(out)
    }

    /// Calls `f(sequence, key, value)` for the entries of `table` (all of
    /// them in key order, or `keys`), in one consistent snapshot whose
    /// table sequence number is `sequence`; returns that sequence, or `None`
    /// when the table does not exist. `f` returning false stops the scan.
    pub fn scan(
        &self,
        table: &str,
        keys: Option<&[Vec<u8>]>,
        mut f: impl FnMut(u64, &[u8], u64) -> bool,
    ) -> Result<Option<u64>> {
        let tx = self.db.begin_read()?;
        let recs = tx.open_table(RECORDS)?;
        let Some(rec) = recs.get(table)? else { return Ok(None) };
        let rec = <TableRecord as prost::Message>::decode(rec.value())
            .map_err(|e| crate::ControlError::Store(format!("table record does not decode: {e}")))?;
        let name = entries_name(table);
        let t = match tx.open_table(entries_def(&name)) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Some(rec.sequence)),
            Err(e) => return Err(e.into()),
        };
        match keys {
            Some(keys) => {
                for k in keys {
                    if let Some(v) = t.get(k.as_slice())? {
                        if !f(rec.sequence, k, v.value()) {
                            break;
                        }
                    }
                }
            }
            None => {
                for e in t.iter()? {
                    let (k, v) = e?;
                    if !f(rec.sequence, k.value(), v.value()) {
                        break;
                    }
                }
            }
        }
        Ok(Some(rec.sequence))
    }

    /// Applies `ops` in one durable transaction (fsync before returning).
    pub fn commit(&self, ops: &[Op]) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate);
        {
            let mut recs = tx.open_table(RECORDS)?;
            let mut cur: Option<(String, redb::Table<'_, &'static [u8], u64>)> = None;
            for op in ops {
                match op {
                    Op::Record(r) => {
                        recs.insert(r.name.as_str(), prost::Message::encode_to_vec(r).as_slice())?;
                    }
                    Op::Drop(name) => {
                        cur = None;
                        recs.remove(name.as_str())?;
                        let en = entries_name(name);
                        tx.delete_table(entries_def(&en))?;
                    }
                    Op::Entry { table, key, value } => {
                        let en = entries_name(table);
                        if cur.as_ref().is_none_or(|(n, _)| *n != en) {
                            cur = Some((en.clone(), tx.open_table(entries_def(&en))?));
                        }
                        let Some((_, t)) = cur.as_mut() else { continue };
                        match value {
                            Some(v) => {
                                t.insert(key.as_slice(), *v)?;
                            }
                            None => {
                                t.remove(key.as_slice())?;
                            }
                        }
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }
}
