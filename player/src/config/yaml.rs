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
    /// Parsed, but a value is not acceptable (out of range, missing file, ...).
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ConfigError {
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

pub fn from_yaml_file<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    from_yaml_str(&text, path)
}

/// `origin` is only used in messages; pass the path the text came from.
pub fn from_yaml_str<T: DeserializeOwned>(text: &str, origin: &Path) -> Result<T, ConfigError> {
    serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.to_path_buf(),
        message: e.to_string(),
    })
}
