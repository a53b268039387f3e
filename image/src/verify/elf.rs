//! The ELF machine of the binaries against the target.

use super::error::ElfError;
/// The ELF header's machine field, named.
pub fn elf_machine(head: &[u8]) -> Result<&'static str, ElfError> {
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    let little = head[5] == 1;
    let m = if little {
        u16::from_le_bytes([head[18], head[19]])
    } else {
        u16::from_be_bytes([head[18], head[19]])
    };
    Ok(match m {
        0xB7 => "aarch64",
        0x3E => "x86_64",
        0x28 => "arm",
        0x03 => "x86",
        _ => "other",
    })
}

pub fn expected_machine(arch: &str) -> &'static str {
    match arch {
        "arm64" => "aarch64",
        "amd64" => "x86_64",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_machines() {
        let mut h = vec![
            0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0xB7, 0,
        ];
        assert_eq!(elf_machine(&h).unwrap(), "aarch64");
        h[18] = 0x3E;
        assert_eq!(elf_machine(&h).unwrap(), "x86_64");
        assert!(elf_machine(b"#!/bin/sh\n").is_err());
    }
}
