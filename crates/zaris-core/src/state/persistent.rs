//! serde for the state's persistent maps and sets (`imbl::OrdMap`, `OrdSet`), used through
//! `#[serde(with = ...)]`, instead of imbl's own implementation.
//!
//! imbl's deserializer sizes a buffer from the length the input claims before reading a single
//! entry: a malformed or hostile record claiming 2^40 entries aborted the process on the
//! allocation (found by our codec tests). Here the buffer starts at most [`MAX_PREALLOCATED`]
//! entries long and grows with the input actually present.
//!
//! The entries arrive in key order (they were written by iterating the map), so the tree is
//! built from them in one pass (`from_sorted_vec`, our patch to imbl: third_party/imbl) instead
//! of by one insert each: at a million leases that was about half a second of every restart.
//! Input out of order or with repeated keys is still accepted, with insert's meaning (the last
//! of equal keys wins), as serde's `BTreeMap` accepts it.
//!
//! The encoding is exactly serde's for `BTreeMap` and `BTreeSet` (a length, then the entries in
//! key order), so states written while the maps were standard ones decode unchanged.

use std::fmt;
use std::marker::PhantomData;

use imbl::{OrdMap, OrdSet};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// The most entries a map's buffer is sized for up front, whatever length the input claims.
const MAX_PREALLOCATED: usize = 1 << 16;

fn buffer<T>(claimed: Option<usize>) -> Vec<T> {
    Vec::with_capacity(claimed.unwrap_or(0).min(MAX_PREALLOCATED))
}

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
                let mut entries = buffer(access.size_hint());
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(OrdMap::from_sorted_vec(entries))
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
                let mut items = buffer(access.size_hint());
                while let Some(item) = access.next_element()? {
                    items.push(item);
                }
                Ok(OrdSet::from_sorted_vec(items))
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

    /// Entries out of order or repeated (never written by us, but a record may be damaged)
    /// decode as inserting them in turn would: sorted, the last of equal keys kept.
    #[test]
    fn entries_out_of_order_or_repeated_decode_as_inserts_would() {
        #[derive(Debug, PartialEq, Deserialize)]
        struct Map(#[serde(with = "ord_map")] OrdMap<u64, u64>);
        #[derive(Debug, PartialEq, Deserialize)]
        struct Set(#[serde(with = "ord_set")] OrdSet<u64>);

        // bincode writes a map exactly as a sequence of pairs.
        let pairs: Vec<(u64, u64)> = vec![(5, 1), (1, 2), (5, 3), (9, 4), (1, 5)];
        let map = decode::<Map>(&encode(&pairs)).expect("decodes");
        let inserted: OrdMap<u64, u64> = pairs.into_iter().collect();
        assert_eq!(map.0, inserted);
        assert_eq!(map.0.get(&5), Some(&3));

        let set = decode::<Set>(&encode(&vec![3u64, 1, 3, 2])).expect("decodes");
        assert_eq!(set.0, OrdSet::from(vec![1, 2, 3]));
    }

    /// A map built from a snapshot's sorted entries behaves as one built by inserts through
    /// every later change (the bulk build packs its tree nodes full; splits and merges follow).
    #[test]
    fn a_decoded_map_stays_correct_under_later_changes() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Map(#[serde(with = "ord_map")] OrdMap<u64, u64>);

        let sorted: BTreeMap<u64, u64> = (0..20_000).map(|i| (i * 2, i)).collect();
        let mut map = decode::<Map>(&encode(&sorted)).expect("decodes").0;
        let mut model = sorted;
        let mut x: u64 = 7;
        for step in 0..60_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let key = (x >> 33) % 50_000;
            if step % 3 == 0 {
                assert_eq!(map.remove(&key), model.remove(&key));
            } else {
                assert_eq!(map.insert(key, step), model.insert(key, step));
            }
        }
        assert!(map.iter().map(|(k, v)| (*k, *v)).eq(model.into_iter()));
        assert_eq!(map.len(), map.iter().count());
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
