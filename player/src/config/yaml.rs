use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A configuration file that could not be used. `Display` names the file first, so an
/// operator reading a journal line knows which file to open.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // The io error is in the message, not chained, so `{:#}` does not print it twice.
    #[error("{path}: cannot read: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The YAML parser's message already carries "line L column C" and a snippet.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// Parsed, but a value is not acceptable (out of range, missing file, ...). `at` is
    /// the line and column of the key the message names, when the text was at hand:
    /// `FILE:LINE:COLUMN: message`, as editors and terminals understand it.
    #[error("{path}{}: {message}", at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        message: String,
        at: Option<(usize, usize)>,
    },
}

impl ConfigError {
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            message: message.into(),
            at: None,
        }
    }

    /// Gives an `Invalid` error about `origin` the line of the key its message starts
    /// with, found in `text` (origin's contents). Errors about other files (a profile the
    /// show names) keep theirs.
    pub fn located(self, text: &str, origin: &Path) -> Self {
        match self {
            ConfigError::Invalid {
                path,
                message,
                at: None,
            } if path == origin => {
                let at = super::locate::key_path_of(&message)
                    .and_then(|k| super::locate::locate(text, k));
                ConfigError::Invalid { path, message, at }
            }
            other => other,
        }
    }
}

pub fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })
}

pub fn from_yaml_file<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    from_yaml_str(&read_text(path)?, path)
}

/// `origin` is only used in messages; pass the path the text came from.
pub fn from_yaml_str<T: DeserializeOwned>(text: &str, origin: &Path) -> Result<T, ConfigError> {
    serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.to_path_buf(),
        // The parser's snippet points at `<input>:L:C`; name the file there instead, so
        // the message carries FILE:LINE:COLUMN as editors and terminals understand it.
        message: e
            .to_string()
            .replace(" --> <input>:", &format!(" --> {}:", origin.display())),
    })
}

/// A whole number an operator writes in a config, with an error in the operator's words
/// (`fps: expected a whole number of frames per second such as 40 or 60, found "fast"`)
/// instead of the deserializer's `invalid u32`. The range is checked by the config's own
/// validation, which knows the limits.
struct Whole {
    field: &'static str,
    expected: &'static str,
}

impl Whole {
    fn wrong<E: serde::de::Error>(&self, found: impl std::fmt::Display) -> E {
        E::custom(format!(
            "{}: expected {}, found {found}",
            self.field, self.expected
        ))
    }
}

impl<'de> serde::de::Visitor<'de> for Whole {
    type Value = u32;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expected)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u32, E> {
        u32::try_from(v).map_err(|_| self.wrong(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u32, E> {
        u32::try_from(v).map_err(|_| self.wrong(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u32, E> {
        Err(self.wrong(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u32, E> {
        Err(self.wrong(format_args!("{v:?}")))
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<u32, E> {
        Err(self.wrong(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<u32, E> {
        Err(self.wrong("nothing"))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<u32, A::Error> {
        Err(self.wrong("a list"))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<u32, A::Error> {
        Err(self.wrong("a mapping"))
    }
}

fn whole<'de, D: serde::Deserializer<'de>>(
    d: D,
    field: &'static str,
    expected: &'static str,
) -> Result<u32, D::Error> {
    d.deserialize_any(Whole { field, expected })
}

/// `fps:` of the show config.
pub(crate) fn fps<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(
        d,
        "fps",
        "a whole number of frames per second such as 40 or 60",
    )
}

/// `multicast_ttl:` of the show config.
pub(crate) fn multicast_ttl<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(
        d,
        "multicast_ttl",
        "a whole number of router hops such as 1 (the poles' own network)",
    )
}

/// `profile_window_s:` of the show config.
pub(crate) fn profile_window_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(
        d,
        "profile_window_s",
        "a whole number of seconds such as 10",
    )
}

/// `brightness:` of the show config: a number, whole or not (`1` is as good as `1.0`).
pub(crate) fn brightness<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
    struct Fraction;
    impl Fraction {
        fn wrong<E: serde::de::Error>(found: impl std::fmt::Display) -> E {
            E::custom(format!(
                "brightness: expected a number from 0.0 (dark) to 1.0 (full) such as 0.8, found {found}"
            ))
        }
    }
    impl<'de> serde::de::Visitor<'de> for Fraction {
        type Value = f32;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number from 0.0 to 1.0")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<f32, E> {
            Err(Self::wrong(format_args!("{v:?}")))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<f32, E> {
            Err(Self::wrong(v))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<f32, E> {
            Err(Self::wrong("nothing"))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<f32, A::Error> {
            Err(Self::wrong("a list"))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<f32, A::Error> {
            Err(Self::wrong("a mapping"))
        }
    }
    d.deserialize_any(Fraction)
}
