//! The content hash (sha256) and the show id, with their text forms.

use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// A sequence's sha256. Its text form is 64 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(Sha256::digest(bytes).into())
    }

    pub fn hex(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Why a text is not a hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a sha256: give 64 lower-case hex digits")]
pub struct BadHash(pub String);

impl FromStr for Hash {
    type Err = BadHash;
    fn from_str(s: &str) -> Result<Hash, BadHash> {
        let bad = || BadHash(s.chars().take(80).collect());
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Hash(out))
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hash, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A show's id: the first 16 hex digits of the sha256 of its show.yaml and its
/// name→hash map, so the same show pushed twice is the same show.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ShowId(String);

impl ShowId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of this content. Pure.
    pub fn of(show_yaml: &[u8], files: &std::collections::BTreeMap<String, Hash>) -> ShowId {
        let mut h = Sha256::new();
        h.update(b"pfx-show-v1\n");
        h.update((show_yaml.len() as u64).to_le_bytes());
        h.update(show_yaml);
        for (name, hash) in files {
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(hash.0);
        }
        let full = Hash(h.finalize().into()).to_string();
        ShowId(full[..16].to_string())
    }
}

impl fmt::Display for ShowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a text is not a show id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a show id: give 16 lower-case hex digits")]
pub struct BadShowId(pub String);

impl FromStr for ShowId {
    type Err = BadShowId;
    fn from_str(s: &str) -> Result<ShowId, BadShowId> {
        if s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(ShowId(s.to_string()))
        } else {
            Err(BadShowId(s.chars().take(80).collect()))
        }
    }
}

impl<'de> serde::Deserialize<'de> for ShowId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ShowId, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_text_round_trips_and_refuses_junk() {
        let h = Hash::of(b"abc");
        assert_eq!(
            h.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(h.to_string().parse::<Hash>(), Ok(h));
        for bad in ["", "abc", &"A".repeat(64), &"g".repeat(64), &"0".repeat(63)] {
            assert!(bad.parse::<Hash>().is_err(), "{bad}");
        }
        assert!("0123456789abcdef".parse::<ShowId>().is_ok());
        assert!("../../etc/passwd".parse::<ShowId>().is_err());
    }

    #[test]
    fn show_id_depends_on_every_part() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("a.fseq".to_string(), Hash::of(b"1"));
        let a = ShowId::of(b"x", &m);
        assert_eq!(a, ShowId::of(b"x", &m));
        assert_ne!(a, ShowId::of(b"y", &m));
        m.insert("a.fseq".to_string(), Hash::of(b"2"));
        assert_ne!(a, ShowId::of(b"x", &m));
    }
}
