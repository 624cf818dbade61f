//! serde for the state's persistent maps and sets (`imbl::OrdMap`, `OrdSet`), used through
//! `#[serde(with = ...)]`, instead of imbl's own implementation.
//!
//! imbl's deserializer sizes a buffer from the length the input claims before reading a single
//! entry: a malformed or hostile record claiming 2^40 entries aborted the process on the
//! allocation (found by our codec tests). Here entries are inserted as they are read, so memory
//! grows with the input actually present, and no intermediate buffer holds the whole map.
//!
//! The encoding is exactly serde's for `BTreeMap` and `BTreeSet` (a length, then the entries in
//! key order), so states written while the maps were standard ones decode unchanged.

use std::fmt;
use std::marker::PhantomData;

use imbl::{OrdMap, OrdSet};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

pub(crate) mod ord_map {
    use super::*;

    pub(crate) fn serialize<K, V, S>(map: &OrdMap<K, V>, serializer: S) -> Result<S::Ok, S::Error>
    where
        K: Serialize + Ord + Clone,
        V: Serialize + Clone,
        S: Serializer,
    {
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }

    pub(crate) fn deserialize<'de, K, V, D>(deserializer: D) -> Result<OrdMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord + Clone,
        V: Deserialize<'de> + Clone,
        D: Deserializer<'de>,
    {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K, V> Visitor<'de> for MapVisitor<K, V>
        where
            K: Deserialize<'de> + Ord + Clone,
            V: Deserialize<'de> + Clone,
        {
            type Value = OrdMap<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = OrdMap::new();
                while let Some((key, value)) = access.next_entry()? {
                    map.insert(key, value);
                }
                Ok(map)
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

pub(crate) mod ord_set {
    use super::*;

    pub(crate) fn serialize<T, S>(set: &OrdSet<T>, serializer: S) -> Result<S::Ok, S::Error>
    where
        T: Serialize + Ord + Clone,
        S: Serializer,
    {
        let mut out = serializer.serialize_seq(Some(set.len()))?;
        for item in set {
            out.serialize_element(item)?;
        }
        out.end()
    }

    pub(crate) fn deserialize<'de, T, D>(deserializer: D) -> Result<OrdSet<T>, D::Error>
    where
        T: Deserialize<'de> + Ord + Clone,
        D: Deserializer<'de>,
    {
        struct SetVisitor<T>(PhantomData<T>);

        impl<'de, T> Visitor<'de> for SetVisitor<T>
        where
            T: Deserialize<'de> + Ord + Clone,
        {
            type Value = OrdSet<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut set = OrdSet::new();
                while let Some(item) = access.next_element()? {
                    set.insert(item);
                }
                Ok(set)
            }
        }

        deserializer.deserialize_seq(SetVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Persistent {
        #[serde(with = "ord_map")]
        map: OrdMap<Vec<u8>, u64>,
        #[serde(with = "ord_set")]
        set: OrdSet<(u64, Vec<u8>)>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Standard {
        map: BTreeMap<Vec<u8>, u64>,
        set: BTreeSet<(u64, Vec<u8>)>,
    }

    fn encode<T: Serialize>(value: &T) -> Vec<u8> {
        bincode::serde::encode_to_vec(value, bincode::config::standard()).expect("encode")
    }

    fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())
            .map(|(value, _)| value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn encodes_exactly_as_the_standard_collections_and_decodes_them() {
        let standard = Standard {
            map: (0..100u64).map(|i| (i.to_be_bytes().to_vec(), i)).collect(),
            set: (0..50u64).map(|i| (i % 7, vec![i as u8])).collect(),
        };
        let persistent = Persistent {
            map: standard.map.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            set: standard.set.iter().cloned().collect(),
        };
        assert_eq!(encode(&persistent), encode(&standard));
        assert_eq!(decode::<Persistent>(&encode(&standard)), Ok(persistent));
    }

    /// A record claiming far more entries than it holds is an error, not an allocation of that
    /// size (imbl's own deserializer aborted the process on it).
    #[test]
    fn a_huge_claimed_length_is_an_error_not_an_allocation() {
        // bincode's varint: 0xfd, then a u64: 2^40 entries claimed, none present.
        let mut bytes = vec![0xfd];
        bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        let error = decode::<Persistent>(&bytes).expect_err("nothing follows the length");
        assert!(!error.is_empty());
    }
}
