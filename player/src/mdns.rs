//! mDNS advertisement of `_pfx._tcp`.
