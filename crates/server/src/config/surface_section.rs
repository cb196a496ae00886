//! A surface's own config section, read through its plug-in: the surface names its top-level
//! key and the environment variables holding its secrets, and reads its section with the same
//! guarantees as a built-in one (an unknown key or a bad value fails the load with the file,
//! line and column; `config check` reads it). The typed result is kept by key in
//! [`SurfaceSections`], where the surface finds it again when the App is built.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::faults::Faults;
use super::{LoadError, Text};

/// What a surface reads from the config file.
pub trait SurfaceSection: Send + Sync {
    /// Its top-level key: `"discord"` reads `[discord]`.
    fn key(&self) -> &'static str;

    /// The environment variables holding its secrets (never the config file): read at start
    /// with the others, redacted from agent text, and named by its summary line when missing.
    fn secret_envs(&self) -> &'static [&'static str] {
        &[]
    }

    /// Reads and checks its section; `None` when the file has none. Faults come from
    /// `section` ([`SectionText::typed`] for serde's, [`SectionText::fault_at`] for checks).
    fn read(&self, section: &SectionText<'_>) -> Result<Option<SectionValue>, LoadError>;
}

/// A surface's typed section, as its `read` made it.
pub type SectionValue = Arc<dyn Any + Send + Sync>;

/// The config text a surface reads its section from.
pub struct SectionText<'a> {
    pub(super) text: &'a Text<'a>,
    pub(super) key: &'static str,
}

impl SectionText<'_> {
    /// The section as `T`, with the parser's positions: a fault names the file, line, column
    /// and key. `T` must carry `#[serde(deny_unknown_fields)]`, or a misspelt key passes
    /// silently. `toml::Spanned` fields carry offsets for [`SectionText::fault_at`].
    pub fn typed<T: DeserializeOwned>(&self) -> Result<Option<T>, LoadError> {
        let de = toml::Deserializer::parse(self.text.text).map_err(|e| self.text.de(&e))?;
        OneSection::<T> {
            key: self.key,
            wanted: std::marker::PhantomData,
        }
        .deserialize(de)
        .map_err(|e| self.text.de(&e))
    }

    /// A fault at a byte offset of the text (a `Spanned` value's start).
    pub fn fault_at(&self, offset: usize, message: impl fmt::Display) -> LoadError {
        self.text.at(offset, message)
    }
}

/// Reads one top-level key of the document as `T`, skipping every other key.
struct OneSection<T> {
    key: &'static str,
    wanted: std::marker::PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for OneSection<T> {
    type Value = Option<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for OneSection<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a document with a [{}] table", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.key {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Every plug-in surface's typed section, by key, and the secrets they name.
#[derive(Clone, Default)]
pub struct SurfaceSections {
    /// The keys the load read (each surface's, whether or not the file has its section).
    read: BTreeSet<&'static str>,
    values: BTreeMap<&'static str, SectionValue>,
    secret_envs: Vec<&'static str>,
}

impl SurfaceSections {
    /// The section `key` read as `T`; `None` when the file has none (or it is not a `T`).
    pub fn get<T: Any>(&self, key: &str) -> Option<&T> {
        self.values.get(key)?.downcast_ref::<T>()
    }

    /// Whether the load read `key`'s section: a surface whose key it did not read was not
    /// given to `load_with`, and its section (if the file had one) failed the load.
    pub fn were_read(&self, key: &str) -> bool {
        self.read.contains(key)
    }

    /// The environment variables every plug-in surface reads its secrets from.
    pub fn secret_envs(&self) -> &[&'static str] {
        &self.secret_envs
    }

    pub(super) fn read(
        text: &Text<'_>,
        surfaces: &[&dyn SurfaceSection],
        faults: &mut Faults,
    ) -> Self {
        let mut out = SurfaceSections::default();
        for surface in surfaces {
            let section = SectionText {
                text,
                key: surface.key(),
            };
            out.read.insert(surface.key());
            if let Some(Some(value)) = faults.take(surface.read(&section)) {
                out.values.insert(surface.key(), value);
            }
            out.secret_envs.extend_from_slice(surface.secret_envs());
        }
        out
    }
}

impl fmt::Debug for SurfaceSections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SurfaceSections")
            .field("read", &self.read)
            .field("present", &self.values.keys().collect::<Vec<_>>())
            .field("secret_envs", &self.secret_envs)
            .finish()
    }
}
