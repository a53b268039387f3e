//! The partition table: the MBR entries read from sector 0.

use super::error::MbrError;
use serde::Serialize;

/// One MBR partition entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Partition {
    pub index: u8,
    pub kind: u8,
    pub bootable: bool,
    pub start_sector: u64,
    pub sectors: u64,
}

impl Partition {
    pub fn offset(&self) -> u64 {
        self.start_sector * 512
    }
}

/// Parses the MBR in the first 512 bytes of the image.
pub fn parse_mbr(sector0: &[u8]) -> Result<Vec<Partition>, MbrError> {
    if sector0.len() < 512 || sector0[510] != 0x55 || sector0[511] != 0xAA {
        return Err(MbrError::NoSignature);
    }
    let mut parts = Vec::new();
    for i in 0..4 {
        let e = &sector0[446 + i * 16..446 + (i + 1) * 16];
        let kind = e[4];
        let start = u32::from_le_bytes([e[8], e[9], e[10], e[11]]) as u64;
        let sectors = u32::from_le_bytes([e[12], e[13], e[14], e[15]]) as u64;
        if kind == 0 || sectors == 0 {
            continue;
        }
        parts.push(Partition {
            index: i as u8 + 1,
            kind,
            bootable: e[0] == 0x80,
            start_sector: start,
            sectors,
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbr_entries() {
        let mut s = vec![0u8; 512];
        s[510] = 0x55;
        s[511] = 0xAA;
        s[446] = 0x80;
        s[446 + 4] = 0x0c;
        s[446 + 8..446 + 12].copy_from_slice(&8192u32.to_le_bytes());
        s[446 + 12..446 + 16].copy_from_slice(&524288u32.to_le_bytes());
        let p = parse_mbr(&s).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].offset(), 8192 * 512);
        assert!(p[0].bootable);
        assert!(parse_mbr(&[0u8; 512]).is_err());
    }
}
