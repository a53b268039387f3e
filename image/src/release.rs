//! A build's release identity, pure: its version (how bundles are ordered) and the update
//! CA certificate the image carries (never a key).

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub numbers: Vec<u64>,
}

/// `1.4.2` or `1.4.2+anything`: dot-separated decimal numbers, then an optional build tag
/// that does not take part in the order.
pub fn parse_version(v: &str) -> Result<Version, String> {
    if v.is_empty() || v.len() > 64 {
        return Err("use 1 to 64 characters, e.g. 1.4.2".into());
    }
    let (core, tag) = v.split_once('+').unwrap_or((v, ""));
    if !tag
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-.~".contains(&b))
    {
        return Err(format!(
            "build tag {tag:?}: use letters, digits, '-', '.' and '~'"
        ));
    }
    let numbers = core
        .split('.')
        .map(|n| {
            if n.is_empty() || n.len() > 9 || !n.bytes().all(|b| b.is_ascii_digit()) {
                Err(format!(
                    "{n:?} is not a number: a version is dotted numbers (1.4.2), optionally +tag"
                ))
            } else {
                n.parse::<u64>().map_err(|e| e.to_string())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Version { numbers })
}

/// A PEM certificate and nothing secret: the image must never carry a signing key.
pub fn check_cert_pem(text: &str) -> Result<(), String> {
    if text.contains("PRIVATE KEY") {
        return Err(
            "holds a private key: give the CA certificate only; the signing key stays with the operator".into(),
        );
    }
    if !text.contains("-----BEGIN CERTIFICATE-----") || !text.contains("-----END CERTIFICATE-----")
    {
        return Err("not a PEM certificate (no BEGIN/END CERTIFICATE lines)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_by_numbers_and_ignore_the_tag() {
        let v = |s: &str| parse_version(s).unwrap();
        assert!(v("1.10.0") > v("1.9.9"));
        assert!(v("2") > v("1.99"));
        assert_eq!(v("1.4.2+abc"), v("1.4.2+xyz"));
        for bad in [
            "", "1..2", "v1.2", "1.2-rc1", "1.2+a b", "1.2+a/b", "1.2.", "+1",
        ] {
            assert!(parse_version(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_key_is_never_taken_for_a_certificate() {
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert!(check_cert_pem(cert).is_ok());
        let both = format!("{cert}-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
        assert!(check_cert_pem(&both).unwrap_err().contains("private key"));
        assert!(check_cert_pem("hello").is_err());
    }
}
