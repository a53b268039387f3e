//! HTTP Basic credentials against an argon2 hash, with failed attempts rate-limited per
//! client address and password checks bounded for all clients together (an argon2 check
//! costs real CPU on a Pi). The limiter is pure: times come in as milliseconds.

use std::collections::HashMap;
use std::net::IpAddr;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64ct::{Base64, Encoding};
use sha2::{Digest, Sha256};

/// Failures allowed per address within `WINDOW_MS` before it is locked out.
pub const MAX_FAILURES: u32 = 5;
pub const WINDOW_MS: u64 = 60_000;
/// First lockout; it doubles with each further lockout up to `MAX_LOCK_MS`.
pub const FIRST_LOCK_MS: u64 = 60_000;
pub const MAX_LOCK_MS: u64 = 15 * 60_000;
/// Password checks per second, all clients together.
pub const CHECKS_PER_S: u32 = 4;
/// How long a verified `Authorization` header is remembered.
pub const REMEMBER_MS: u64 = 10 * 60_000;
/// Addresses tracked at most; the oldest entries go first beyond this.
const MAX_TRACKED: usize = 4096;

/// `Authorization: Basic base64(user:password)` → (user, password). None for anything else.
pub fn parse_basic(header: &[u8]) -> Option<(String, String)> {
    let s = std::str::from_utf8(header).ok()?.trim();
    let (scheme, rest) = s.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let rest = rest.trim();
    if rest.len() > 1024 {
        return None;
    }
    let raw = Base64::decode_vec(rest).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// A new argon2id PHC string for `password` (default parameters, random salt).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut rand_core::OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// Whether `password` matches the PHC string `hash`. Constant-time in the crate.
pub fn verify_password(hash: &str, password: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(h) => argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok(),
        Err(_) => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Credentials accepted.
    Ok,
    /// No usable credentials: ask for them (401), no penalty.
    Missing,
    /// Wrong user or password (401); counted.
    Wrong,
    /// Too many failures from this address, or too many checks overall (429).
    Limited,
}

#[derive(Debug, Default, Clone)]
struct Track {
    window_start: u64,
    failures: u32,
    locked_until: u64,
    lockouts: u32,
    last: u64,
}

/// The rate limits and the remembered headers. Pure: `now_ms` is passed in.
#[derive(Debug, Default)]
pub struct Limiter {
    by_addr: HashMap<IpAddr, Track>,
    second: u64,
    checks_this_second: u32,
    remembered: HashMap<[u8; 32], u64>,
}

impl Limiter {
    /// Before checking a password from `addr`: may we? A remembered header needs no check.
    pub fn admit(&mut self, addr: IpAddr, now_ms: u64) -> Verdict {
        if self.is_locked(addr, now_ms) {
            return Verdict::Limited;
        }
        let sec = now_ms / 1000;
        if sec != self.second {
            self.second = sec;
            self.checks_this_second = 0;
        }
        if self.checks_this_second >= CHECKS_PER_S {
            return Verdict::Limited;
        }
        self.checks_this_second += 1;
        Verdict::Ok
    }

    pub fn is_locked(&self, addr: IpAddr, now_ms: u64) -> bool {
        self.by_addr
            .get(&addr)
            .is_some_and(|t| now_ms < t.locked_until)
    }

    /// A wrong password from `addr`.
    pub fn failed(&mut self, addr: IpAddr, now_ms: u64) {
        if self.by_addr.len() >= MAX_TRACKED
            && !self.by_addr.contains_key(&addr)
            && let Some(oldest) = self
                .by_addr
                .iter()
                .min_by_key(|(_, t)| t.last)
                .map(|(a, _)| *a)
        {
            self.by_addr.remove(&oldest);
        }
        let t = self.by_addr.entry(addr).or_default();
        t.last = now_ms;
        if now_ms.saturating_sub(t.window_start) > WINDOW_MS {
            t.window_start = now_ms;
            t.failures = 0;
        }
        t.failures += 1;
        if t.failures >= MAX_FAILURES {
            let lock = FIRST_LOCK_MS
                .saturating_mul(1u64 << t.lockouts.min(10))
                .min(MAX_LOCK_MS);
            t.locked_until = now_ms + lock;
            t.lockouts += 1;
            t.failures = 0;
            t.window_start = now_ms;
        }
    }

    /// A correct password from `addr`: its record goes, and the header is remembered.
    pub fn succeeded(&mut self, addr: IpAddr, header: &[u8], now_ms: u64) {
        self.by_addr.remove(&addr);
        if self.remembered.len() >= 64 {
            self.remembered.retain(|_, t| now_ms < *t);
        }
        if self.remembered.len() < 64 {
            self.remembered.insert(digest(header), now_ms + REMEMBER_MS);
        }
    }

    /// Whether this exact header was verified within `REMEMBER_MS`.
    pub fn remembered(&self, header: &[u8], now_ms: u64) -> bool {
        self.remembered
            .get(&digest(header))
            .is_some_and(|t| now_ms < *t)
    }
}

fn digest(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(u: &str, p: &str) -> String {
        format!(
            "Basic {}",
            Base64::encode_string(format!("{u}:{p}").as_bytes())
        )
    }

    #[test]
    fn basic_header_parses() {
        assert_eq!(
            parse_basic(basic("admin", "s:ecret").as_bytes()),
            Some(("admin".into(), "s:ecret".into()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
        assert_eq!(parse_basic(b"Basic"), None);
        assert_eq!(parse_basic(b"\xff\xfe"), None);
        assert_eq!(
            parse_basic(format!("Basic {}", Base64::encode_string(b"nocolon")).as_bytes()),
            None
        );
    }

    #[test]
    fn hash_round_trip() {
        let h = hash_password("hunter2").expect("hash");
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password(&h, "hunter2"));
        assert!(!verify_password(&h, "hunter3"));
        assert!(!verify_password("not a hash", "hunter2"));
    }

    #[test]
    fn five_failures_lock_the_address_and_it_doubles() {
        let a: IpAddr = "10.0.0.9".parse().expect("ip");
        let b: IpAddr = "10.0.0.10".parse().expect("ip");
        let mut l = Limiter::default();
        let mut now = 1_000_000;
        for _ in 0..MAX_FAILURES {
            assert_eq!(l.admit(a, now), Verdict::Ok);
            l.failed(a, now);
            now += 1000;
        }
        assert_eq!(l.admit(a, now), Verdict::Limited);
        assert_eq!(
            l.admit(b, now),
            Verdict::Ok,
            "another address is not locked"
        );
        now += FIRST_LOCK_MS;
        assert_eq!(l.admit(a, now), Verdict::Ok, "the lock ends");
        for _ in 0..MAX_FAILURES {
            l.failed(a, now);
        }
        assert!(
            l.is_locked(a, now + FIRST_LOCK_MS + 1),
            "second lockout is longer"
        );
        assert!(!l.is_locked(a, now + 2 * FIRST_LOCK_MS + 1));
    }

    #[test]
    fn checks_per_second_are_bounded_for_everyone() {
        let mut l = Limiter::default();
        let now = 5_000;
        for i in 0..CHECKS_PER_S {
            let ip: IpAddr = format!("10.0.1.{i}").parse().expect("ip");
            assert_eq!(l.admit(ip, now), Verdict::Ok);
        }
        let ip: IpAddr = "10.0.2.1".parse().expect("ip");
        assert_eq!(l.admit(ip, now + 10), Verdict::Limited);
        assert_eq!(l.admit(ip, now + 1000), Verdict::Ok);
    }

    #[test]
    fn success_is_remembered_then_forgotten() {
        let a: IpAddr = "10.0.0.9".parse().expect("ip");
        let mut l = Limiter::default();
        l.failed(a, 0);
        l.succeeded(a, b"Basic xyz", 0);
        assert!(l.remembered(b"Basic xyz", 1));
        assert!(!l.remembered(b"Basic xyw", 1));
        assert!(!l.remembered(b"Basic xyz", REMEMBER_MS));
    }
}
