//! The list of structures the front ends know, and the type-erased
//! [`AnyLookup`] / [`AnyControl`] generated from it.

use crate::{Opts, Structure};
use keyplane::describe::{AbsentKeys, Describe};
use keyplane::ext::wire::{Frame, Kind};
use keyplane::key::KeyFormat;
use keyplane::lineage::Lineage;
use keyplane::{ControlTable, Error, LookupTable, ReadHandle, Result, TableId, Wire};

/// Static facts about one registered structure.
#[derive(Debug, Clone, Copy)]
pub struct StructureInfo {
    /// Name used on the command line and in Python.
    pub name: &'static str,
    /// One-line description.
    pub summary: &'static str,
    /// Build options `(name, help)`.
    pub options: &'static [(&'static str, &'static str)],
    /// Wire kind of the lookup form.
    pub lookup_kind: Kind,
}

/// Declares the registered structures, one line each:
/// `Type = module::path;` where `module::Control` implements
/// [`keyplane::describe::Configure`] and `module::Lookup` implements
/// [`keyplane::describe::Describe`] (name, options, parameters and absent-key
/// detection all come from the structure itself). The macro defines
/// `pub struct Type` and its [`Structure`] impl.
macro_rules! registry {
    (
        $( $ty:ident = $($module:ident)::+ ; )*
        ; others { $( $other:expr ),* $(,)? }
    ) => {
        $( registry!(@define $ty = $($module)::+); )*

        /// Every frame kind this build knows, each declared by its own
        /// structure: the lookup blob, delta and control snapshot of every
        /// registered structure, then the kinds of the structures outside
        /// the registry (LPM, the Concury core). See [`identify`].
        pub const KINDS: &[Kind] = &[
            $(
                <<$ty as Structure>::Lookup as Wire>::KIND,
                <<$ty as Structure>::Delta as Wire>::KIND,
                <<$ty as Structure>::Control as keyplane::Snapshot>::SNAPSHOT_KIND,
            )*
            $( $other, )*
        ];

        /// Every structure this build knows, in registry order.
        pub const STRUCTURES: &[StructureInfo] = &[
            $( StructureInfo {
                name: <$ty as Structure>::NAME,
                summary: <$ty as Structure>::SUMMARY,
                options: <$ty as Structure>::OPTIONS,
                lookup_kind: <$ty as Structure>::LOOKUP_KIND,
            }, )*
        ];

        /// A lookup form of any registered structure.
        #[non_exhaustive]
        pub enum AnyLookup {
            $(
                #[doc = concat!("`", stringify!($ty), "` lookup form.")]
                $ty(<$ty as Structure>::Lookup),
            )*
        }

        /// A per-thread read handle on an [`AnyLookup`]
        /// ([`AnyLookup::reader`], see [`LookupTable::reader`]).
        #[non_exhaustive]
        pub enum AnyReader<'a> {
            $(
                #[doc = concat!("`", stringify!($ty), "` read handle.")]
                $ty(<<$ty as Structure>::Lookup as LookupTable>::Reader<'a>),
            )*
        }

        impl std::fmt::Debug for AnyReader<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let name = match self { $( AnyReader::$ty(_) => <$ty as Structure>::NAME, )* };
                write!(f, "AnyReader({name})")
            }
        }

        impl AnyReader<'_> {
            /// See [`ReadHandle::get`].
            #[inline]
            pub fn get(&self, key: &[u8]) -> Option<u64> {
                match self { $( AnyReader::$ty(r) => r.get(key), )* }
            }

            /// See [`ReadHandle::get_batch`].
            #[inline]
            pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
                match self { $( AnyReader::$ty(r) => r.get_batch(keys, out), )* }
            }

            /// See [`ReadHandle::get_u64`]: `get(&u64_key(key))`.
            #[inline]
            pub fn get_u64(&self, key: u64) -> Option<u64> {
                match self { $( AnyReader::$ty(r) => r.get_u64(key), )* }
            }

            /// See [`ReadHandle::get_batch_u64`]: `get_u64` of every key.
            #[inline]
            pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
                match self { $( AnyReader::$ty(r) => r.get_batch_u64(keys, out), )* }
            }
        }

        /// A control form of any registered structure.
        #[non_exhaustive]
        // One long-lived control handle per table: the variant size gap is
        // irrelevant next to the tables' heap state, and boxing would cost a
        // pointer chase on every update.
        #[allow(clippy::large_enum_variant)]
        pub enum AnyControl {
            $(
                #[doc = concat!("`", stringify!($ty), "` control form.")]
                $ty(<$ty as Structure>::Control),
            )*
        }

        // Manual Debug: the structures' own types need not implement it.
        impl std::fmt::Debug for AnyLookup {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "AnyLookup({}, {} bytes)", self.name(), self.memory_bytes())
            }
        }

        impl std::fmt::Debug for AnyControl {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "AnyControl({}, {} keys)", self.name(), self.len())
            }
        }

        impl AnyLookup {
            /// Decodes a lookup blob of any registered kind (the kind code
            /// in the frame header selects the structure).
            pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
                let info = Frame::inspect(bytes)?;
                $(
                    if info.kind == <$ty as Structure>::LOOKUP_KIND {
                        return Ok(AnyLookup::$ty(<<$ty as Structure>::Lookup as Wire>::from_bytes(bytes)?));
                    }
                )*
                Err(not_a_lookup(info.kind))
            }

            /// The structure's registered name.
            pub fn name(&self) -> &'static str {
                match self { $( AnyLookup::$ty(_) => <$ty as Structure>::NAME, )* }
            }

            /// The wire kind of this lookup form.
            pub fn kind(&self) -> Kind {
                match self { $( AnyLookup::$ty(_) => <$ty as Structure>::LOOKUP_KIND, )* }
            }

            /// See [`LookupTable::get`].
            #[inline]
            pub fn get(&self, key: &[u8]) -> Option<u64> {
                match self { $( AnyLookup::$ty(t) => t.get(key), )* }
            }

            /// See [`LookupTable::get_batch`].
            #[inline]
            pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
                match self { $( AnyLookup::$ty(t) => t.get_batch(keys, out), )* }
            }

            /// See [`LookupTable::get_u64`]: `get(&u64_key(key))`.
            #[inline]
            pub fn get_u64(&self, key: u64) -> Option<u64> {
                match self { $( AnyLookup::$ty(t) => t.get_u64(key), )* }
            }

            /// See [`LookupTable::get_batch_u64`]: `get_u64` of every key.
            #[inline]
            pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
                match self { $( AnyLookup::$ty(t) => t.get_batch_u64(keys, out), )* }
            }

            /// A per-thread read handle (see [`LookupTable::reader`]).
            pub fn reader(&self) -> AnyReader<'_> {
                match self { $( AnyLookup::$ty(t) => AnyReader::$ty(t.reader()), )* }
            }

            /// Decodes one framed delta and applies it in place.
            pub fn apply_bytes(&self, delta: &[u8]) -> Result<()> {
                match self {
                    $( AnyLookup::$ty(t) => t
                        .apply(&<<$ty as Structure>::Delta as Wire>::from_bytes(delta).map_err(|e| relabel(e, delta))?), )*
                }
            }

            /// The framed, checksummed blob.
            pub fn to_bytes(&self) -> Vec<u8> {
                match self { $( AnyLookup::$ty(t) => t.to_bytes(), )* }
            }

            /// Every heap byte the lookup form holds.
            pub fn memory_bytes(&self) -> usize {
                match self { $( AnyLookup::$ty(t) => t.memory_bytes(), )* }
            }

            /// Parameters for display (structure-specific).
            pub fn describe(&self) -> Vec<(&'static str, String)> {
                match self { $( AnyLookup::$ty(t) => t.params(), )* }
            }

            /// Value width.
            pub fn value_bits(&self) -> Option<u32> {
                match self { $( AnyLookup::$ty(t) => Some(Describe::value_bits(t)), )* }
            }

            /// Sequence number of the last delta applied.
            pub fn seq(&self) -> u64 {
                match self { $( AnyLookup::$ty(t) => Describe::seq(t), )* }
            }

            /// Table id and key format.
            pub fn lineage(&self) -> Lineage {
                match self { $( AnyLookup::$ty(t) => Describe::lineage(t), )* }
            }

            /// The table id (deltas of other tables are refused).
            pub fn table_id(&self) -> TableId {
                self.lineage().id
            }

            /// The key format recorded when the table was built, if any.
            pub fn key_format(&self) -> Option<KeyFormat> {
                self.lineage().key_format
            }

            /// Number of keys, when the lookup form stores it.
            pub fn key_count(&self) -> Option<usize> {
                match self { $( AnyLookup::$ty(t) => t.key_count(), )* }
            }

            /// Keys the lookup form is sized for, when known.
            pub fn capacity(&self) -> Option<usize> {
                match self { $( AnyLookup::$ty(t) => t.capacity(), )* }
            }

            /// How absent keys are told apart.
            pub fn absent_keys(&self) -> AbsentKeys {
                match self { $( AnyLookup::$ty(t) => t.absent_keys(), )* }
            }

            /// True when every inserted key reads exactly its own value.
            pub fn exact_for_stored_keys(&self) -> bool {
                match self { $( AnyLookup::$ty(t) => t.exact_for_stored_keys(), )* }
            }

            /// True when `get` answers `None` for keys never inserted
            /// (up to the structure's false-positive rate).
            pub fn rejects_aliens(&self) -> bool {
                self.absent_keys().detected()
            }
        }

        impl AnyControl {
            /// Builds structure `name` from `(key, value)` pairs with options.
            pub fn build<I, K>(name: &str, items: I, value_bits: u32, opts: &Opts) -> Result<Self>
            where
                I: IntoIterator<Item = (K, u64)>,
                K: AsRef<[u8]>,
            {
                $(
                    if name == <$ty as Structure>::NAME {
                        return Ok(AnyControl::$ty(<$ty as Structure>::build(items, value_bits, opts)?));
                    }
                )*
                Err(unknown_structure(name))
            }

            /// Loads a control-form snapshot of any registered structure
            /// (the kind code in the frame header selects it); see
            /// [`keyplane::Snapshot`]. Nothing is rebuilt or rehashed.
            pub fn from_snapshot(bytes: &[u8]) -> Result<Self> {
                let info = keyplane::snapshot::peek(bytes)?;
                $(
                    if info.kind == <<$ty as Structure>::Control as keyplane::Snapshot>::SNAPSHOT_KIND {
                        return Ok(AnyControl::$ty(keyplane::Snapshot::from_snapshot(bytes)?));
                    }
                )*
                Err(Error::Unsupported(format!("{} files are not supported by this build of keyplane", label(info.kind))))
            }

            /// The whole control form as a snapshot ([`keyplane::Snapshot`]).
            pub fn snapshot(&self) -> Vec<u8> {
                match self { $( AnyControl::$ty(c) => keyplane::Snapshot::snapshot(c), )* }
            }

            /// An empty table of structure `name`.
            pub fn empty(name: &str, value_bits: u32, opts: &Opts) -> Result<Self> {
                Self::build(name, std::iter::empty::<(&[u8], u64)>(), value_bits, opts)
            }

            /// The structure's registered name.
            pub fn name(&self) -> &'static str {
                match self { $( AnyControl::$ty(_) => <$ty as Structure>::NAME, )* }
            }

            /// Inserts or overwrites; returns the framed delta.
            pub fn insert(&mut self, key: &[u8], value: u64) -> Result<Vec<u8>> {
                match self { $( AnyControl::$ty(c) => Ok(c.insert(key, value)?.to_bytes()), )* }
            }

            /// Removes a key; returns the framed delta, or `None` when the key was absent.
            pub fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
                match self { $( AnyControl::$ty(c) => Ok(c.remove(key)?.map(|d| d.to_bytes())), )* }
            }

            /// Exact lookup.
            pub fn get(&self, key: &[u8]) -> Option<u64> {
                match self { $( AnyControl::$ty(c) => c.get(key), )* }
            }

            /// Number of keys.
            pub fn len(&self) -> usize {
                match self { $( AnyControl::$ty(c) => c.len(), )* }
            }

            /// True when the table holds no key.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Value width.
            pub fn value_bits(&self) -> u32 {
                match self { $( AnyControl::$ty(c) => c.value_bits(), )* }
            }

            /// A fresh lookup form of the current state.
            pub fn export(&self) -> AnyLookup {
                match self { $( AnyControl::$ty(c) => AnyLookup::$ty(c.export()), )* }
            }

            /// Heap bytes held by the control form.
            pub fn memory_bytes(&self) -> usize {
                match self { $( AnyControl::$ty(c) => c.memory_bytes(), )* }
            }

            /// Table id and key format (see [`keyplane::lineage`]).
            pub fn lineage(&self) -> Lineage {
                match self { $( AnyControl::$ty(c) => c.lineage(), )* }
            }

            /// Sets table id and key format; call it before exporting.
            pub fn set_lineage(&mut self, l: Lineage) {
                match self { $( AnyControl::$ty(c) => c.set_lineage(l), )* }
            }

            /// Records the key format (stored in every blob and delta).
            pub fn set_key_format(&mut self, f: Option<KeyFormat>) {
                let l = self.lineage();
                self.set_lineage(Lineage { key_format: f, ..l });
            }
        }
    };

    (@define $ty:ident = $($module:ident)::+) => {
        #[doc = concat!("`", stringify!($($module)::+), "` in the front ends (see [`Structure`]).")]
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl Structure for $ty {
            type Control = $($module)::+::Control;
            type Lookup = $($module)::+::Lookup;
            type Delta = $($module)::+::Delta;
        }
    };
}

fn unknown_structure(name: &str) -> Error {
    let names: Vec<&str> = STRUCTURES.iter().map(|s| s.name).collect();
    Error::InvalidParameter(format!("unknown structure {name:?} (this build knows: {})", names.join(", ")))
}

fn not_a_lookup(kind: Kind) -> Error {
    // Kind codes are `structure << 8 | role`; role 2 is a delta.
    match identify(kind.code()) {
        Some(k) if k.code() & 0xff == 2 => {
            Error::KindMismatch { expected: "a lookup blob".into(), found: k.label().into() }
        }
        Some(k) => Error::Unsupported(format!("{} blobs are not supported by this build of keyplane", k.label())),
        None => Error::Unsupported(format!("unknown object kind code {:#06x}", kind.code())),
    }
}

/// Identifies a frame's kind code among [`KINDS`] (with its full label,
/// e.g. `"othello delta"`); `None` for a code no structure of this build
/// declares.
pub fn identify(code: u16) -> Option<Kind> {
    KINDS.iter().copied().find(|k| k.code() == code)
}

/// The label of a kind read from a frame header: the structure's own
/// (`"othello delta"`) when [`identify`] knows the code, else its role.
pub fn label(kind: Kind) -> &'static str {
    identify(kind.code()).map_or(kind.label(), Kind::label)
}

/// Names the found object of a [`Error::KindMismatch`] by its structure's
/// label (the core's frame check knows only the kind it expected).
fn relabel(e: Error, bytes: &[u8]) -> Error {
    match (e, Frame::inspect(bytes)) {
        (Error::KindMismatch { expected, .. }, Ok(info)) => {
            Error::KindMismatch { expected, found: label(info.kind).into() }
        }
        (e, _) => e,
    }
}

// ─── The registry: one line per structure ────────────────────────────────
registry! {
    Othello       = keyplane::othello;
    Ludo          = keyplane::ludo;
    SetSep        = keyplane::setsep;
    Cuckoo        = keyplane::cuckoo;
    PartialCuckoo = keyplane::cuckoo::partial;
    Fht           = keyplane::fht;
    Fpt           = keyplane::fpt;
    Cfw           = keyplane::cfw;
    Bfw           = keyplane::bfw;
    ; others {
        <keyplane::lpm::Lookup as Wire>::KIND,
        <keyplane::lpm::Delta as Wire>::KIND,
        <keyplane::lpm::Control as keyplane::Snapshot>::SNAPSHOT_KIND,
        <keyplane::lb::DataPlane as Wire>::KIND,
        <keyplane::lb::Delta as Wire>::KIND,
        <keyplane::lb::Control as keyplane::Snapshot>::SNAPSHOT_KIND,
    }
}
